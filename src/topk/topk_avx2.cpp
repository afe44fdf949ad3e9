// The fused softmax + top-k scan (topk_scan.hpp) instantiated for
// AVX2+FMA+F16C (compiled with those flags by cmake/LlmkSimd.cmake).
#include "topk/topk_scan.hpp"

namespace llmk::topk {
void scan_avx2(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  scan<simd::Avx2>(row, dtype, lo, hi, scale, b, st);
}
int64_t small_avx2(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st) {
  return small_row<simd::Avx2>(row, dtype, v, k, scale, c, st);
}
void small_rows_avx2(const void* base, DType dtype, int64_t ld, int64_t nr, int64_t v, int64_t k, float scale, Cand* c,
                     PartState* st) {
  small_rows<simd::Avx2>(base, dtype, ld, nr, v, k, scale, c, st);
}
void probs_avx2(const Cand* c, int64_t k, double m, double scale, double s, float* out) {
  probs_pd<simd::Avx2>(c, k, m, scale, s, out);
}
void exp_div_avx2(const double* d, const double* s, int64_t n, float* out) { exp_div_pd<simd::Avx2>(d, s, n, out); }
}  // namespace llmk::topk
