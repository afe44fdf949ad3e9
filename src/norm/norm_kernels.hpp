// The CPU LayerNorm / RMSNorm kernels, written once as templates over an ISA
// struct S (simd::Avx2, simd::Avx512 or simd::Scalar) and the
// storage type T, and instantiated by norm_cpu.cpp, norm_avx2.cpp and
// norm_avx512.cpp through make_kernels<S>().
//
// Per row (D elements, which stay in L1/L2 between the passes):
//  forward:  pass 1  dm = sum(x - x0) / D, mean = x0 + dm, and sum((x - x0)^2)
//                    (x0: the mean of the first vector; shifted: exact for a constant row)
//            pass 2  only where x0 is not within sd / 2 of the mean:
//                    var = sum(((x - x0) - dm)^2) / D (two-pass: no E[x^2] - E[x]^2 cancellation)
//            pass 3  y = ((x - x0) - dm) * rstd * w + b
//            RMSNorm: x0 = dm = 0 and no b.
//  backward: pass A  xc = x - mean, g = dy * w; sums of xc, g and g * xc
//            pass B  x_hat = (xc - mean(xc)) * rstd, dx = rstd * (g - mean(g) - x_hat * mean(g x_hat)),
//                    dw += dy * x_hat, db += dy into the caller's per-thread partials
//                    (reads the row again, from L1/L2)
// Only pass 1 (forward) and pass A (backward) read x and dy from memory.
// With nt set, y / dx are written with non-temporal stores (no read-for-ownership).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "core/simd.hpp"
#include "norm/norm_cpu.hpp"

namespace llmk::norm_cpu {
// Internal linkage: each ISA's translation unit keeps its own copies, so the
// linker can never hand the scalar path a function compiled with AVX flags.
namespace {

using simd::Scalar;

// Non-temporal store of one vector of T (kWidth * sizeof(T) bytes, aligned).
template <class S, class T>
inline void store_nt(T* p, typename S::V v) {
  constexpr int kBytes = S::kWidth * int(sizeof(T));
  alignas(64) T tmp[S::kWidth];
  S::store(tmp, v);
  if constexpr (kBytes == 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
#ifdef __AVX__
  } else if constexpr (kBytes == 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)));
#endif
#ifdef __AVX512F__
  } else if constexpr (kBytes == 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), _mm512_load_si512(tmp));
#endif
  } else {
    static_assert(kBytes == 16 || kBytes == 32 || kBytes == 64, "no non-temporal store of this width");
  }
}

// sum(((x - c) - c2)^2) over x[0..D), in four vector accumulators plus a
// scalar tail: the two-pass variance (c2 = dm) and RMSNorm's sum of squares
// (c = c2 = 0).
template <class S, class T>
inline float sum_sq_dev(const T* x, int64_t D, float c, float c2) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const V cv = S::set1(c), c2v = S::set1(c2);
  const auto acc = [&](V a, V xv) __attribute__((always_inline)) {
    const V d = S::sub(S::sub(xv, cv), c2v);
    return S::fmadd(d, d, a);
  };
  V a0 = S::zero(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * W <= D; i += 4 * W) {
    a0 = acc(a0, S::load(x + i));
    a1 = acc(a1, S::load(x + i + W));
    a2 = acc(a2, S::load(x + i + 2 * W));
    a3 = acc(a3, S::load(x + i + 3 * W));
  }
  for (; i + W <= D; i += W) a0 = acc(a0, S::load(x + i));
  float s = S::hsum(S::add(S::add(a0, a1), S::add(a2, a3)));
  for (; i < D; ++i) {
    const float d = (to_f32(x[i]) - c) - c2;
    s = Scalar::fmadd(d, d, s);
  }
  return s;
}

// sum(x - c) and sum((x - c)^2) over x[0..D) in one pass, four vector
// accumulators each plus a scalar tail.
template <class S, class T>
inline void sum_dev_and_sq(const T* x, int64_t D, float c, float& s1, float& s2) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const V cv = S::set1(c);
  V a[4] = {S::zero(), S::zero(), S::zero(), S::zero()}, q[4] = {a[0], a[0], a[0], a[0]};
  int64_t i = 0;
  for (; i + 4 * W <= D; i += 4 * W)
    for (int u = 0; u < 4; ++u) {
      const V d = S::sub(S::load(x + i + u * W), cv);
      a[u] = S::add(a[u], d);
      q[u] = S::fmadd(d, d, q[u]);
    }
  for (; i + W <= D; i += W) {
    const V d = S::sub(S::load(x + i), cv);
    a[0] = S::add(a[0], d);
    q[0] = S::fmadd(d, d, q[0]);
  }
  s1 = S::hsum(S::add(S::add(a[0], a[1]), S::add(a[2], a[3])));
  s2 = S::hsum(S::add(S::add(q[0], q[1]), S::add(q[2], q[3])));
  for (; i < D; ++i) {
    const float d = to_f32(x[i]) - c;
    s1 += d;
    s2 += d * d;
  }
}

