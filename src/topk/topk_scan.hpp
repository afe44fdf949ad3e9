// The CPU fused scan, written once over the ISA structs of core/simd.hpp (and
// a one-lane Scalar struct below) and instantiated in topk_scalar.cpp,
// topk_avx2.cpp and topk_avx512.cpp.
//
// A part of a row is scanned in chunks of kChunk elements (4 KiB of f32, so
// the chunk stays in L1 and memory is read once):
//   pass A: the chunk max, and one vector compare of every element against the
//           threshold (the K-th best logit so far); the rare lanes above it are
//           appended to the candidate buffer (for K <= 16 inserted in order,
//           add_cand, so the threshold rises at once);
//   pass B: sum of exp((x - chunk max) * scale) (as 2^(...), exp2_nonpos),
//           in blocks of 8 vectors summed in f32, each block sum added to
//           double lanes,
//           then merged into the part's (max, sum) (Milakov & Gimelshein 2018:
//           the online normalizer, one rescale per chunk instead of per element).
// For K > 16 the buffer is flushed (nth_element, topk.cpp) whenever it holds
// more than 2K or a full chunk might not fit, which also raises the threshold.
#pragma once
#include <cmath>
#include <cstring>
#include <type_traits>

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
  static V add(V a, V b) { return a + b; }
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

// 2^t for t <= 0: simd::exp2_nonpos (error bound stated there), std::exp2 on
// the scalar path.
template <class S>
typename S::V exp2_nonpos(typename S::V t) {
  if constexpr (std::is_same_v<S, Scalar>)
    return std::exp2(t);
  else
    return simd::exp2_nonpos<S>(t);
}

// Adds candidate x (x.x > b.thr, indices increasing within a part). Small k
// (MoE routing, greedy): c[0, n) stays sorted under `better` with n <= k, an
// insertion per candidate, and thr rises to the k-th as soon as k are held, so
// a short row (V = 8 .. 256) admits about k * ln(V / k) candidates instead of
// all of its first chunk. Larger k: appended, the flushes select.
inline void add_cand(CandBuf& b, Cand x) {
  if (b.k > kInsertK) {
    b.c[b.n++] = x;
    return;
  }
  if (!(x.x > b.thr)) return;  // thr rose since the vector compare
  int64_t i = b.n < b.k ? b.n++ : b.k - 1;  // full: x beats c[k-1] (x.x > thr), which drops out
  for (; i > 0 && better(x, b.c[i - 1]); --i) b.c[i] = b.c[i - 1];
  b.c[i] = x;
  if (b.n == b.k) b.thr = b.c[b.k - 1].x;
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
    V vthr = S::set1(b.thr);
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
          add_cand(b, Cand{lane[l], int32_t(j + l)});
          mask &= mask - 1;
        } while (mask);
        vthr = S::set1(b.thr);
      }
    }
    float mc = S::hmax(vm);
    for (int64_t t = j; t < c1; ++t) {
      const float x = to_f32(row[t]);
      mc = std::isnan(x) ? x : std::max(mc, x);
      if (x > b.thr) add_cand(b, Cand{x, int32_t(t)});
    }
    // Pass B: sum of exp relative to the chunk max (a NaN or +inf makes it NaN).
    PartState cs{mc, 0.0};
    if (mc == kNegInf) {  // all -inf, or -inf and NaN: look for the NaN
      for (int64_t t = c0; t < c1; ++t)
        if (std::isnan(to_f32(row[t]))) cs.s = std::nan("");
    } else {
      const V vmc = S::set1(mc);
      DoubleAcc<S> acc;
      const auto term = [&](int64_t i) { return exp2_nonpos<S>(S::mul(S::sub(S::load(row + i), vmc), vscale2)); };
      // Blocks of kBlock vectors: independent exps (ILP), summed in f32 by a
      // tree (each lane a sum of kBlock terms, log2(kBlock) = 3 roundings, so
      // below 3 * 2^-24 relative for these positive terms), and only the block
      // sum is widened into the double accumulator.
      constexpr int kBlock = 8;
      j = c0;
      for (; j + kBlock * W <= c1; j += kBlock * W) {
        V e[kBlock];
        for (int u = 0; u < kBlock; ++u) e[u] = term(j + u * W);
        for (int h = kBlock / 2; h > 0; h /= 2)
          for (int u = 0; u < h; ++u) e[u] = S::add(e[u], e[u + h]);
        acc.add(e[0]);
      }
      for (; j + W <= c1; j += W) acc.add(term(j));
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
