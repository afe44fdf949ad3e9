// Test fixture for attention over the paged cache: B sequences of given
// lengths written with random K/V through the slot map, in interleaved chunks
// over a pool with holes, so blocks land in random order. Slots that belong to
// no sequence are poisoned (NaN for float types, 1e4 for quantized ones) so a
// kernel that reads outside a sequence gives a visibly wrong answer. Keeps the
// dense copies the oracle needs: the original rows and the dequantized ones.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "llmk/attention.hpp"
#include "llmk/kv_cache.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {

struct Filled {
  std::unique_ptr<KvCache> cache;
  std::vector<int64_t> seqs, kv_indptr;  // kv_indptr [B+1] over the dense arrays
  std::vector<float> k, v;               // [total, Hkv, D] as given
  std::vector<float> kq, vq;             // [total, Hkv, D] dequantized from the cache's types; K as given (not rotated)
  PageTable pages;
};

inline void dequantized(KvType t, const float* x, int64_t rows, int64_t D, float* y) {
  std::vector<uint8_t> buf(static_cast<size_t>(kv_row_bytes(t, D)));
  for (int64_t r = 0; r < rows; ++r) {
    kv_quantize_row(t, x + r * D, D, buf.data());
    kv_dequantize_row(t, buf.data(), D, y + r * D);
  }
}

// The queries [rows][D] as the kernel uses them against an int8/int4 K
// (attention_kernel.hpp, QuantQ): x = q * scale in f32, quantized per 32-group
// to q8 = round(x * 127 / amax) with dq = amax / 127, then x' = q8 * dq; returned
// divided by scale again, so an oracle that multiplies by scale sees x' (up to
// one f32 rounding, < 1e-7 relative). Written from the spec, not the kernel's code.
inline std::vector<float> quantized_queries(const float* q, int64_t rows, int64_t D, float scale) {
  std::vector<float> out(static_cast<size_t>(rows * D));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g0 = 0; g0 < D; g0 += 32) {
      const int64_t n = std::min<int64_t>(32, D - g0);
      float x[32], amax = 0;
      for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j] = q[r * D + g0 + j] * scale));
      for (int64_t j = 0; j < n; ++j) {
        const float q8 = amax > 0 ? std::clamp(std::nearbyint(x[j] * (127.0f / amax)), -127.0f, 127.0f) : 0.0f;
        out[size_t(r * D + g0 + j)] = float(double(q8) * double(amax / 127.0f) / double(scale));
      }
    }
  return out;
}

// shape_k, when given, reshapes the N(0, 1) K rows [total * Hkv][D] before they
// are written (e.g. outlier channels).
inline Filled make_filled(KvCacheConfig cfg, const std::vector<int64_t>& lens, uint64_t seed,
                          const std::function<void(std::vector<float>&)>& shape_k = {},
                          const std::function<void(std::vector<float>&)>& shape_v = {}) {
  Filled f;
  const int64_t H = cfg.n_kv_heads, D = cfg.head_dim, bt = cfg.block_tokens;
  int64_t need = 0;
  for (int64_t n : lens) need += (n + bt - 1) / bt;
  cfg.budget_bytes = (2 * need + 8) * kv_block_bytes(cfg);
  f.cache = std::make_unique<KvCache>(cfg);
  KvCache& c = *f.cache;
  std::mt19937_64 rng(seed);
  // poison every slot, then free them again
  {
    const int64_t all = c.manager().num_blocks() * bt;
    const float p = kv_type_quantized(cfg.k_type) || kv_type_quantized(cfg.v_type) ? 1e4f : NAN;
    std::vector<float> rows(static_cast<size_t>(all * H * D), p);
    const int64_t d = c.add_sequence();
    std::vector<int64_t> slots;
    std::vector<int32_t> toks(static_cast<size_t>(all));
    for (auto& t : toks) t = int32_t(rng() % 50000);
    if (c.append(d, toks, &slots) != KvStatus::ok) throw std::runtime_error("fixture: pool too small");
    c.write(0, slots, rows.data(), rows.data());
    c.free_sequence(d);
    // a few live blocks in between make holes
    const int64_t h = c.add_sequence();
    slots.clear();
    c.append(h, std::vector<int32_t>(size_t(3 * bt), 7), &slots);
  }
  f.kv_indptr.push_back(0);
  for (int64_t n : lens) {
    f.seqs.push_back(c.add_sequence());
    f.kv_indptr.push_back(f.kv_indptr.back() + n);
  }
  const int64_t total = f.kv_indptr.back();
  f.k.resize(size_t(total * H * D));
  f.v.resize(f.k.size());
  fill_normal(f.k.data(), f.k.size(), seed + 1);
  fill_normal(f.v.data(), f.v.size(), seed + 2);
  if (shape_k) shape_k(f.k);
  if (shape_v) shape_v(f.v);
  // interleaved chunks of random size
  std::vector<int64_t> done(lens.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t b = 0; b < lens.size(); ++b) {
      const int64_t n = std::min<int64_t>(lens[b] - done[b], 1 + int64_t(rng() % size_t(2 * bt)));
      if (n <= 0) continue;
      more = true;
      std::vector<int64_t> slots;
      if (c.append(f.seqs[b], std::vector<int32_t>(size_t(n), int32_t(b)), &slots) != KvStatus::ok)
        throw std::runtime_error("fixture: out of blocks");
      const int64_t r0 = f.kv_indptr[b] + done[b];
      c.write(0, slots, f.k.data() + r0 * H * D, f.v.data() + r0 * H * D);
      done[b] += n;
    }
  }
  f.kq.resize(f.k.size());
  f.vq.resize(f.v.size());
  dequantized(cfg.k_type, f.k.data(), total * H, D, f.kq.data());
  dequantized(cfg.v_type, f.v.data(), total * H, D, f.vq.data());
  f.pages = c.page_table(f.seqs);
  return f;
}

