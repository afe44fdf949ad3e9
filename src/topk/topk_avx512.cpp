// The fused softmax + top-k scan (topk_scan.hpp) instantiated for
// AVX-512 F/BW/VL/DQ (compiled with those flags by cmake/LlmkSimd.cmake).
#include "topk/topk_scan.hpp"

namespace llmk::topk {
void scan_avx512(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  scan<simd::Avx512>(row, dtype, lo, hi, scale, b, st);
}
}  // namespace llmk::topk
