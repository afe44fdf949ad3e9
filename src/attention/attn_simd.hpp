// Per-ISA pieces the attention kernels need on top of src/core/simd.hpp (whose
// one-lane simd::Scalar is the scalar path's ISA struct, attn::Scalar): loads of
// kWidth int8 quants and of kWidth int4 nibbles (low or high) as f32 lanes,
// exp over lanes, f16 -> f32 of one scale (F16C where compiled; exact either
// way, so every path gets the same bits), and the integer dot products of a
// 32-value int8 query group with an int8 (Q8_0) or int4 (Q4_1 nibbles) K group.
// The dots return lanes whose sum is the exact integer dot (|dot| <= 32*128*127
// < 2^24, so every lane and every partial sum of lanes is exact in f32). Each specialization exists only where its ISA
// is compiled.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/simd.hpp"
#include "llmk/kv_quant.hpp"

namespace llmk::attn {
namespace {  // per translation unit, as in attention_kernel.hpp

using Scalar = simd::Scalar;

template <class S>
typename S::V load_i8(const int8_t* p);  // kWidth quants
// kWidth nibbles of p[0..kWidth): (p[j] >> shift) & 15, shift 0 (low) or 4 (high), no branch.
template <class S>
typename S::V load_u4(const uint8_t* p, int shift);
// The 2 * kWidth values j0 .. j0 + 2 * kWidth of an int4 group from its 16
// nibble bytes qs (j0 a multiple of 2 * kWidth, <= 16): x[0], x[1]. One load
// and one unpack for both vectors (P.V's two-vector chunks).
template <class S>
void load_u4x2(const uint8_t* qs, int j0, typename S::V* x);
// exp(x) for x <= 0 (a score minus its row's max; -inf gives 0): 2^(x log2 e)
// with the product folded into the reduction (simd::Exp2Scaled, relative
// error below 1.9e-7), for x <= 0 only: no overflow or subnormal handling.
template <class S>
typename S::V exp_v(typename S::V x);
template <class S>
float h2f(uint16_t h);
// sum_j q[j] * k[j], j < 32 (q, k int8; q in [-127, 127]), and
// sum_{j<16} q[j] * (nib[j] & 15) + q[j+16] * (nib[j] >> 4): the scalar path's
// integer dots (the vector ISAs use qdots4 / qdots4x2 below).
template <class S>
typename S::V idot_q8(const int8_t* q, const int8_t* k);
template <class S>
typename S::V idot_q4(const int8_t* q, const uint8_t* nib);
// Scores of one int8 (Q4 = false) or int4 (Q4 = true) K row of ng groups against
// 4 quantized query rows q8 + i * ng * 32 (32 int8 per group), scales dq[g * R + i]
// and Q4_1 min factors qsum[g * R + i]:
// out[i * ostride] = sum_g (dk_g dq) idot_g [+ mk_g qsum]. The 4 integer dots of a
// group are reduced together (hadd tree) and scaled with one 4-lane FMA; only
// where the ISA has 128-bit lanes (not Scalar). The 4 rows must exist (the
// caller pads with zero rows); only the first nrows (1..4) results are stored.
template <class S, bool Q4>
void qdots4(const uint8_t* krow, const int8_t* q8, const float* dq, const float* qsum, int64_t ng, int64_t R,
            float* out, int ostride, int nrows);
// qdots4 for two K rows a and b at once (out[i * ostride] for a, out[i *
// ostride + 1] for b): the query loads are shared and the 8 dots of a group
// are reduced and scaled as one 8-lane vector. Every lane does the arithmetic
// of qdots4 in the same order: the same bits.
template <class S, bool Q4>
void qdots4x2(const uint8_t* ka, const uint8_t* kb, const int8_t* q8, const float* dq, const float* qsum, int64_t ng,
              int64_t R, float* out, int ostride, int nrows);

template <>
inline float load_i8<Scalar>(const int8_t* p) {
  return float(*p);
}
template <>
inline float load_u4<Scalar>(const uint8_t* p, int shift) {
  return float((*p >> shift) & 15);
}
template <>
inline void load_u4x2<Scalar>(const uint8_t* qs, int j0, float* x) {
  for (int i = 0; i < 2; ++i) x[i] = load_u4<Scalar>(qs + (j0 + i) % 16, j0 >= 16 ? 4 : 0);
}
template <>
inline float exp_v<Scalar>(float x) {
  return std::exp(x);
}
template <>
inline float h2f<Scalar>(uint16_t h) {
  return f16_bits_to_f32(h);
}
template <>
inline float idot_q8<Scalar>(const int8_t* q, const int8_t* k) {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += int32_t(q[j]) * k[j];
  return float(s);
}
template <>
inline float idot_q4<Scalar>(const int8_t* q, const uint8_t* nib) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += int32_t(q[j]) * (nib[j] & 15) + int32_t(q[j + 16]) * (nib[j] >> 4);
  return float(s);
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The avxvnni level (simd::AvxVnni) takes 256-bit VNNI for the quantized-K
// scores and the int8-V P.V (attention_kernel.hpp): the same integer sums, so
// AVX2's bits. The pieces declared above are AVX2's (Isa<AvxVnni> is simd::Avx2).
using simd::AvxVnni;
using simd::dpbusd_avxvnni;
using simd::dpwssd_avxvnni;
template <class S>
struct IsaOf {
  using type = S;
};
template <>
struct IsaOf<AvxVnni> {
  using type = simd::Avx2;
};
// The ISA struct whose specializations of the pieces above serve S.
template <class S>
using Isa = typename IsaOf<S>::type;
#else
template <class S>
using Isa = S;
#endif
using simd::kAvxVnni;

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <>
inline __m256 load_i8<simd::Avx2>(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
template <>
inline __m256 load_u4<simd::Avx2>(const uint8_t* p, int shift) {
  const __m256i b = _mm256_srl_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
                                     _mm_cvtsi32_si128(shift));
  return _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(15)));
}
template <>
inline void load_u4x2<simd::Avx2>(const uint8_t* qs, int j0, __m256* x) {  // j0 = 0 or 16
  const __m128i b = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)),
                                                _mm_cvtsi32_si128(j0 >= 16 ? 4 : 0)),
                                  _mm_set1_epi8(15));
  x[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  x[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
}
template <>
[[gnu::always_inline]] inline __m256 exp_v<simd::Avx2>(__m256 x) {
  return simd::Exp2Scaled<simd::Avx2>(kLog2e)(x);
}
template <>
inline float h2f<simd::Avx2>(uint16_t h) {
  return _cvtsh_ss(h);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The AVX2 body of qdots4, shared by the AVX-512 builds (the 32-value groups fill 256 bits).
template <bool Q4>
inline void qdots4_x86(const uint8_t* krow, const int8_t* q8, const float* dq, const float* qsum, int64_t ng, int64_t R,
                       float* out, int ostride, int nrows) {
  __m128 acc = _mm_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    __m256i u, sgn[4];  // unsigned K operand; the 4 signed query operands
    float dk;
    const int8_t* q = q8 + g * kKvGroup;
    if constexpr (Q4) {
      const BlockQ4& b = reinterpret_cast<const BlockQ4*>(krow)[g];
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)), m = _mm_set1_epi8(15);
      u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
      for (int i = 0; i < 4; ++i) sgn[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * ng * kKvGroup));
      dk = _cvtsh_ss(b.d);
      acc = _mm_fmadd_ps(_mm_set1_ps(_cvtsh_ss(b.m)), _mm_loadu_ps(qsum + g * R), acc);
    } else {
      const BlockQ8& b = reinterpret_cast<const BlockQ8*>(krow)[g];
      const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
      // |k| as u8 (128 too) and q with k's sign: a maddubs pair sum is <= 2 * 128 * 127 < 2^15, no saturation
      u = _mm256_sign_epi8(k, k);
      for (int i = 0; i < 4; ++i)
        sgn[i] = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * ng * kKvGroup)), k);
      dk = _cvtsh_ss(b.d);
    }
    __m256i p[4];
    for (int i = 0; i < 4; ++i) p[i] = simd::dot_u8s8(u, sgn[i]);
    // [p0 p1 p2 p3] partial sums per 128-bit half, then the halves added: lane i = row i's dot
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m128i d = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(d), _mm_mul_ps(_mm_set1_ps(dk), _mm_loadu_ps(dq + g * R)), acc);
  }
  alignas(16) float o[4];
  _mm_store_ps(o, acc);
  for (int i = 0; i < nrows; ++i) out[i * ostride] = o[i];
}
template <bool Q4>
[[gnu::always_inline]] inline void qdots4x2_x86(const uint8_t* ka, const uint8_t* kb, const int8_t* q8, const float* dq,
                                                const float* qsum, int64_t ng, int64_t R, float* out, int ostride,
                                                int nrows) {
  __m256 acc = _mm256_setzero_ps();  // lanes 0-3: rows 0-3 against a; 4-7: against b
  for (int64_t g = 0; g < ng; ++g) {
    const int8_t* q = q8 + g * kKvGroup;
    __m256i qv[4];
    for (int i = 0; i < 4; ++i) qv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * ng * kKvGroup));
    __m256i p[2][4];
    float dk[2];
    const uint8_t* kr[2] = {ka, kb};
    for (int j = 0; j < 2; ++j) {
      __m256i u, sgn[4];
      if constexpr (Q4) {
        const BlockQ4& b = reinterpret_cast<const BlockQ4*>(kr[j])[g];
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)), m = _mm_set1_epi8(15);
        u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
        for (int i = 0; i < 4; ++i) sgn[i] = qv[i];
        dk[j] = _cvtsh_ss(b.d);
      } else {
        const BlockQ8& b = reinterpret_cast<const BlockQ8*>(kr[j])[g];
        const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
        u = _mm256_sign_epi8(k, k);
        for (int i = 0; i < 4; ++i) sgn[i] = _mm256_sign_epi8(qv[i], k);
        dk[j] = _cvtsh_ss(b.d);
      }
      for (int i = 0; i < 4; ++i) p[j][i] = simd::dot_u8s8(u, sgn[i]);
    }
    if constexpr (Q4) {
      const BlockQ4* ba = reinterpret_cast<const BlockQ4*>(ka) + g;
      const BlockQ4* bb = reinterpret_cast<const BlockQ4*>(kb) + g;
      const __m256 mk = _mm256_set_m128(_mm_set1_ps(_cvtsh_ss(bb->m)), _mm_set1_ps(_cvtsh_ss(ba->m)));
      acc = _mm256_fmadd_ps(mk, _mm256_broadcast_ps(reinterpret_cast<const __m128*>(qsum + g * R)), acc);
    }
    // per key: [dots of rows 0-3 over the low 128 bits | over the high 128 bits], then the halves added
    const __m256i ha = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0][0], p[0][1]), _mm256_hadd_epi32(p[0][2], p[0][3]));
    const __m256i hb = _mm256_hadd_epi32(_mm256_hadd_epi32(p[1][0], p[1][1]), _mm256_hadd_epi32(p[1][2], p[1][3]));
    const __m256i d = _mm256_add_epi32(_mm256_permute2x128_si256(ha, hb, 0x20),
                                       _mm256_permute2x128_si256(ha, hb, 0x31));
    const __m256 sc = _mm256_mul_ps(_mm256_set_m128(_mm_set1_ps(dk[1]), _mm_set1_ps(dk[0])),
                                    _mm256_broadcast_ps(reinterpret_cast<const __m128*>(dq + g * R)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, acc);
  }
  alignas(32) float o[8];
  _mm256_store_ps(o, acc);
  for (int i = 0; i < nrows; ++i) out[i * ostride] = o[i], out[i * ostride + 1] = o[4 + i];
}
template <>
inline void qdots4<simd::Avx2, false>(const uint8_t* k, const int8_t* q, const float* dq, const float* qs, int64_t ng,
                                      int64_t R, float* out, int os, int nr) {
  qdots4_x86<false>(k, q, dq, qs, ng, R, out, os, nr);
}
template <>
inline void qdots4<simd::Avx2, true>(const uint8_t* k, const int8_t* q, const float* dq, const float* qs, int64_t ng,
                                     int64_t R, float* out, int os, int nr) {
  qdots4_x86<true>(k, q, dq, qs, ng, R, out, os, nr);
}
template <>
inline void qdots4x2<simd::Avx2, false>(const uint8_t* a, const uint8_t* b, const int8_t* q, const float* dq,
                                        const float* qs, int64_t ng, int64_t R, float* out, int os, int nr) {
  qdots4x2_x86<false>(a, b, q, dq, qs, ng, R, out, os, nr);
}
template <>
inline void qdots4x2<simd::Avx2, true>(const uint8_t* a, const uint8_t* b, const int8_t* q, const float* dq,
                                       const float* qs, int64_t ng, int64_t R, float* out, int os, int nr) {
  qdots4x2_x86<true>(a, b, q, dq, qs, ng, R, out, os, nr);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
template <>
inline __m512 load_i8<simd::Avx512>(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
template <>
inline __m512 load_u4<simd::Avx512>(const uint8_t* p, int shift) {
  const __m512i b = _mm512_srl_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                                     _mm_cvtsi32_si128(shift));
  return _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)));
}
template <>
inline void load_u4x2<simd::Avx512>(const uint8_t* qs, int, __m512* x) {  // j0 = 0: the whole group
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), m = _mm_set1_epi8(15);
  x[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(b, m)));
  x[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), m)));
}
// The f16 scales (and int4 mins) of groups 0..ng of a tile's positions t0 ..
// t0 + 16 (of its n; positions t < n1 in run a, the rest in run b; row stride
// vr) as f32: dt[g * gs + l] (mt[g * gs + l]) for position t0 + l, 0 from n
// on. One gather of the blocks' first 4 bytes (d, then m for Q4_1) per group
// and run. With kCenter (int4 V against quants centered to q - 8,
// pv_q4_rows_avx512vbmi) mt holds m + 8 d instead.
template <bool Q4, bool kCenter = false>
inline void tile_scales_avx512(const uint8_t* a, const uint8_t* b, int n1, int64_t vr, int t0, int n, int64_t ng,
                               int64_t gs, float* dt, float* mt) {
  constexpr int64_t blk = Q4 ? int64_t(sizeof(BlockQ4)) : int64_t(sizeof(BlockQ8));
  // lanes l: position t0 + l, from run a below n1, from run b (at t - n1) up to n
  const __m512i t = _mm512_add_epi32(_mm512_set1_epi32(t0),
                                     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __mmask16 in_a = _mm512_cmplt_epi32_mask(t, _mm512_set1_epi32(std::min(n1, n)));
  const __mmask16 in_b = __mmask16(_mm512_cmplt_epi32_mask(t, _mm512_set1_epi32(n)) & ~in_a);
  const __m512i ia = _mm512_mullo_epi32(t, _mm512_set1_epi32(int32_t(vr)));
  const __m512i ib = _mm512_mullo_epi32(_mm512_sub_epi32(t, _mm512_set1_epi32(n1)), _mm512_set1_epi32(int32_t(vr)));
  for (int64_t g = 0; g < ng; ++g) {
    __m512i x = _mm512_setzero_si512();
    if (in_a) x = _mm512_mask_i32gather_epi32(x, in_a, ia, a + g * blk, 1);
    if (in_b) x = _mm512_mask_i32gather_epi32(x, in_b, ib, b + g * blk, 1);
    _mm512_storeu_ps(dt + g * gs, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x)));
    if constexpr (Q4) {
      __m512 m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
      if constexpr (kCenter)  // v = d q + m = d (q - 8) + (m + 8 d): the min term of centered quants
        m = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(x)), _mm512_set1_ps(8.0f), m);
      _mm512_storeu_ps(mt + g * gs, m);
    }
  }
}
// Lane i of the result = the sum of x_i's 16 lanes, for 4 vectors at once:
// pairs interleaved and added inside 128-bit lanes, then the 4 lanes added.
inline __m128 hsum4_avx512(__m512 x0, __m512 x1, __m512 x2, __m512 x3) {
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(x0, x1), _mm512_unpackhi_ps(x0, x1));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(x2, x3), _mm512_unpackhi_ps(x2, x3));
  const __m512d a = _mm512_castps_pd(s01), b = _mm512_castps_pd(s23);
  const __m512 t = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
