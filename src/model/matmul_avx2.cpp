// AVX2+FMA+F16C instantiation of the matmul kernels (matmul_kernels.hpp), and
// the AVX2 activation quantizer (model/quant_blocks.hpp).
#include <cmath>
#include <cstring>
#include <limits>

#include "model/matmul_kernels.hpp"

namespace llmk::mm {
void rows_avx2(const Args& a, int64_t n0, int64_t n1) { rows<simd::Avx2>(a, n0, n1); }

// quantize_act_scalar's arithmetic 8 lanes at a time, so the same bytes: |x|
// max by vmaxps (exact), the finite test as |x| < inf (false for NaN too), the
// product x * id in f32 and its conversion under the default rounding mode
// (nearest even, as std::nearbyint), the scales through the same f16 rounding.
void quantize_act_avx2(const float* x, int64_t nb, ActQ8* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the in-lane packs
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    __m256 v[4], amax = _mm256_setzero_ps();
    int finite = 0xff;
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      const __m256 a = _mm256_and_ps(v[i], abs_mask);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_LT_OQ));
      amax = _mm256_max_ps(amax, a);
    }
    if (finite != 0xff) {
      std::memset(out[b].qs, 0, sizeof out[b].qs);  // not std::fill: no template shared with the scalar file
      out[b].d = out[b].s = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float am = _mm_cvtss_f32(m4);
    const float d = am / 127.0f, r = d > 0 ? 127.0f / am : 0.0f;
    const __m256 id = _mm256_set1_ps(std::isfinite(r) ? r : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
    // sum of the 32 quants (exact in int32)
    const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    const int sum = _mm_cvtsi128_si32(s4);
    // |q| <= 127: the saturating packs are exact; they interleave 128-bit lanes, vpermd restores the order
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), _mm256_permutevar8x32_epi32(p, order));
    out[b].d = f16_bits_to_f32(f32_to_f16_bits(d));
    out[b].s = f16_bits_to_f32(f32_to_f16_bits(d * float(sum)));
  }
}
}  // namespace llmk::mm
