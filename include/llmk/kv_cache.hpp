// Paged KV cache: a block manager (bookkeeping only) and a host storage pool.
//
// Usage by a model's attention layer, one engine step:
//   KvCache cache(cfg);                          // pool sized from cfg.budget_bytes
//   int64_t s = cache.add_sequence();
//   int64_t reused = cache.reuse_prefix(s, prompt);          // optional prefix caching
//   std::vector<int64_t> slots;                               // one slot per new token
//   if (cache.append(s, new_tokens, &slots) == KvStatus::out_of_blocks) { preempt ... }
//   for each layer l:
//     cache.write(l, slots, k, v);   // k, v: [T, n_kv_heads * head_dim] f32, quantized on write
//     PageTable pt = cache.page_table({s, ...});  // CSR, read directly by the kernels
//     attention_prefill / attention_decode(q, cache.layer(l), pt.view(), ...)   (llmk/attention.hpp)
//
// Layout. A block holds block_tokens consecutive tokens of one sequence. Each
// layer has a K pool and a V pool, each [num_blocks][n_kv_heads][block_tokens]
// rows of kv_row_bytes(type, head_dim) bytes (llmk/kv_quant.hpp), so the rows a
// (sequence, kv-head) pair reads are contiguous within a block. A token's slot
// is block * block_tokens + offset; K and V may have different storage types.
//
// Manager rules. Blocks carry reference counts: fork() shares all blocks, and
// the first append into a shared partial block copies it (copy-on-write; the
// copy is returned to the caller, or done by KvCache). Prefix caching: a full
// block gets hash(parent hash, its token ids); reuse_prefix() attaches the
// longest chain of cached full blocks (tokens compared, not only hashes). Blocks
// whose count falls to 0 stay cached if hashed and are evicted in LRU order
// (a freed sequence's tail first) when free blocks run out. append() is
// all-or-nothing: out_of_blocks leaves every sequence and block untouched.
// A block is registered for reuse when append() fills it: write its K/V for a
// layer before attention reads that layer (the write-then-attend order above).
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "llmk/cuda.hpp"
#include "llmk/kv_quant.hpp"
#include "llmk/tensor.hpp"

namespace llmk {

enum class KvStatus { ok, out_of_blocks };

// The largest block_tokens a cache or block manager takes (one block of it
// per sequence is a contiguous cache).
inline constexpr int64_t kKvMaxBlockTokens = int64_t(1) << 20;

struct KvCacheConfig {
  int64_t n_layers = 1;
  int64_t n_kv_heads = 1;
  int64_t head_dim = 64;      // a multiple of 16, at most 256
  int64_t block_tokens = 16;  // tokens per block, 1..2^20 (one max-length block per sequence = a contiguous cache)
  KvType k_type = KvType::f32;
  KvType v_type = KvType::f32;
  int64_t budget_bytes = 0;  // pool = floor(budget_bytes / kv_block_bytes(cfg)) blocks (+ < 128 B a layer of alignment)
  bool k_rotate = false;     // store each K head row Hadamard-rotated (llmk/kv_quant.hpp,
                             // kv_rotation_block(head_dim)) before quantizing; attention
                             // rotates q the same way, so results are unchanged in exact arithmetic
};

void validate(const KvCacheConfig& cfg, const char* fn);
// Bytes of one block over all layers, K and V.
int64_t kv_block_bytes(const KvCacheConfig& cfg);
// Bytes of one token over all layers, K and V (= kv_block_bytes / block_tokens).
double kv_bytes_per_token(const KvCacheConfig& cfg);

struct KvBlockCopy {
  int32_t src, dst;  // copy every layer's K and V rows of block src into block dst
};

struct KvStats {
  int64_t blocks_total = 0, blocks_used = 0, blocks_free = 0, blocks_cached = 0;  // used: refcount > 0;
  int64_t tokens_stored = 0;  // distinct token slots holding data in used blocks
  double fragmentation = 0;   // 1 - tokens_stored / (blocks_used * block_tokens)
};

// Page table of a batch in CSR form; the attention kernels read the view.
struct PageTableView {
  const int64_t* indptr = nullptr;    // [num_seqs + 1] offsets into indices
  const int32_t* indices = nullptr;   // [indptr[num_seqs]] block ids, in sequence order
  const int32_t* last_len = nullptr;  // [num_seqs] tokens in the last block (0 only for an empty sequence)
  int64_t num_seqs = 0;
  Device device = Device::cpu;
};
struct PageTable {
  std::vector<int64_t> indptr;
  std::vector<int32_t> indices;
  std::vector<int32_t> last_len;
  PageTableView view() const {
    return {indptr.data(), indices.data(), last_len.data(), int64_t(last_len.size()), Device::cpu};
  }
};

class KvBlockManager {
 public:
  KvBlockManager(int64_t num_blocks, int64_t block_tokens);

