// The CPU fused scan, written once over the ISA structs of core/simd.hpp (and
// a one-lane Scalar struct below) and instantiated in topk_scalar.cpp,
// topk_avx2.cpp and topk_avx512.cpp.
//
// A part of a row is scanned in chunks of kChunk elements (4 KiB of f32, so
// the chunk stays in L1 and memory is read once):
//   pass A: the chunk max, and one vector compare of every element against the
//           threshold (the K-th best logit so far); the rare lanes above it are
//           appended to the candidate buffer;
//   pass B: sum of exp((x - chunk max) * scale) (as 2^(...), exp2_nonpos),
//           accumulated in double lanes,
//           then merged into the part's (max, sum) (Milakov & Gimelshein 2018:
//           the online normalizer, one rescale per chunk instead of per element).
// The buffer is flushed (nth_element, topk.cpp) whenever it holds more than
// 2K or a full chunk might not fit, which also raises the threshold.
#pragma once
#include <cmath>
#include <cstring>

#include "core/simd.hpp"
#include "topk/topk_internal.hpp"

namespace llmk::topk {
namespace {

// One lane, plain C++: the scalar path of the same template.
struct Scalar {
  using V = float;
  static constexpr int kWidth = 1;
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static V load(const f16* p) { return to_f32(*p); }
  static V load(const bf16* p) { return to_f32(*p); }
  static V max(V a, V b) { return b > a ? b : a; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static unsigned gt_mask(V a, V b) { return a > b ? 1u : 0u; }
  static float hmax(V v) { return v; }
  static void store(float* p, V v) { *p = v; }
};

// Sum of f32 lanes in double.
template <class S>
struct DoubleAcc;
template <>
struct DoubleAcc<Scalar> {
  double a = 0;
  void add(float v) { a += v; }
  double sum() const { return a; }
};
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <>
struct DoubleAcc<simd::Avx2> {
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  void add(__m256 v) {
    a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double sum() const {
    alignas(32) double t[4];
    _mm256_store_pd(t, _mm256_add_pd(a, b));
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
};
#endif
#if defined(__AVX512F__) && defined(__AVX512DQ__)
template <>
struct DoubleAcc<simd::Avx512> {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  void add(__m512 v) {
    a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  double sum() const { return _mm512_reduce_add_pd(_mm512_add_pd(a, b)); }
};
#endif

// 2^t for t <= 0, every lane: t = n + r with n = round(t), r in [-1/2, 1/2]
// exact, 2^r by its degree-7 Taylor polynomial (truncation < 6e-9 relative,
// Horner rounding ~1 ulp), 2^n by the exponent bits. t below -126 is clamped:
// it then yields < 2^-126 instead of a smaller value or 0, an absolute error
// below V * 2^-126 in a sum that is >= 1. A NaN t stays NaN (max returns its
// second operand on NaN). About 13 instructions, no branches: the simd::exp of
// core/simd.hpp handles the whole f32 range and costs twice that, and exp is
// what bounds this scan.
template <class S>
typename S::V exp2_nonpos(typename S::V t) {
  using V = typename S::V;
  if constexpr (std::is_same_v<S, Scalar>) {
    return std::exp2(t);
  } else {
    t = S::max(S::set1(-126.0f), t);
    const V n = S::round(t);
    const V r = S::sub(t, n);
    V p = S::set1(1.525273380405984e-05f);
    p = S::fmadd(p, r, S::set1(1.5403530393381606e-04f));
    p = S::fmadd(p, r, S::set1(1.3333558146428443e-03f));
    p = S::fmadd(p, r, S::set1(9.618129107628477e-03f));
    p = S::fmadd(p, r, S::set1(5.550410866482158e-02f));
    p = S::fmadd(p, r, S::set1(2.402265069591007e-01f));
    p = S::fmadd(p, r, S::set1(6.931471805599453e-01f));
    p = S::fmadd(p, r, S::set1(1.0f));
    return S::mul(p, S::pow2i(n));
  }
}

template <class S, class T>
void scan_typed(const T* row, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const float scale2 = scale * 1.44269504088896341f;  // exp(d * scale) = 2^(d * scale * log2(e))
  const V vscale2 = S::set1(scale2);
  for (int64_t c0 = lo; c0 < hi; c0 += kChunk) {
    const int64_t c1 = std::min(hi, c0 + kChunk);
    // Flush when a chunk might not fit, and also as soon as the buffer holds
    // more than 2K: the first chunks then raise the threshold early instead of
    // filling the buffer. Each flush costs O(n) and drops n - K >= n / 2
    // candidates, so the work per candidate stays O(1).
    if (b.n + (c1 - c0) > b.cap || b.n > 2 * b.k) flush(b);
    // Pass A: chunk max and threshold filter.
    const V vthr = S::set1(b.thr);
    V vm = S::set1(kNegInf);
    int64_t j = c0;
    for (; j + W <= c1; j += W) {
      const V x = S::load(row + j);
      vm = S::max(vm, x);
      unsigned mask = S::gt_mask(x, vthr);
      if (mask) {
        alignas(64) float lane[W];
        S::store(lane, x);
        do {
          const int l = __builtin_ctz(mask);
          b.c[b.n++] = Cand{lane[l], int32_t(j + l)};
          mask &= mask - 1;
        } while (mask);
      }
    }
    float mc = S::hmax(vm);
    for (int64_t t = j; t < c1; ++t) {
      const float x = to_f32(row[t]);
      mc = std::isnan(x) ? x : std::max(mc, x);
      if (x > b.thr) b.c[b.n++] = Cand{x, int32_t(t)};
    }
    // Pass B: sum of exp relative to the chunk max (a NaN or +inf makes it NaN).
    PartState cs{mc, 0.0};
    if (mc == kNegInf) {  // all -inf, or -inf and NaN: look for the NaN
      for (int64_t t = c0; t < c1; ++t)
        if (std::isnan(to_f32(row[t]))) cs.s = std::nan("");
    } else {
      const V vmc = S::set1(mc);
      DoubleAcc<S> acc;
      for (j = c0; j + W <= c1; j += W) {
        // Pass B computes from L1; meanwhile pull the next chunk toward the
        // caches, so memory stays busy (a prefetch past the row cannot fault).
        if ((j - c0) % 16 == 0) __builtin_prefetch(row + j + kChunk);
        acc.add(exp2_nonpos<S>(S::mul(S::sub(S::load(row + j), vmc), vscale2)));
      }
      double tail = 0;
      for (int64_t t = j; t < c1; ++t) tail += std::exp2((to_f32(row[t]) - mc) * scale2);
      cs.s = acc.sum() + tail;
    }
    merge_state(st, cs, scale);
  }
}

template <class S>
void scan(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  switch (dtype) {
    case DType::f16: return scan_typed<S>(static_cast<const f16*>(row), lo, hi, scale, b, st);
    case DType::bf16: return scan_typed<S>(static_cast<const bf16*>(row), lo, hi, scale, b, st);
    default: return scan_typed<S>(static_cast<const float*>(row), lo, hi, scale, b, st);
  }
}

}  // namespace
}  // namespace llmk::topk
