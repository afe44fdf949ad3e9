// The CPU attention kernel, written once over an ISA struct (attn::Scalar,
// simd::Avx2, simd::Avx512) and instantiated in attention.cpp,
// attention_avx2.cpp and attention_avx512.cpp.
//
// One work item = R query rows that share a KV head (the G heads of a GQA
// group, times the query tokens of a prefill tile) against kv positions
// [k0, k1) of one sequence, each row r also capped causally at limit[r].
// Positions are walked in tiles of at most kTile tokens that never cross a
// block (so a tile's rows are contiguous). Per tile: K rows are dequantized
// two at a time into an L1 buffer (f32 rows are read in place) and dotted with
// all R queries; an online-softmax step per row (running max m, sum l, rescaled
// accumulator); then the tile's V rows are dequantized into an L1 tile buffer
// and accumulated into every row's acc. A row's arithmetic depends only on its
// own q, its limit and the positions, never on the other rows of the item.
//
// Quantized K (int8, int4) is not dequantized: each query row is quantized
// once per item to int8 per 32-group (QuantQ, like llama.cpp's Q8 activations
// against quantized weights), and a score is sum over groups of
// d_k * d_q * (integer dot of the quants) [+ m_k * d_q * sum(q quants) for int4],
// the integer dots done 32 values at a time (attn_simd.hpp). This changes the
// scores by at most sum_g d_q,g/2 * sum_{c in g} |k_c| (k dequantized): see
// QuantQ and tests/attention.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention/attn_simd.hpp"
#include "llmk/kv_cache.hpp"

namespace llmk::attn {

inline constexpr int kTile = 16;   // kv tokens per softmax step
inline constexpr int kQTile = 8;   // prefill query tokens per work item

struct Item {
  const float* q = nullptr;        // [R][D] queries, already multiplied by the softmax scale
  const int64_t* limit = nullptr;  // [R] last position (inclusive) row r may see
  int R = 0;
  int64_t k0 = 0, k1 = 0;          // kv positions to visit
  const int32_t* blocks = nullptr; // the sequence's block ids
  int64_t h = 0;                   // kv head
  float* m = nullptr;              // [R] running max (in: -inf)
  float* l = nullptr;              // [R] running sum (in: 0)
  float* acc = nullptr;            // [R][D] unnormalized output (in: 0)
};

inline int64_t groups_of(int64_t D) { return (D + kKvGroup - 1) / kKvGroup; }

// Scratch floats attend<S>() needs: two K rows, a V tile, the scores, and the
// quantized queries (R rows of groups_of(D) x 32 int8, their scales and sums).
inline int64_t scratch_floats(int64_t D, int R) {
  return 2 * D + kTile * D + int64_t(R) * kTile + int64_t(R) * groups_of(D) * (kKvGroup / 4 + 2);
}

// The queries of an item quantized for the integer dots against int8/int4 K:
// row r, group g: q8[(r * ng + g) * 32 + j] = round(q / dq) in [-127, 127] with
// dq[g * R + r] = amax / 127 (f32; 0 for an all-zero group), so
// |q - q8 * dq| <= dq / 2 (plus f32 rounding of q / dq, < 2^-23 * 127 * dq);
// qsum = dq * sum_j q8 (int4's min term). Values past D in the last group are 0.
struct QuantQ {
  int8_t* q8 = nullptr;   // [R][ng][32]
  float* dq = nullptr;    // [ng][R]
  float* qsum = nullptr;  // [ng][R]
  int64_t ng = 0, R = 0;
};

inline void quantize_queries(const float* q, int R, int64_t D, QuantQ& qq) {
  for (int r = 0; r < R; ++r)
    for (int64_t g = 0; g < qq.ng; ++g) {
      const float* x = q + r * D + g * kKvGroup;
      const int64_t n = std::min<int64_t>(kKvGroup, D - g * kKvGroup);
      float amax = 0.0f;
      for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
      int8_t* o = qq.q8 + (r * qq.ng + g) * kKvGroup;
      int32_t sum = 0;
      for (int64_t j = 0; j < kKvGroup; ++j) {
        o[j] = j < n ? int8_t(std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f)) : int8_t(0);
        sum += o[j];
      }
      qq.dq[g * R + r] = d;
      qq.qsum[g * R + r] = d * float(sum);
    }
}