// Stores v at p: non-temporal when kNt (p then aligned to the vector).
template <class S, bool kNt, class T>
inline void put(T* p, typename S::V v) {
  if constexpr (kNt) store_nt<S>(p, v);
  else S::store(p, v);
}

// Elements [0, head) are done one at a time so that y + head is aligned for
// non-temporal stores; the vector loop then runs to the last full vector.
template <class S, bool kNt, class T>
inline int64_t aligned_head(const T* y, int64_t D) {
  if constexpr (!kNt) return 0;
  constexpr uintptr_t kAlign = uintptr_t(S::kWidth) * sizeof(T);
  int64_t i = 0;
  while (i < D && reinterpret_cast<uintptr_t>(y + i) % kAlign != 0) ++i;
  return i;
}

// y = ((x - x0) - dm) * rs * w + b over one row (w, b null: 1, 0), x_hat =
// (x - x0) * rs - dm * rs by one FMA. x - x0 is exact when x and x0 are
// within a factor of two (Sterbenz), so x_hat keeps full precision even when
// |mean| dwarfs the spread; the product dm * rs is rounded once: x0, the mean
// of the row's first W elements, lies within sqrt(D / W) sd of the row's
// mean (Cauchy-Schwarz), so |dm * rs| <= sqrt(D / W) and x_hat is off by at
// most sqrt(D / W) 2^-25 more than ((x - x0) - dm) * rs would be (1.4e-6 at
// D = 4096 with AVX2; usually dm * rs is below 1).
template <class S, bool kNt, class T>
inline void write_row(const T* x, T* y, int64_t D, float x0, float dm, float rs, const float* w, const float* b) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  auto one = [&](int64_t i) {
    const float xh = ((to_f32(x[i]) - x0) - dm) * rs;
    y[i] = from_f32<T>(xh * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f));
  };
  const int64_t head = aligned_head<S, kNt>(y, D);
  for (int64_t i = 0; i < head; ++i) one(i);
  const V x0v = S::set1(x0), rv = S::set1(rs), ndmr = S::set1(-(dm * rs));
  int64_t i = head;
  for (; i + W <= D; i += W) {
    const V xh = S::fmadd(S::sub(S::load(x + i), x0v), rv, ndmr);
    const V bv = b ? S::load(b + i) : S::zero();
    put<S, kNt>(y + i, w ? S::fmadd(xh, S::load(w + i), bv) : S::add(xh, bv));
  }
  for (; i < D; ++i) one(i);
}

template <class S, class T, bool kRms>
void fwd_rows(const FwdArgs& a, int64_t r0, int64_t r1) {
  constexpr bool kCanNt = S::kWidth > 1;
  const int64_t D = a.D;
  for (int64_t n = r0; n < r1; ++n) {
    const T* x = static_cast<const T*>(a.x) + n * a.x_stride;  // [D]
    T* y = static_cast<T*>(a.y) + n * a.y_stride;              // [D]
    float x0 = 0.0f, dm = 0.0f, var;                           // mean = x0 + dm
    if constexpr (!kRms) {
      // One pass for both sums around x0, the mean of the first vector: var =
      // sum((x - x0)^2) / D - dm^2 loses (dm / sd)^2 of the sum's relative
      // rounding, so it is kept only when dm^2 <= var / 4 (x0 within sd / 2
      // of the mean, as usual when the first W elements are a sample of the
      // row: then its error is at most 1.25x the two-pass one's). Otherwise
      // (a sorted row, an outlier in front, a negative difference, NaN) a
      // second pass sums ((x - x0) - dm)^2, the two-pass variance.
      x0 = D >= S::kWidth ? S::hsum(S::load(x)) / float(S::kWidth) : to_f32(x[0]);
      float s1, s2;
      sum_dev_and_sq<S>(x, D, x0, s1, s2);
      dm = s1 / float(D);
      var = s2 / float(D) - dm * dm;
      if (!(dm * dm <= 0.25f * var)) var = sum_sq_dev<S>(x, D, x0, dm) / float(D);
      a.mean[n] = x0 + dm;
    } else {
      var = sum_sq_dev<S>(x, D, 0.0f, 0.0f) / float(D);
    }
    const float rs = 1.0f / std::sqrt(var + a.eps);
    a.rstd[n] = rs;
    if (kCanNt && a.nt) write_row<S, kCanNt>(x, y, D, x0, dm, rs, a.w, kRms ? nullptr : a.b);
    else write_row<S, false>(x, y, D, x0, dm, rs, a.w, kRms ? nullptr : a.b);
  }
  if (kCanNt && a.nt) _mm_sfence();
}