// The most the integer P.V over an int8/int4 V (AVX2, AVX-512) may add to attention over the
// dequantized rows (attention_kernel.hpp, pv_weights<.., true>): per tile (at
// most kPvTile = 32 consecutive positions) and (row, 32-group), the weights w_t = p_t d_t
// (d_t the V row's group scale) go in as integers om_t = round(w_t 2^k), with
// 2^k set by ub = max p * max |d| over the positions of the tile the row sees.
// With 16-bit weights (levels avx512 and avx512vnni; avx2, avxvnni and avx512vbmi over an int8
// V) ub 2^k lies in [2^14, 2^15): |om_t 2^-k - w_t| <= 2^-k <= ub 2^-14 (half
// that, but a rounding up to 2^15 saturates), against the stored quant q_tc
// (int4: the nibble; its min term stays f32). With 8-bit weights (levels
// avx2, avxvnni and avx512vbmi over an int4 V) ub 2^k lies in [2^7, 2^8), so 2^-7 in place of
// 2^-14, against the centered quant q_tc - 8 (the min term takes m + 8 d, f32).
// An output moves by at most u sum_tiles (ub / l) sum_{t in tile} |q_tc|, u the
// unit above, l the row's sum of weights.
// ub / l <= (max P) (max |d|) over the tile, P the normalized probabilities
// (computed here in double from q, the dequantized K and scale, as
// attention_reference does; 1% allowed for the kernel's f32 ones), and a tile
// holding t lies within t - 31 .. t + 31, so per output element
//   bound_c = 1.01 u sum_t |q_tc| max_{|t' - t| <= 31, t' seen} P_t' max_{|t' - t| <= 31, t' seen} |d_t'|.
// The arguments of attention_reference (k: the dense K it is given), except
// v: the V rows as written (f32), quantized again here to type vt as the
// cache stored them. Zeros for a float vt.
struct PvBounds {
  std::vector<double> w16, w8;  // per output element: 16-bit weights, 8-bit weights
};
inline constexpr int64_t kPvTile = 32;  // positions a tile over int8/int4 V, at most
inline PvBounds pv_rounding_bound(const float* q, const int64_t* qo_indptr, const float* k, const float* v,
                                  const int64_t* kv_indptr, int64_t B, int64_t Hq, int64_t Hkv, int64_t D, double scale,
                                  KvType vt, int64_t window = 0) {
  const int64_t G = Hq / Hkv;
  PvBounds bounds;
  std::vector<double>& bound = bounds.w16;
  bound.assign(static_cast<size_t>(qo_indptr[B] * Hq * D), 0.0);
  bounds.w8 = bound;
  if (!kv_type_quantized(vt)) return bounds;
  std::vector<uint8_t> row(static_cast<size_t>(kv_row_bytes(vt, D)));
  // per position: group scales, |quants|, |quants - 8| (int4); per row: probabilities, window maxima
  std::vector<double> dsc, aq, aq8, P, pwin, dwin;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t kv0 = kv_indptr[b], kv_len = kv_indptr[b + 1] - kv0;
    const int64_t qo_len = qo_indptr[b + 1] - qo_indptr[b], ng = (D + 31) / 32;
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      dsc.assign(size_t(kv_len * ng), 0.0);
      aq.assign(size_t(kv_len * D), 0.0);
      aq8.assign(size_t(kv_len * D), 0.0);
      for (int64_t j = 0; j < kv_len; ++j) {
        kv_quantize_row(vt, v + ((kv0 + j) * Hkv + hk) * D, D, row.data());
        for (int64_t c = 0; c < D; ++c) {
          const int64_t g = c / 32, e = c % 32;
          if (vt == KvType::int8) {
            const BlockQ8& blk = reinterpret_cast<const BlockQ8*>(row.data())[g];
            dsc[size_t(j * ng + g)] = f16_bits_to_f32(blk.d);
            aq[size_t(j * D + c)] = std::fabs(double(blk.qs[e]));
          } else {
            const BlockQ4& blk = reinterpret_cast<const BlockQ4*>(row.data())[g];
            dsc[size_t(j * ng + g)] = f16_bits_to_f32(blk.d);
            aq[size_t(j * D + c)] = double(e < 16 ? blk.qs[e] & 15 : blk.qs[e - 16] >> 4);
            aq8[size_t(j * D + c)] = std::fabs(aq[size_t(j * D + c)] - 8);
          }
        }
      }
      dwin.assign(size_t(ng * kv_len), 0.0);  // [g][t]: max of |d| over |t' - t| < kPvTile
      for (int64_t g = 0; g < ng; ++g)
        for (int64_t j = 0; j < kv_len; ++j)
          for (int64_t u = std::max<int64_t>(0, j - (kPvTile - 1)); u <= std::min(kv_len - 1, j + (kPvTile - 1)); ++u)
            dwin[size_t(g * kv_len + j)] = std::max(dwin[size_t(g * kv_len + j)], std::fabs(dsc[size_t(u * ng + g)]));
      for (int64_t i = 0; i < qo_len; ++i)
        for (int64_t h = hk * G; h < (hk + 1) * G; ++h) {
          const int64_t t = qo_indptr[b] + i, pos = kv_len - qo_len + i;  // sees lo..pos
          const int64_t lo = window ? std::max<int64_t>(0, pos - window + 1) : 0;
          const float* qr = q + (t * Hq + h) * D;
          P.assign(size_t(pos + 1), 0.0);
          double mx = -INFINITY, sum = 0;
          for (int64_t j = lo; j <= pos; ++j) {
            double s = 0;
            for (int64_t c = 0; c < D; ++c) s += double(qr[c]) * double(k[((kv0 + j) * Hkv + hk) * D + c]);
            mx = std::max(mx, P[size_t(j)] = s * scale);
          }
          for (int64_t j = lo; j <= pos; ++j) sum += (P[size_t(j)] = std::exp(P[size_t(j)] - mx));
          for (auto& x : P) x /= sum;
          double* o = bound.data() + (t * Hq + h) * D;
          double* o8 = bounds.w8.data() + (t * Hq + h) * D;
          pwin.assign(size_t(kv_len), 0.0);  // max of P over |t' - t| < kPvTile, t' <= pos
          for (int64_t j = 0; j < kv_len; ++j)
            for (int64_t u = std::max<int64_t>(0, j - (kPvTile - 1)); u <= std::min(pos, j + (kPvTile - 1)); ++u)
              pwin[size_t(j)] = std::max(pwin[size_t(j)], P[size_t(u)]);
          for (int64_t g = 0; g < ng; ++g)
            for (int64_t c = g * 32; c < std::min(D, g * 32 + 32); ++c) {
              double acc = 0, acc8 = 0;
              for (int64_t j = lo; j <= pos; ++j) {
                double dw = dwin[size_t(g * kv_len + j)];
                if (j + (kPvTile - 1) > pos) {  // the window ends at pos: the row never sees further scales
                  dw = 0;
                  for (int64_t u = std::max<int64_t>(lo, j - (kPvTile - 1)); u <= pos; ++u)
                    dw = std::max(dw, std::fabs(dsc[size_t(u * ng + g)]));
                }
                acc += aq[size_t(j * D + c)] * pwin[size_t(j)] * dw;
                acc8 += aq8[size_t(j * D + c)] * pwin[size_t(j)] * dw;
              }
              o[c] = 1.01 * 0x1p-14 * acc;
              o8[c] = vt == KvType::int4 ? 1.01 * 0x1p-7 * acc8 : o[c];
            }
        }
    }
  }
  return bounds;
}
// The same over a fixture, against its dequantized K rows (f.kq).
inline PvBounds pv_rounding_bound(const float* q, const int64_t* qo_indptr, const Filled& f, int64_t Hq, double scale,
                                  int64_t window = 0) {
  const KvCacheConfig& cfg = f.cache->config();
  return pv_rounding_bound(q, qo_indptr, f.kq.data(), f.v.data(), f.kv_indptr.data(), int64_t(f.seqs.size()), Hq,
                           cfg.n_kv_heads, cfg.head_dim, scale, cfg.v_type, window);
}

// The bound of level lvl's P.V: none for scalar (f32 weights); avx2, avxvnni
// and avx512vbmi: 8-bit weights over an int4 V, 16-bit over an int8 V (w8
// equals w16 there); avx512 and avx512vnni: 16-bit.
inline const double* pv_bound_for(SimdLevel lvl, const PvBounds& b) {
  if (lvl == SimdLevel::avx2 || lvl == SimdLevel::avxvnni || lvl >= SimdLevel::avx512vbmi) return b.w8.data();
  return lvl >= SimdLevel::avx512 ? b.w16.data() : nullptr;
}

}  // namespace llmk::test
