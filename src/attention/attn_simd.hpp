// Per-ISA pieces the attention kernels need on top of src/core/simd.hpp: a
// one-lane Scalar "ISA" (so the scalar path is the same template), loads of
// kWidth int8 quants and of kWidth int4 nibbles (low or high) as f32 lanes,
// and exp over lanes. Each specialization exists only where its ISA is compiled.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/simd.hpp"

namespace llmk::attn {

struct Scalar {
  using V = float;
  static constexpr int kWidth = 1;
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static V load(const f16* p) { return to_f32(*p); }
  static V load(const bf16* p) { return to_f32(*p); }
  static void store(float* p, V v) { *p = v; }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V fmadd(V a, V b, V c) { return a * b + c; }  // std::fma is a slow libm call without FMA
  static V max(V a, V b) { return a > b ? a : b; }
  static float hsum(V v) { return v; }
};

template <class S> typename S::V load_i8(const int8_t* p);           // kWidth quants
template <class S> typename S::V load_u4(const uint8_t* p, bool hi);  // kWidth nibbles of p[0..kWidth)
template <class S> typename S::V exp_v(typename S::V x);

template <> inline float load_i8<Scalar>(const int8_t* p) { return float(*p); }
template <> inline float load_u4<Scalar>(const uint8_t* p, bool hi) { return float(hi ? *p >> 4 : *p & 15); }
template <> inline float exp_v<Scalar>(float x) { return std::exp(x); }

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <> inline __m256 load_i8<simd::Avx2>(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
template <> inline __m256 load_u4<simd::Avx2>(const uint8_t* p, bool hi) {
  __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  if (hi) b = _mm256_srli_epi32(b, 4);
  return _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(15)));
}
template <> inline __m256 exp_v<simd::Avx2>(__m256 x) { return simd::exp<simd::Avx2>(x); }
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
template <> inline __m512 load_i8<simd::Avx512>(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
template <> inline __m512 load_u4<simd::Avx512>(const uint8_t* p, bool hi) {
  __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if (hi) b = _mm512_srli_epi32(b, 4);
  return _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)));
}
template <> inline __m512 exp_v<simd::Avx512>(__m512 x) { return simd::exp<simd::Avx512>(x); }
#endif

}  // namespace llmk::attn