// Pass B of the backward over one row: x_hat = ((x - m) - mu) * rs, g = dy * w,
// dx = g * rs - rs * c1 - x_hat * (rs * c2), dw += dy * x_hat, db += dy.
template <class S, bool kNt, class T>
inline void write_dx(const T* x, const T* dy, T* dx, int64_t D, float m, float mu, float rs, const float* w, float c1,
                     float c2, float* dw, float* db) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const float k1 = rs * c1, k2 = rs * c2;
  auto one = [&](int64_t i) {
    const float xh = ((to_f32(x[i]) - m) - mu) * rs, dyf = to_f32(dy[i]), g = dyf * (w ? w[i] : 1.0f);
    dx[i] = from_f32<T>(g * rs - k1 - xh * k2);
    if (dw) dw[i] += dyf * xh;
    if (db) db[i] += dyf;
  };
  const int64_t head = aligned_head<S, kNt>(dx, D);
  for (int64_t i = 0; i < head; ++i) one(i);
  const V mv = S::set1(m), muv = S::set1(mu), rv = S::set1(rs), nk1 = S::set1(-k1), k2v = S::set1(k2);
  int64_t i = head;
  for (; i + W <= D; i += W) {
    const V xh = S::mul(S::sub(S::sub(S::load(x + i), mv), muv), rv);
    const V dyv = S::load(dy + i);
    const V g = w ? S::mul(dyv, S::load(w + i)) : dyv;
    put<S, kNt>(dx + i, S::sub(S::fmadd(g, rv, nk1), S::mul(xh, k2v)));
    if (dw) S::store(dw + i, S::fmadd(dyv, xh, S::load(dw + i)));
    if (db) S::store(db + i, S::add(S::load(db + i), dyv));
  }
  for (; i < D; ++i) one(i);
}

// Pass A: x - m is exact near the mean (Sterbenz); mu = mean(x - m) recovers
// what rounding the saved f32 mean lost, so x_hat is as precise as in the
// forward even when |mean| dwarfs the spread.
template <class S, class T, bool kRms>
void bwd_rows(const BwdArgs& a, int64_t r0, int64_t r1, float* dw, float* db) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  constexpr bool kCanNt = S::kWidth > 1;
  const int64_t D = a.D;
  const float* w = a.w;
  for (int64_t n = r0; n < r1; ++n) {
    const T* x = static_cast<const T*>(a.x) + n * a.x_stride;     // [D]
    const T* dy = static_cast<const T*>(a.dy) + n * a.dy_stride;  // [D]
    T* dx = static_cast<T*>(a.dx) + n * a.dx_stride;              // [D]
    const float m = kRms ? 0.0f : a.mean[n], rs = a.rstd[n];
    const V mv = S::set1(m);
    V sx0 = S::zero(), sx1 = sx0, sg0 = sx0, sg1 = sx0, sgx0 = sx0, sgx1 = sx0;
    auto step = [&](int64_t j, V& sx, V& sg, V& sgx) {
      const V xc = S::sub(S::load(x + j), mv);
      const V dyv = S::load(dy + j);
      const V g = w ? S::mul(dyv, S::load(w + j)) : dyv;
      if constexpr (!kRms) {
        sx = S::add(sx, xc);
        sg = S::add(sg, g);
      }
      sgx = S::fmadd(g, xc, sgx);
    };
    int64_t i = 0;
    for (; i + 2 * W <= D; i += 2 * W) {
      step(i, sx0, sg0, sgx0);
      step(i + W, sx1, sg1, sgx1);
    }
    for (; i + W <= D; i += W) step(i, sx0, sg0, sgx0);
    float sx = S::hsum(S::add(sx0, sx1)), sg = S::hsum(S::add(sg0, sg1)), sgx = S::hsum(S::add(sgx0, sgx1));
    for (; i < D; ++i) {
      const float xc = to_f32(x[i]) - m, g = to_f32(dy[i]) * (w ? w[i] : 1.0f);
      sx += xc;
      sg += g;
      sgx += g * xc;
    }
    // mean(g x_hat) = rs (sum(g xc) - mu sum(g)) / D
    const float mu = kRms ? 0.0f : sx / float(D), c1 = kRms ? 0.0f : sg / float(D);
    const float c2 = rs * (sgx - mu * sg) / float(D);
    if (kCanNt && a.nt) write_dx<S, kCanNt>(x, dy, dx, D, m, mu, rs, w, c1, c2, dw, db);
    else write_dx<S, false>(x, dy, dx, D, m, mu, rs, w, c1, c2, dw, db);
  }
  if (kCanNt && a.nt) _mm_sfence();
}

template <class S>
Kernels make_kernels() {
  return Kernels{{{fwd_rows<S, float, false>, fwd_rows<S, float, true>},
                  {fwd_rows<S, f16, false>, fwd_rows<S, f16, true>},
                  {fwd_rows<S, bf16, false>, fwd_rows<S, bf16, true>}},
                 {{bwd_rows<S, float, false>, bwd_rows<S, float, true>},
                  {bwd_rows<S, f16, false>, bwd_rows<S, f16, true>},
                  {bwd_rows<S, bf16, false>, bwd_rows<S, bf16, true>}}};
}

}  // namespace
}  // namespace llmk::norm_cpu
