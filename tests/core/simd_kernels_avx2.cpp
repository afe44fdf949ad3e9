// The SIMD layer instantiated for AVX2, for test_simd.cpp (which calls these
// only when the CPU has AVX2).
#include "core/simd.hpp"

namespace llmk::test {
void exp2_nonpos_avx2(const float* x, float* y, int n) {
  using S = simd::Avx2;
  for (int i = 0; i < n; i += S::kWidth) S::store(y + i, simd::exp2_nonpos<S>(S::load(x + i)));
}
void exp2_scaled_avx2(const float* x, float scale, float c, float* y, int n) {
  using S = simd::Avx2;
  const simd::Exp2Scaled<S> e(scale, c);
  for (int i = 0; i < n; i += S::kWidth) S::store(y + i, e(S::load(x + i)));
}
void bf16_roundtrip_avx2(const float* x, bf16* y, int n) {
  using S = simd::Avx2;
  for (int i = 0; i < n; i += S::kWidth) S::store(y + i, S::load(x + i));
}
}  // namespace llmk::test