template <>
[[gnu::always_inline]] inline __m512 exp_v<simd::Avx512>(__m512 x) {
  return simd::Exp2Scaled<simd::Avx512>(kLog2e)(x);
}
template <>
inline float h2f<simd::Avx512>(uint16_t h) {
  return _cvtsh_ss(h);
}
template <>
inline void qdots4<simd::Avx512, false>(const uint8_t* k, const int8_t* q, const float* dq, const float* qs, int64_t ng,
                                        int64_t R, float* out, int os, int nr) {
  qdots4_x86<false>(k, q, dq, qs, ng, R, out, os, nr);
}
template <>
inline void qdots4<simd::Avx512, true>(const uint8_t* k, const int8_t* q, const float* dq, const float* qs, int64_t ng,
                                       int64_t R, float* out, int os, int nr) {
  qdots4_x86<true>(k, q, dq, qs, ng, R, out, os, nr);
}
template <>
inline void qdots4x2<simd::Avx512, false>(const uint8_t* a, const uint8_t* b, const int8_t* q, const float* dq,
                                          const float* qs, int64_t ng, int64_t R, float* out, int os, int nr) {
  qdots4x2_x86<false>(a, b, q, dq, qs, ng, R, out, os, nr);
}
template <>
inline void qdots4x2<simd::Avx512, true>(const uint8_t* a, const uint8_t* b, const int8_t* q, const float* dq,
                                         const float* qs, int64_t ng, int64_t R, float* out, int os, int nr) {
  qdots4x2_x86<true>(a, b, q, dq, qs, ng, R, out, os, nr);
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// A tile of 16 quantized K rows transposed, one 32-value group at a time, for
// the VNNI scores (attention_kernel.hpp, score_tile_avx512vnni): kt[j] lane t = the
// 4 quants j of key t (the dword j of its group), as unsigned bytes, so that
// one vpdpbusd with query dword j broadcast adds 4 products to each of the 16
// keys' dots. rows[t]: key t's 32 quant bytes (int8) or 16 nibble bytes (int4).
//
// int8: 8 ymm loads, paired as z_i = [key i | key i + 4] and z_{4+i} = [key
// 8 + i | key 12 + i]; a 4 x 4 dword transpose inside each 128-bit lane
// (unpack epi32, then epi64) leaves u_c = [keys 0-3 @ c, keys 0-3 @ 4 + c, keys
// 4-7 @ c, keys 4-7 @ 4 + c] (u' the same for keys 8-15), and one shuffle of
// 128-bit lanes puts keys 0-15 in order. The quants get 128 added (xor 0x80),
// making them unsigned: the caller starts each dot at -128 * sum(q quants).
inline void transpose4_lanes_avx512(const __m512i* z, __m512i* u) {  // u[c] lane L = [z0 z1 z2 z3][L][c]
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  u[0] = _mm512_unpacklo_epi64(t0, t2), u[1] = _mm512_unpackhi_epi64(t0, t2);
  u[2] = _mm512_unpacklo_epi64(t1, t3), u[3] = _mm512_unpackhi_epi64(t1, t3);
}
inline void tile16_q8_avx512(const uint8_t* const* rows, __m512i* kt) {
  const auto ld = [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  __m512i z[8], u[8];
  for (int i = 0; i < 4; ++i) {
    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(ld(rows[i])), ld(rows[i + 4]), 1);
    z[4 + i] = _mm512_inserti64x4(_mm512_castsi256_si512(ld(rows[8 + i])), ld(rows[12 + i]), 1);
  }
  transpose4_lanes_avx512(z, u);
  transpose4_lanes_avx512(z + 4, u + 4);
  const __m512i bias = _mm512_set1_epi8(char(0x80));
  for (int c = 0; c < 4; ++c) {
    kt[c] = _mm512_xor_si512(_mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), bias);      // lanes 0, 2 of each
    kt[4 + c] = _mm512_xor_si512(_mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD), bias);  // lanes 1, 3 of each
  }
}
// int4: z_i = [key i | key 4 + i | key 8 + i | key 12 + i] (16 bytes each), one
// in-lane 4 x 4 transpose gives keys 0-15 @ dword c in order; the low nibbles
// of dword c are elements 4c.. (query dword c), the high ones 16 + 4c..
// (query dword 4 + c). Nibbles are unsigned already.
inline void tile16_q4_avx512(const uint8_t* const* rows, __m512i* kt) {
  const auto ld = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  __m512i z[4], u[4];
  for (int i = 0; i < 4; ++i) {
    z[i] = _mm512_inserti32x4(_mm512_castsi128_si512(ld(rows[i])), ld(rows[4 + i]), 1);
    z[i] = _mm512_inserti32x4(z[i], ld(rows[8 + i]), 2);
    z[i] = _mm512_inserti32x4(z[i], ld(rows[12 + i]), 3);
  }
  transpose4_lanes_avx512(z, u);
  const __m512i m = _mm512_set1_epi8(15);
  for (int c = 0; c < 4; ++c) {
    kt[c] = _mm512_and_si512(u[c], m);
    kt[4 + c] = _mm512_and_si512(_mm512_srli_epi16(u[c], 4), m);
  }
}
#endif

}  // namespace
}  // namespace llmk::attn
