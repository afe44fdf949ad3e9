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
  std::vector<int64_t> seqs, kv_indptr;   // kv_indptr [B+1] over the dense arrays
  std::vector<float> k, v;                // [total, Hkv, D] as given
  std::vector<float> kq, vq;              // [total, Hkv, D] dequantized from the cache's types; K as given (not rotated)
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

}  // namespace llmk::test