  int64_t add_sequence();
  // Attaches the longest cached prefix of `tokens` (whole blocks only) to the
  // empty sequence; returns the number of tokens reused (a multiple of block_tokens).
  // Callers that need logits of the last prompt token pass the prompt without it.
  int64_t reuse_prefix(int64_t seq, std::span<const int32_t> tokens);
  // Reserves slots for `tokens` after the sequence's end. On ok, slots->size()
  // grows by tokens.size() and copies receives the copy-on-write block copies
  // the storage must perform BEFORE writing the slots.
  KvStatus append(int64_t seq, std::span<const int32_t> tokens, std::vector<int64_t>* slots,
                  std::vector<KvBlockCopy>* copies);
  int64_t fork(int64_t seq);                   // a new sequence sharing every block
  void truncate(int64_t seq, int64_t length);  // keep the first `length` tokens
  // truncate() for tokens appended on trial (speculative drafts) and now rejected: besides,
  // every block holding a cut token that only this sequence holds leaves the prefix cache,
  // so cached blocks never hold rejected tokens. length >= the tokens reuse_prefix() attached.
  void rollback(int64_t seq, int64_t length);
  void free_sequence(int64_t seq);

  int64_t length(int64_t seq) const;
  std::span<const int32_t> blocks(int64_t seq) const;
  std::span<const int32_t> tokens(int64_t seq) const;
  int32_t refcount(int32_t block) const;  // block in [0, num_blocks)
  // Whether the block is registered for prefix reuse (a full block that
  // reuse_prefix() may attach to another sequence); block in [0, num_blocks).
  bool cached(int32_t block) const;
  PageTable page_table(std::span<const int64_t> seqs) const;
  KvStats stats() const;
  int64_t num_blocks() const { return int64_t(blocks_.size()); }
  int64_t block_tokens() const { return block_tokens_; }
  // Blocks append() could still take (free + evictable cached).
  int64_t available_blocks() const { return int64_t(free_.size() + lru_.size()); }

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    uint64_t hash = 0;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;  // the block's token ids, kept while hashed
    std::list<int32_t>::iterator lru;
  };
  struct Seq {
    std::vector<int32_t> blocks;
    std::vector<int32_t> tokens;
    std::vector<uint64_t> hashes;  // hashes[i]: chained hash of full block i (parent hashes[i - 1], 0 for i = 0)
  };
  Seq& seq_ref(int64_t seq, const char* fn);
  const Seq& seq_ref(int64_t seq, const char* fn) const;
  int32_t take_block();
  void release(int32_t b);
  void unhash(int32_t b);
  void register_full(Seq& s, int64_t block_index);

  int64_t block_tokens_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;  // never-hashed free blocks (a stack)
  std::list<int32_t> lru_;     // cached blocks with ref 0; front = evicted first
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::unordered_map<int64_t, Seq> seqs_;
  int64_t next_seq_ = 0;
};

// Host memory for KV pools: from 2 MiB on, 2 MiB aligned (the size rounded up
// to 2 MiB) and, on Linux, advised for transparent huge pages before it is
// first touched, so every page of it can be a huge one; smaller pools are
// plain 64-byte aligned buffers. Huge pages spare pools read in shuffled
// 16-token blocks a TLB miss per block (docs/kv_cache.md).
Buffer kv_pool_buffer(size_t bytes);

