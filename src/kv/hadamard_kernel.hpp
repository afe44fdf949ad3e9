// The fast Walsh-Hadamard transform of llmk/kv_quant.hpp, written once over an
// ISA struct of core/simd.hpp and instantiated in hadamard_avx2.cpp and
// hadamard_avx512.cpp (the scalar path is in hadamard.cpp).
//
// Per row: each vector of W = S::kWidth values goes through the stages h < W
// in registers (lane i meets lane i ^ h: out = v * sign + partner, sign = -1
// on the lanes with bit h set, so a lane computes x[i] + x[i+h] or
// x[i-h] - x[i] exactly as the scalar loop does: a product by +-1 is exact, so
// fused or not the result is one rounding of the same sum), then the stages
// W <= h < block pair whole vectors; the last stage (or the first pass, when
// block <= W) multiplies by c = f32(1/sqrt(block)). Same operations in the
// same order as the scalar loop, hence the same bits.
#pragma once
#include <cstdint>

#include "core/simd.hpp"

namespace llmk::kvrot {
// Everything here is defined in each translation unit that includes this
// header (hadamard_avx2.cpp, hadamard_avx512.cpp), each compiled with its own
// ISA flags, hence the unnamed namespace: each keeps its own copies, and only
// the entry points fwht_rows_avx2 / fwht_rows_avx512 cross files.
namespace {

// Lane i of kSign[k] is -1 when bit 2^k of i is set: the stage-2^k signs.
alignas(64) inline constexpr float kSign[4][16] = {{1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1},
                                                   {1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1},
                                                   {1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1},
                                                   {1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1}};

// Lanes<S>::swap<H>(v): lane i of the result is lane i ^ H of v.
template <class S>
struct Lanes;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <>
struct Lanes<simd::Avx2> {
  template <int H>
  static __m256 swap(__m256 v) {
    if constexpr (H == 1) return _mm256_permute_ps(v, 0xB1);       // [1 0 3 2] in each 128-bit half
    else if constexpr (H == 2) return _mm256_permute_ps(v, 0x4E);  // [2 3 0 1]
    else return _mm256_permute2f128_ps(v, v, 0x01);                // the two 128-bit halves
  }
};
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
template <>
struct Lanes<simd::Avx512> {
  template <int H>
  static __m512 swap(__m512 v) {
    if constexpr (H == 1) return _mm512_permute_ps(v, 0xB1);
    else if constexpr (H == 2) return _mm512_permute_ps(v, 0x4E);
    else if constexpr (H == 4) return _mm512_shuffle_f32x4(v, v, 0xB1);  // 128-bit lanes [1 0 3 2]
    else return _mm512_shuffle_f32x4(v, v, 0x4E);                        // 128-bit lanes [2 3 0 1]
  }
};
#endif

// One in-register stage h = 2^K of a vector.
template <class S, int K>
inline typename S::V stage(typename S::V v) {
  return S::fmadd(v, S::load(kSign[K]), Lanes<S>::template swap<(1 << K)>(v));
}

// x[rows][dim] in place; requires dim % S::kWidth == 0 (the caller checks).
template <class S>
void fwht_rows(float* x, int64_t rows, int64_t dim, int64_t block, float c) {
  using V = typename S::V;
  constexpr int64_t W = S::kWidth;
  const V vc = S::set1(c);
  const int64_t in_reg = block < W ? block : W;  // stages h < in_reg happen in registers
  for (int64_t r = 0; r < rows; ++r) {
    float* p = x + r * dim;  // [dim]
    for (int64_t i = 0; i < dim; i += W) {
      V v = S::load(p + i);
      if (in_reg > 1) v = stage<S, 0>(v);
      if (in_reg > 2) v = stage<S, 1>(v);
      if (in_reg > 4) v = stage<S, 2>(v);
      if constexpr (W > 8)
        if (in_reg > 8) v = stage<S, 3>(v);
      if (block <= W) v = S::mul(v, vc);
      S::store(p + i, v);
    }
    for (int64_t h = W; h < block; h *= 2) {
      const bool last = 2 * h == block;
      for (int64_t b0 = 0; b0 < dim; b0 += 2 * h)
        for (int64_t j = b0; j < b0 + h; j += W) {
          const V a = S::load(p + j), b = S::load(p + j + h);
          V s = S::add(a, b), d = S::sub(a, b);
          if (last) s = S::mul(s, vc), d = S::mul(d, vc);
          S::store(p + j, s);
          S::store(p + j + h, d);
        }
    }
  }
}

}  // namespace
}  // namespace llmk::kvrot
