// A thin SIMD layer so a CPU kernel is written once, as a template over an ISA
// struct, and instantiated in its *_avx2.cpp and *_avx512.cpp files:
//
//   template <class S> void kernel(...) { typename S::V acc = S::zero(); ... }
//   // foo_avx2.cpp:   template void kernel<simd::Avx2>(...);
//   // foo_avx512.cpp: template void kernel<simd::Avx512>(...);
//
// Only the struct whose ISA the translation unit is compiled for is defined
// (cmake/LlmkSimd.cmake sets the flags by file name). All lanes are f32.
// Conversions from f16 use F16C; bf16 <-> f32 round to nearest even with NaN
// kept quiet, exactly like llmk/dtype.hpp's scalar conversions.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/constants.hpp"
#include "llmk/dtype.hpp"

namespace llmk::simd {

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
struct Avx2 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr const char* kName = "avx2";

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const f16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V load(const bf16* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store(f16* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store(bf16* p, V v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, qnan, nan);
    // pack 8 x u32 (each < 65536) to 8 x u16 in order
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(lo, hi));
  }

  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }  // a*b + c
  static V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }  // a*b - c, one rounding
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  // Bit i set when lane i of a > b (ordered: NaN compares false).
  static unsigned gt_mask(V a, V b) { return unsigned(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ))); }
  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // 2^n for z = n + 127 + 1.5 * 2^23 as a float, n an integer in [-127, 128]:
  // z's low mantissa bits hold the biased exponent n + 127, the bits above shift out.
  static V pow2i_biased(V z) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(z), 23)); }
  // Lane i of `table` picked by the low 3 bits of lane i of idx's bits.
  static V permute(V table, V idx) { return _mm256_permutevar8x32_ps(table, _mm256_castps_si256(idx)); }
  // The bits of a plus the bits of b shifted left by N, as 32-bit integers.
  template <int N>
  static V add_shifted_bits(V a, V b) {
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_slli_epi32(_mm256_castps_si256(b), N)));
  }
  static V select(V mask_src_a, V b, V mask) { return _mm256_blendv_ps(mask_src_a, b, mask); }
  static V cmp_gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static V cmp_ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static V cmp_eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  // A compare's mask in the ISA's own form (here a vector) and a blend by it:
  // for chains of compare-and-select that should not convert masks (Avx512).
  using M = V;
  static M ge_m(V a, V b) { return cmp_ge(a, b); }
  static V blend_m(V a, V b, M m) { return select(a, b, m); }  // m ? b : a
};

// sum_j u[j] s[j] over 32 bytes (u unsigned <= 128, s signed in [-127, 127]) as
// 8 int32 sums of 4 products each: maddubs's pair sums (<= 2 * 128 * 127 <
// 2^15) never saturate, so in a *_avx512vnni.cpp file one vpdpbusd gives the
// same sums as maddubs + madd (the quantized matmul tile, the attention's
// quantized-K scores). In an unnamed namespace: each file keeps its own copy,
// so the VNNI body never reaches an AVX2 or AVX-512 path.
namespace {
inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
}  // namespace

// The avxvnni level's ISA struct: AVX2, whose kernels take 256-bit VNNI
// (vpdpbusd, vpdpwssd) for their integer dots (*_avxvnni.cpp). A distinct type,
// so its kernels' names say avxvnni (tests/core/check_isa_leaks.py).
struct AvxVnni : Avx2 {
  static constexpr const char* kName = "avxvnni";
};
template <class S>
inline constexpr bool kAvxVnni = std::is_same_v<S, AvxVnni>;