// Scores of one quantized K row (T = int8 | int4) against query rows r0..r0+NR:
// out[i * kTile] = sum_g (d_k d_q) idot + [m_k qsum]. One vector chain per row.
template <class S, KvType T, int NR>
void qdots(const uint8_t* krow, const QuantQ& qq, int r0, float* out) {
  if constexpr (NR == 4 && S::kWidth > 1) {  // the 4 rows' dots reduced together (attn_simd.hpp)
    qdots4<S, T == KvType::int4>(krow, qq.q8 + int64_t(r0) * qq.ng * kKvGroup, qq.dq + r0, qq.qsum + r0, qq.ng, qq.R,
                                 out, kTile);
    return;
  }
  typename S::V a[NR];
  float mins[NR] = {};
  for (int i = 0; i < NR; ++i) a[i] = S::zero();
  for (int64_t g = 0; g < qq.ng; ++g) {
    const int8_t* q = qq.q8 + (int64_t(r0) * qq.ng + g) * kKvGroup;  // row r0 + i at q + i * ng * 32
    const int64_t si = g * qq.R + r0;                                  // scales of row r0 + i at si + i
    if constexpr (T == KvType::int8) {
      const BlockQ8& b = reinterpret_cast<const BlockQ8*>(krow)[g];
      const float dk = h2f<S>(b.d);
      for (int i = 0; i < NR; ++i)
        a[i] = S::fmadd(idot_q8<S>(q + i * qq.ng * kKvGroup, b.qs), S::set1(dk * qq.dq[si + i]), a[i]);
    } else {
      const BlockQ4& b = reinterpret_cast<const BlockQ4*>(krow)[g];
      const float dk = h2f<S>(b.d), mk = h2f<S>(b.m);
      for (int i = 0; i < NR; ++i) {
        a[i] = S::fmadd(idot_q4<S>(q + i * qq.ng * kKvGroup, b.qs), S::set1(dk * qq.dq[si + i]), a[i]);
        mins[i] += mk * qq.qsum[si + i];
      }
    }
  }
  for (int i = 0; i < NR; ++i) out[i * kTile] = S::hsum(a[i]) + mins[i];
}

// Scores of the n keys at kp (row stride kr) against all R rows: s[r * kTile + t].
template <class S, KvType T>
void score_quantized(const uint8_t* kp, int64_t kr, int n, const QuantQ& qq, int R, float* s) {
  for (int t = 0; t < n; ++t) {
    int r = 0;
    for (; r + 4 <= R; r += 4) qdots<S, T, 4>(kp + t * kr, qq, r, s + r * kTile + t);
    switch (R - r) {
      case 3: qdots<S, T, 3>(kp + t * kr, qq, r, s + r * kTile + t); break;
      case 2: qdots<S, T, 2>(kp + t * kr, qq, r, s + r * kTile + t); break;
      case 1: qdots<S, T, 1>(kp + t * kr, qq, r, s + r * kTile + t); break;
    }
  }
}

// Row of n = D values of storage type T at p -> f32. Returns p itself for f32.
template <class S, KvType T>
const float* row_f32(const uint8_t* p, int64_t D, float* buf) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  if constexpr (T == KvType::f32) {
    return reinterpret_cast<const float*>(p);
  } else if constexpr (T == KvType::f16 || T == KvType::bf16) {
    using E = std::conditional_t<T == KvType::f16, f16, bf16>;
    const E* e = reinterpret_cast<const E*>(p);
    for (int64_t c = 0; c < D; c += W) S::store(buf + c, S::load(e + c));
  } else if constexpr (T == KvType::int8) {
    const BlockQ8* b = reinterpret_cast<const BlockQ8*>(p);
    for (int64_t g = 0; g * kKvGroup < D; ++g) {
      const V d = S::set1(h2f<S>(b[g].d));
      const int64_t n = std::min<int64_t>(kKvGroup, D - g * kKvGroup);
      for (int64_t j = 0; j < n; j += W) S::store(buf + g * kKvGroup + j, S::mul(load_i8<S>(b[g].qs + j), d));
    }
  } else {
    const BlockQ4* b = reinterpret_cast<const BlockQ4*>(p);
    for (int64_t g = 0; g * kKvGroup < D; ++g) {
      const V d = S::set1(h2f<S>(b[g].d)), m = S::set1(h2f<S>(b[g].m));
      const int64_t n = std::min<int64_t>(kKvGroup, D - g * kKvGroup);
      for (int64_t j = 0; j < n; j += W)
        S::store(buf + g * kKvGroup + j, S::fmadd(load_u4<S>(b[g].qs + j % 16, j >= 16), d, m));
    }
  }
  return buf;
}

