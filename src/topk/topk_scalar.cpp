// The fused softmax + top-k scan (topk_scan.hpp) instantiated for
// the one-lane Scalar struct (no ISA flags).
#include "topk/topk_scan.hpp"

namespace llmk::topk {
void scan_scalar(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  scan<Scalar>(row, dtype, lo, hi, scale, b, st);
}
}  // namespace llmk::topk
