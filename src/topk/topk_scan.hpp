// The CPU fused scan, written once over the ISA structs of core/simd.hpp (and
// a one-lane Scalar struct below) and instantiated in topk_scalar.cpp,
// topk_avx2.cpp and topk_avx512.cpp.
//
// A part of a row is scanned in chunks of kChunk elements (4 KiB of f32, so
// the chunk stays in L1 and memory is read once):
//   pass A: the chunk max, and one vector compare of every element against the
//           threshold (the K-th best logit so far); the rare lanes above it are
//           appended to the candidate buffer;
//   pass B: sum of exp((x - chunk max) * scale), accumulated in double lanes,
//           then merged into the part's (max, sum) (Milakov & Gimelshein 2018:
//           the online normalizer, one rescale per chunk instead of per element).
// The buffer is flushed (nth_element, topk.cpp) whenever a full chunk might
// not fit, which also raises the threshold.
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

template <class S>
typename S::V vexp(typename S::V x) {
  if constexpr (std::is_same_v<S, Scalar>)
    return std::exp(x);
  else
    return simd::exp<S>(x);
}

template <class S, class T>
void scan_typed(const T* row, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const V vscale = S::set1(scale);
  for (int64_t c0 = lo; c0 < hi; c0 += kChunk) {
    const int64_t c1 = std::min(hi, c0 + kChunk);
    if (b.n + (c1 - c0) > b.cap) flush(b);
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
      for (j = c0; j + W <= c1; j += W) acc.add(vexp<S>(S::mul(S::sub(S::load(row + j), vmc), vscale)));
      double tail = 0;
      for (int64_t t = j; t < c1; ++t) tail += std::exp((to_f32(row[t]) - mc) * scale);
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
