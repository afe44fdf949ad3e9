// The fused softmax + top-k scan (topk_scan.hpp) instantiated for
// the one-lane Scalar struct (no ISA flags).
// GCC 12 warns that small_row_typed's max_all may read its stack copy of the
// row uninitialized: false (the row has v >= 1 logits, validated, and the
// one-lane path reads exactly the v copied), silenced here only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "topk/topk_scan.hpp"

namespace llmk::topk {
void scan_scalar(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  scan<Scalar>(row, dtype, lo, hi, scale, b, st);
}
int64_t small_scalar(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st) {
  return small_row<Scalar>(row, dtype, v, k, scale, c, st);
}
}  // namespace llmk::topk