// The VNNI instructions are inline asm, so the *_avxvnni*.cpp files need no
// flag beyond AVX2's and the compiler emits nothing else of AVX-512:
// VEX-encoded (AVX-VNNI) where the file defines LLMK_VNNI256_VEX, else EVEX on
// ymm0-15 (AVX-512 VNNI + VL: the level on Ice Lake and Zen 4). In an unnamed
// namespace, as dot_u8s8: each file keeps its own encoding.
#if defined(LLMK_VNNI256_VEX)
#define LLMK_VNNI256_ENC "%{vex%} "
#else
#define LLMK_VNNI256_ENC ""
#endif
namespace {
// acc + per dword lane the sum of the 4 products of u's unsigned and s's signed bytes.
[[gnu::always_inline]] inline __m256i dpbusd_avxvnni(__m256i acc, __m256i u, __m256i s) {
  asm(LLMK_VNNI256_ENC "vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
  return acc;
}
// acc + per dword lane the sum of the 2 products of a's and b's int16 pairs (no saturation).
[[gnu::always_inline]] inline __m256i dpwssd_avxvnni(__m256i acc, __m256i a, __m256i b) {
  asm(LLMK_VNNI256_ENC "vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}
}  // namespace
#else
template <class S>
inline constexpr bool kAvxVnni = false;  // no AvxVnni where AVX2 is not compiled
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr const char* kName = "avx512";

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const f16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V load(const bf16* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(f16* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store(bf16* p, V v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }

  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static unsigned gt_mask(V a, V b) { return unsigned(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  static V pow2i_biased(V z) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(z), 23)); }
  static V permute(V table, V idx) { return _mm512_permutexvar_ps(_mm512_castps_si512(idx), table); }  // low 4 bits
  template <int N>
  static V add_shifted_bits(V a, V b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_slli_epi32(_mm512_castps_si512(b), N)));
  }
  // Masks are carried as V with all-ones lanes, like AVX2, so templates stay ISA-neutral.
  static V select(V a, V b, V mask) {
    return _mm512_mask_mov_ps(a, _mm512_movepi32_mask(_mm512_castps_si512(mask)), b);
  }
  static V cmp_gt(V a, V b) { return mask_to_v(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)); }
  static V cmp_ge(V a, V b) { return mask_to_v(_mm512_cmp_ps_mask(a, b, _CMP_GE_OQ)); }
  static V cmp_eq(V a, V b) { return mask_to_v(_mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)); }
  using M = __mmask16;
  static M ge_m(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static V blend_m(V a, V b, M m) { return _mm512_mask_mov_ps(a, m, b); }  // m ? b : a

 private:
  static V mask_to_v(__mmask16 m) { return _mm512_castsi512_ps(_mm512_movm_epi32(m)); }
};
#endif