template <class S>
using RowFn = const float* (*)(const uint8_t*, int64_t, float*);

template <class S>
RowFn<S> row_fn(KvType t) {
  switch (t) {
    case KvType::f32: return row_f32<S, KvType::f32>;
    case KvType::f16: return row_f32<S, KvType::f16>;
    case KvType::bf16: return row_f32<S, KvType::bf16>;
    case KvType::int8: return row_f32<S, KvType::int8>;
    case KvType::int4: return row_f32<S, KvType::int4>;
  }
  return nullptr;
}

// out[i * stride + u] = k[u] . q[i] for NR query rows and NT keys: NR * NT
// independent FMA chains, so the loop is not bound by FMA latency. Each (i, u)
// is one chain over c in order, whatever NR and NT: grouping never changes bits.
template <class S, int NR, int NT>
void dots(const float* const* k, const float* q, int64_t D, float* out, int stride) {
  typename S::V a[NR][NT];
  for (int i = 0; i < NR; ++i)
    for (int u = 0; u < NT; ++u) a[i][u] = S::zero();
  for (int64_t c = 0; c < D; c += S::kWidth) {
    typename S::V x[NT];
    for (int u = 0; u < NT; ++u) x[u] = S::load(k[u] + c);
    for (int i = 0; i < NR; ++i) {
      const auto qv = S::load(q + i * D + c);
      for (int u = 0; u < NT; ++u) a[i][u] = S::fmadd(x[u], qv, a[i][u]);
    }
  }
  for (int i = 0; i < NR; ++i)
    for (int u = 0; u < NT; ++u) out[i * stride + u] = S::hsum(a[i][u]);
}

// Scores of NT keys against all R query rows: s[r * kTile + u].
template <class S, int NT>
void score_keys(const float* const* k, const float* q, int R, int64_t D, float* s) {
  int r = 0;
  for (; r + 4 <= R; r += 4) dots<S, 4, NT>(k, q + r * D, D, s + r * kTile, kTile);
  switch (R - r) {
    case 3: dots<S, 3, NT>(k, q + r * D, D, s + r * kTile, kTile); break;
    case 2: dots<S, 2, NT>(k, q + r * D, D, s + r * kTile, kTile); break;
    case 1: dots<S, 1, NT>(k, q + r * D, D, s + r * kTile, kTile); break;
  }
}

// a[c .. c + NV*W) += sum_{t < v} p[t] * vrows[t][c ..]: NV accumulators in registers.
template <class S, int NV>
void accumulate(float* a, const float* p, const float* const* vrows, int v, int64_t c) {
  constexpr int W = S::kWidth;
  typename S::V x[NV];
  for (int j = 0; j < NV; ++j) x[j] = S::load(a + c + j * W);
  for (int t = 0; t < v; ++t) {
    const auto pt = S::set1(p[t]);
    for (int j = 0; j < NV; ++j) x[j] = S::fmadd(pt, S::load(vrows[t] + c + j * W), x[j]);
  }
  for (int j = 0; j < NV; ++j) S::store(a + c + j * W, x[j]);
}