// One layer of a cache, as the attention kernels read it.
struct KvLayerView {
  const void* k = nullptr;  // [num_blocks][n_kv_heads][block_tokens] rows of kv_row_bytes(k_type, head_dim)
  const void* v = nullptr;  // [num_blocks][n_kv_heads][block_tokens] rows of kv_row_bytes(v_type, head_dim)
  KvType k_type = KvType::f32, v_type = KvType::f32;
  int64_t num_blocks = 0, block_tokens = 16, n_kv_heads = 1, head_dim = 64;
  Device device = Device::cpu;
  bool k_rotated = false;  // K rows hold H k (KvCacheConfig::k_rotate): attention rotates q to match
};

inline namespace LLMK_ISA_NAMESPACE {
// The pool row of token `off` (< block_tokens) of block `block`, kv-head h: the
// one formula of the layout above. Computed in T (int64_t, or uint32_t where a
// kernel wants 32-bit indices): a uint32_t caller needs the pool's row count,
// num_blocks * n_kv_heads * block_tokens, below 2^32.
template <class T>
LLMK_HD constexpr T kv_pool_row(T block, T n_kv_heads, T h, T block_tokens, T off) {
  static_assert(std::is_same_v<T, int64_t> || std::is_same_v<T, uint32_t>, "rows are int64_t or uint32_t");
  return (block * n_kv_heads + h) * block_tokens + off;
}
}  // namespace LLMK_ISA_NAMESPACE

// Manager + host storage.
class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& cfg);
  const KvCacheConfig& config() const { return cfg_; }
  KvBlockManager& manager() { return mgr_; }
  const KvBlockManager& manager() const { return mgr_; }

  int64_t add_sequence() { return mgr_.add_sequence(); }
  int64_t reuse_prefix(int64_t seq, std::span<const int32_t> tokens) { return mgr_.reuse_prefix(seq, tokens); }
  // Reserves the slots and performs the copy-on-write copies.
  KvStatus append(int64_t seq, std::span<const int32_t> tokens, std::vector<int64_t>* slots);
  int64_t fork(int64_t seq) { return mgr_.fork(seq); }
  void truncate(int64_t seq, int64_t length) { mgr_.truncate(seq, length); }
  void rollback(int64_t seq, int64_t length) { mgr_.rollback(seq, length); }
  void free_sequence(int64_t seq) { mgr_.free_sequence(seq); }
  PageTable page_table(std::span<const int64_t> seqs) const { return mgr_.page_table(seqs); }

  // Quantizes and stores K and V rows of T tokens of one layer through the slot map:
  // k, v: [T, n_kv_heads * head_dim] f32 (row stride n_kv_heads * head_dim); slots: [T].
  // With k_rotate, each K head row is rotated (into a copy) before it is quantized.
  void write(int64_t layer, std::span<const int64_t> slots, const float* k, const float* v);
  KvLayerView layer(int64_t l) const;
  // Copies every layer's K and V rows of block src into block dst (a copy-on-write
  // copy; append() does its own). src and dst: distinct blocks in [0, num_blocks);
  // dst must be held by exactly one sequence (refcount 1, the caller's): writing a
  // shared block, or one no sequence holds (free, or cached for prefix reuse),
  // would change rows other sequences read; and dst must not be registered for
  // prefix reuse (manager().cached(dst): a full block a later reuse_prefix()
  // would hand out under its old tokens). InvalidArgument otherwise, nothing copied.
  void copy_block(int32_t src, int32_t dst);

 private:
  uint8_t* pool(int64_t layer, int kv) const;  // kv: 0 = K, 1 = V
  KvCacheConfig cfg_;
  KvBlockManager mgr_;
  int64_t k_block_bytes_, v_block_bytes_;  // one layer, one block
  int64_t k_pool_bytes_, v_pool_bytes_;    // one layer's pool, rounded up to 64 bytes (see pool())
  Buffer storage_;
};

}  // namespace llmk
