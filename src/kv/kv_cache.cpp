// KvCache: the block manager plus one host allocation holding every layer's K
// and V pools (llmk/kv_cache.hpp). Writes quantize with the reference
// quantizer (kv_quant.cpp), so the CPU cache holds exactly the oracle's bits;
// with k_rotate, K rows are rotated first (hadamard_transform, whose bits do
// not depend on the SIMD path).
#include "llmk/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "llmk/error.hpp"
#ifdef __linux__
#include <sys/mman.h>
#endif

namespace llmk {

void validate(const KvCacheConfig& c, const char* fn) {
  LLMK_CHECK_ARG(c.n_layers >= 1, fn, "n_layers", c.n_layers, "must be >= 1");
  LLMK_CHECK_ARG(c.n_kv_heads >= 1, fn, "n_kv_heads", c.n_kv_heads, "must be >= 1");
  LLMK_CHECK_ARG(c.head_dim >= 16 && c.head_dim <= 256 && c.head_dim % 16 == 0, fn, "head_dim", c.head_dim,
                 "must be a multiple of 16 in [16, 256]");
  LLMK_CHECK_ARG(c.block_tokens >= 1 && c.block_tokens <= kKvMaxBlockTokens, fn, "block_tokens", c.block_tokens,
                 "must be in [1, 2^20]");
  LLMK_CHECK_ARG(int(c.k_type) < kKvTypeCount, fn, "k_type", int(c.k_type), "must be a KvType");
  LLMK_CHECK_ARG(int(c.v_type) < kKvTypeCount, fn, "v_type", int(c.v_type), "must be a KvType");
  // One block's bytes (kv_block_bytes) must fit in int64: a product that wraps
  // would size the pool wrongly (or divide by zero in the block count).
  int64_t block_bytes = 0;
  const bool overflow = __builtin_mul_overflow(c.n_layers, c.n_kv_heads, &block_bytes) ||
                        __builtin_mul_overflow(block_bytes, c.block_tokens, &block_bytes) ||
                        __builtin_mul_overflow(block_bytes,
                                               kv_row_bytes(c.k_type, c.head_dim) + kv_row_bytes(c.v_type, c.head_dim),
                                               &block_bytes);
  LLMK_CHECK_ARG(!overflow, fn, "n_layers x n_kv_heads x block_tokens",
                 std::to_string(c.n_layers) + " x " + std::to_string(c.n_kv_heads) + " x " +
                     std::to_string(c.block_tokens),
                 "one block's bytes overflow a 64-bit integer");
  LLMK_CHECK_ARG(c.budget_bytes >= block_bytes, fn, "budget_bytes", c.budget_bytes,
                 "must hold at least one block of " + std::to_string(block_bytes) + " bytes");
  LLMK_CHECK_ARG(c.budget_bytes / block_bytes < (int64_t(1) << 31), fn, "budget_bytes", c.budget_bytes,
                 "must hold fewer than 2^31 blocks of " + std::to_string(block_bytes) + " bytes");
}

int64_t kv_block_bytes(const KvCacheConfig& c) {
  return c.n_layers * c.n_kv_heads * c.block_tokens *
         (kv_row_bytes(c.k_type, c.head_dim) + kv_row_bytes(c.v_type, c.head_dim));
}

double kv_bytes_per_token(const KvCacheConfig& c) { return double(kv_block_bytes(c)) / double(c.block_tokens); }

Buffer kv_pool_buffer(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < kHuge) return Buffer(bytes);  // too small for a huge page: no 2 MiB rounding
  Buffer b(bytes, kHuge);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(b.data(), (bytes + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  return b;
}

namespace {
int64_t checked_blocks(const KvCacheConfig& c) {
  validate(c, "KvCache");
  return c.budget_bytes / kv_block_bytes(c);
}
}  // namespace

KvCache::KvCache(const KvCacheConfig& cfg)
    : cfg_(cfg),
      mgr_(checked_blocks(cfg), cfg.block_tokens),
      k_block_bytes_(cfg.n_kv_heads * cfg.block_tokens * kv_row_bytes(cfg.k_type, cfg.head_dim)),
      v_block_bytes_(cfg.n_kv_heads * cfg.block_tokens * kv_row_bytes(cfg.v_type, cfg.head_dim)),
      k_pool_bytes_((mgr_.num_blocks() * k_block_bytes_ + 63) / 64 * 64),
      v_pool_bytes_((mgr_.num_blocks() * v_block_bytes_ + 63) / 64 * 64),
      storage_(kv_pool_buffer(size_t(cfg.n_layers * (k_pool_bytes_ + v_pool_bytes_)))) {
  // Zero-filled, so a never-written slot reads as 0 (tests poison it on purpose).
  std::memset(storage_.data(), 0, storage_.bytes());
}

// Every pool starts 64-byte aligned: int8 / int4 rows are 34 / 20 bytes a
// group, so a pool of N blocks of them may end at 2 mod 4, and an f32 / f16
// pool right after it would be misaligned for its element loads (on a GPU, a
// copy of this storage faults on them).
uint8_t* KvCache::pool(int64_t layer, int kv) const {
  return storage_.as<uint8_t>() + layer * (k_pool_bytes_ + v_pool_bytes_) + (kv ? k_pool_bytes_ : 0);
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  const char* fn = "KvCache::copy_block";
  const int64_t n = mgr_.num_blocks();
  LLMK_CHECK_ARG(src >= 0 && src < n, fn, "src", src, "must be in [0, " + std::to_string(n) + ")");
  LLMK_CHECK_ARG(dst >= 0 && dst < n, fn, "dst", dst, "must be in [0, " + std::to_string(n) + ")");
  LLMK_CHECK_ARG(dst != src, fn, "dst", dst, "must differ from src");
  LLMK_CHECK_ARG(mgr_.refcount(dst) == 1, fn, "dst", dst,
                 "must be held by one sequence only (refcount " + std::to_string(mgr_.refcount(dst)) +
                     "): other holders, or a later reuse_prefix(), would read the copy");
  LLMK_CHECK_ARG(!mgr_.cached(dst), fn, "dst", dst,
                 "is a full block registered for prefix reuse: a later reuse_prefix() would hand out the copy "
                 "under the old tokens' hash");
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    std::memcpy(pool(l, 0) + dst * k_block_bytes_, pool(l, 0) + src * k_block_bytes_, size_t(k_block_bytes_));
    std::memcpy(pool(l, 1) + dst * v_block_bytes_, pool(l, 1) + src * v_block_bytes_, size_t(v_block_bytes_));
  }
}

KvStatus KvCache::append(int64_t seq, std::span<const int32_t> tokens, std::vector<int64_t>* slots) {
  std::vector<KvBlockCopy> copies;
  const KvStatus st = mgr_.append(seq, tokens, slots, &copies);
  for (const auto& c : copies) copy_block(c.src, c.dst);
  return st;
}

void KvCache::write(int64_t layer, std::span<const int64_t> slots, const float* k, const float* v) {
  const char* fn = "KvCache::write";
  LLMK_CHECK_ARG(layer >= 0 && layer < cfg_.n_layers, fn, "layer", layer,
                 "must be in [0, " + std::to_string(cfg_.n_layers) + ")");
  LLMK_CHECK_ARG(slots.empty() || (k && v), fn, "k/v", "null", "must not be null");
  const int64_t nslots = mgr_.num_blocks() * cfg_.block_tokens;
  for (int64_t s : slots) {
    LLMK_CHECK_ARG(s >= 0 && s < nslots, fn, "slot", s, "must be in [0, " + std::to_string(nslots) + ")");
    // A block no sequence holds may be free or cached for prefix reuse: writing it
    // would change the rows a later reuse_prefix() hands out.
    LLMK_CHECK_ARG(mgr_.refcount(int32_t(s / cfg_.block_tokens)) > 0, fn, "slot", s,
                   "must be in a block a live sequence holds (a slot append() returned)");
  }
  const int64_t H = cfg_.n_kv_heads, D = cfg_.head_dim, bt = cfg_.block_tokens;
  const int64_t kr = kv_row_bytes(cfg_.k_type, D), vr = kv_row_bytes(cfg_.v_type, D);
  uint8_t *kp = pool(layer, 0), *vp = pool(layer, 1);
  std::vector<float> rot(cfg_.k_rotate ? size_t(H * D) : 0);  // [H, D]: one token's K, rotated
  for (size_t t = 0; t < slots.size(); ++t) {
    const int64_t b = slots[t] / bt, off = slots[t] % bt;
    const float* kt = k + int64_t(t) * H * D;  // [H, D]
    if (cfg_.k_rotate) {
      std::copy_n(kt, H * D, rot.data());
      hadamard_transform(rot.data(), H, D, kv_rotation_block(D));
      kt = rot.data();
    }
    for (int64_t h = 0; h < H; ++h) {
      const int64_t row = kv_pool_row(b, H, h, bt, off);
      kv_quantize_row(cfg_.k_type, kt + h * D, D, kp + row * kr);
      kv_quantize_row(cfg_.v_type, v + (int64_t(t) * H + h) * D, D, vp + row * vr);
    }
  }
}

KvLayerView KvCache::layer(int64_t l) const {
  LLMK_CHECK_ARG(l >= 0 && l < cfg_.n_layers, "KvCache::layer", "l", l,
                 "must be in [0, " + std::to_string(cfg_.n_layers) + ")");
  return {pool(l, 0),        pool(l, 1),      cfg_.k_type,   cfg_.v_type, mgr_.num_blocks(),
          cfg_.block_tokens, cfg_.n_kv_heads, cfg_.head_dim, Device::cpu, cfg_.k_rotate};
}

}  // namespace llmk