// One lane in plain C++ with the interface of the ISA structs above: the
// scalar path of a kernel template (`kernel<simd::Scalar>`), and the tail of
// a vector loop. Defined in every translation unit (it needs no ISA flags),
// hence the unnamed namespace: each TU keeps its own copies, so the linker can
// never hand the scalar path a copy compiled with AVX flags in a *_avx2.cpp.
// max follows vmaxps (the second operand when either is NaN); fmadd rounds
// twice (no FMA instruction is assumed).
namespace {
struct Scalar {
  using V = float;
  static constexpr int kWidth = 1;
  static constexpr const char* kName = "scalar";

  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  template <class T>
  static V load(const T* p) {
    return to_f32(*p);
  }
  template <class T>
  static void store(T* p, V v) {
    *p = from_f32<T>(v);
  }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V fmsub(V a, V b, V c) { return a * b - c; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V min(V a, V b) { return a < b ? a : b; }
  static unsigned gt_mask(V a, V b) { return a > b ? 1u : 0u; }
  static float hsum(V v) { return v; }
  static float hmax(V v) { return v; }
};
}  // namespace

// 2^t for t <= 0 (the terms of a softmax sum, t = (x - max) * log2(e) / T),
// relative error below 2e-7 for t >= -125, exactly 0 for t < -126.5 and for
// t = -inf, NaN stays NaN. t = n + r with n = round(t) and r in [-1/2, 1/2]
// exact; 2^r by a degree-5 polynomial with p(0) = 1 exactly (Lawson-weighted
// fit for relative error, coefficients rounded to f32, FMA Horner;
// Simd.Exp2NonposWithinBoundOnEveryNonpositiveInput asserts 1.75e-7 on 18.4
// million t and prints the worst it saw, 1.66e-7 with AVX2); 2^n from the exponent bits,
// which are 0 for n = -127, so t is clamped to -127 first (2^t < 2^-126.5 then
// flushes to 0, an absolute error below 2^-126). A NaN t survives the clamp
// (max returns its second operand on NaN) and makes p NaN. 11 vector ops (6 of
// them FMA or mul), no branches, for t <= 0 only (a full-range exp with
// overflow, underflow and subnormal handling takes about twice that). The softmax sum needs no more (its budget is 1e-6
// relative, docs/softmax_topk.md); the degree-6 polynomial this replaced
// (7.9e-8) took one FMA more an element.
template <class S>
inline typename S::V exp2_nonpos(typename S::V t) {
  using V = typename S::V;
  t = S::max(S::set1(-127.0f), t);
  // n = round(t) by adding 1.5 * 2^23 + 127 (the sum's ulp is 1): two adds
  // instead of a round and a float -> int conversion, and z's low mantissa
  // bits hold the biased exponent n + 127 for pow2i_biased.
  const V shifter = S::set1(12583039.0f);
  const V z = S::add(t, shifter);
  const V r = S::sub(t, S::sub(z, shifter));
  V p = S::set1(1.326472731e-03f);
  p = S::fmadd(p, r, S::set1(9.671512991e-03f));
  p = S::fmadd(p, r, S::set1(5.550733581e-02f));
  p = S::fmadd(p, r, S::set1(2.402224243e-01f));
  p = S::fmadd(p, r, S::set1(6.931470037e-01f));
  p = S::fmadd(p, r, S::set1(1.0f));
  return S::mul(p, S::pow2i_biased(z));
}

// 2^(x * s - c) for s >= 2^-100 and an offset c that is a multiple of 1/8
// with |c| <= 2^18 (offset_for gives one), where x * s - c <= 120: the terms
// of a softmax sum, 2^((x - max) log2(e) / T), for the topk scan (x a logit,
// c = max * s rounded up to the 1/8 grid, so the subtraction x - max folds
// into the first FMA) and for attention (x = score - max, c = 0). x is
// clamped to lo = (c - 127) / s (so x s - c >= -127 up to 2^-24 |c - 127| <
// 1/16, and -inf gives exactly 0); z = x * s + c1, c1 = 1.5 * 2^20 + 127 - c
// (exact: on the 1/8 grid in [2^20, 2^21)), by one FMA; z's ulp is 1/8, so
// its low mantissa bits hold q = round(8 (x s - c + 127)) = 8 (n + 127) + j,
// j in [0, 8); r = x * s - (z - c1) by a second FMA (z - c1 is exact), |r| <=
// 1/16, the exact x s - c + 127 - q / 8 rounded once. Then 2^(x s - c) = p(r)
// * 2^(j / 8) * 2^n: the table entry is picked by j (the permute reads the
// low bits of z) and stored as its mantissa bits minus j << 20, so adding q
// << 20 gives the bits of 2^(j / 8) * 2^n in one integer add; one multiply by
// p(r) (a degree-3 Lawson fit, p(0) = 1, 2.5e-8 on [-1/16, 1/16]). 11 vector
// ops, 6 of them on the FMA pipes (the same fold with exp2_nonpos's degree-5
// polynomial: 8). Bounds, tested in tests/core/test_simd.cpp: 1.9e-7 relative
// against the exact x s - c for -126 <= x s - c <= 120; below, the exponent
// field may be 0 (a subnormal without the implicit one), an absolute error
// under 2^-126; NaN stays NaN (the multiply by p(NaN)).
// s < 2^-100 would make lo overflow: the caller uses exp2_nonpos(d * s) there.
inline constexpr double kExp2MaxOffset = 0x1p18;
// The least offset for Exp2Scaled >= x * scale (x * scale is exact in
// double: 48 bits), or NaN where there is none (beyond 2^18).
inline double exp2_offset_for(float x, float scale) {
  const double c = std::ceil(double(x) * double(scale) * 8) / 8;
  return std::fabs(c) <= kExp2MaxOffset ? c : std::numeric_limits<double>::quiet_NaN();
}
template <class S>
struct Exp2Scaled {
  using V = typename S::V;
  static constexpr float kMinScale = 0x1p-100f;
  static constexpr int kBits = 3;  // 8 entries; AVX-512's 16 lanes hold them twice (its permute reads 4 bits)
  static constexpr float kShifter = 1.5f * float(1 << (23 - kBits)) + 127.0f;
  static_assert(S::kWidth % 8 == 0, "the table fills whole lanes");
  float scale;
  V s, lo, c1, table;
  explicit Exp2Scaled(float scale, float c = 0) : scale(scale), s(S::set1(scale)) {
    // Mantissa bits of 2^(j / 8) rounded to f32.
    static constexpr uint32_t kM[8] = {0x000000u, 0x0b95c2u, 0x1837f0u, 0x25fed7u,
                                       0x3504f3u, 0x45672au, 0x5744fdu, 0x6ac0c7u};
    alignas(64) uint32_t t[S::kWidth];
    for (int i = 0; i < S::kWidth; ++i) t[i] = kM[i % 8] - (uint32_t(i % 8) << (23 - kBits));
    alignas(64) float tf[S::kWidth];
    std::memcpy(tf, t, sizeof(t));
    table = S::load(tf);
    rebase(c);
  }
  void rebase(float c) {
    c1 = S::set1(kShifter - c);
    lo = S::set1((c - 127.0f) / scale);
  }
  V operator()(V x) const {
    x = S::max(lo, x);  // NaN x stays NaN
    const V z = S::fmadd(x, s, c1);
    const V r = S::fmsub(x, s, S::sub(z, c1));
    V p = S::set1(5.549622327e-02f);
    p = S::fmadd(p, r, S::set1(2.402576357e-01f));
    p = S::fmadd(p, r, S::set1(6.931472421e-01f));
    p = S::fmadd(p, r, S::set1(1.0f));
    return S::mul(p, S::template add_shifted_bits<23 - kBits>(S::permute(table, z), z));
  }
};

}  // namespace llmk::simd