template <class S>
void attend(const KvLayerView& kv, const Item& it, float* scratch) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const int64_t D = kv.head_dim, bt = kv.block_tokens, H = kv.n_kv_heads;
  const int64_t kr = kv_row_bytes(kv.k_type, D), vr = kv_row_bytes(kv.v_type, D);
  const RowFn<S> kfn = row_fn<S>(kv.k_type), vfn = row_fn<S>(kv.v_type);
  float* kbuf = scratch;             // [2][D]
  float* vbuf = kbuf + 2 * D;        // [kTile][D]
  float* s = vbuf + kTile * D;       // [R][kTile] scores, then probabilities
  QuantQ qq;
  if (kv_type_quantized(kv.k_type)) {
    qq.ng = groups_of(D), qq.R = it.R;
    qq.dq = s + int64_t(it.R) * kTile;
    qq.qsum = qq.dq + it.R * qq.ng;
    qq.q8 = reinterpret_cast<int8_t*>(qq.qsum + it.R * qq.ng);
    quantize_queries(it.q, it.R, D, qq);
  }
  const float* vrows[kTile];
  for (int64_t p0 = it.k0; p0 < it.k1;) {
    const int64_t blk = it.blocks[p0 / bt], off = p0 % bt;
    const int n = int(std::min<int64_t>({kTile, it.k1 - p0, bt - off}));
    const int64_t row0 = (int64_t(blk) * H + it.h) * bt + off;  // first row of the tile in the pool
    const uint8_t* kp = static_cast<const uint8_t*>(kv.k) + row0 * kr;
    const uint8_t* vp = static_cast<const uint8_t*>(kv.v) + row0 * vr;
    // scores: integer dots for int8/int4 K, else f32 rows two keys at a time
    if (kv.k_type == KvType::int8) {
      score_quantized<S, KvType::int8>(kp, kr, n, qq, it.R, s);
    } else if (kv.k_type == KvType::int4) {
      score_quantized<S, KvType::int4>(kp, kr, n, qq, it.R, s);
    } else {
      int t = 0;
      for (; t + 2 <= n; t += 2) {
        const float* k2[2] = {kfn(kp + t * kr, D, kbuf), kfn(kp + (t + 1) * kr, D, kbuf + D)};
        score_keys<S, 2>(k2, it.q, it.R, D, s + t);
      }
      if (t < n) {
        const float* k1[1] = {kfn(kp + t * kr, D, kbuf)};
        score_keys<S, 1>(k1, it.q, it.R, D, s + t);
      }
    }
    // online softmax step per row over its v visible tokens of the tile
    int nmax = 0;
    for (int r = 0; r < it.R; ++r) {
      float* sr = s + r * kTile;
      const int v = int(std::clamp<int64_t>(it.limit[r] - p0 + 1, 0, n));
      nmax = std::max(nmax, v);
      if (v == 0) continue;
      float mt = sr[0];
      for (int t = 1; t < v; ++t) mt = std::max(mt, sr[t]);
      for (int t = v; t < kTile; ++t) sr[t] = -INFINITY;
      const float mn = std::max(it.m[r], mt);
      const float alpha = std::exp(it.m[r] - mn);
      V sum = S::zero();
      for (int t = 0; t < kTile; t += W) {
        const V e = exp_v<S>(S::add(S::load(sr + t), S::set1(-mn)));
        S::store(sr + t, e);
        sum = S::add(sum, e);
      }
      it.l[r] = it.l[r] * alpha + S::hsum(sum);
      it.m[r] = mn;
      if (alpha != 1.0f) {
        float* a = it.acc + r * D;
        for (int64_t c = 0; c < D; c += W) S::store(a + c, S::mul(S::load(a + c), S::set1(alpha)));
      }
    }
    // values
    for (int t = 0; t < nmax; ++t) vrows[t] = vfn(vp + t * vr, D, vbuf + t * D);
    for (int r = 0; r < it.R; ++r) {
      const int v = int(std::clamp<int64_t>(it.limit[r] - p0 + 1, 0, n));
      const float* pr = s + r * kTile;
      float* a = it.acc + r * D;
      // 8, then 4, then 1 vectors of acc stay in registers across the tile's tokens
      int64_t c = 0;
      for (; c + 8 * W <= D; c += 8 * W) accumulate<S, 8>(a, pr, vrows, v, c);
      for (; c + 4 * W <= D; c += 4 * W) accumulate<S, 4>(a, pr, vrows, v, c);
      for (; c < D; c += W) accumulate<S, 1>(a, pr, vrows, v, c);
    }
    p0 += n;
  }
}

}  // namespace llmk::attn
