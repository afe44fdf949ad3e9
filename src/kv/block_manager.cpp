// KvBlockManager: the bookkeeping of the paged KV cache (llmk/kv_cache.hpp):
// blocks, reference counts, copy-on-write, prefix hashes and LRU eviction.
// It never touches K/V data; the storage applies the copies it returns.
#include <algorithm>
#include <stdexcept>

#include "llmk/error.hpp"
#include "llmk/kv_cache.hpp"

namespace llmk {
namespace {
// splitmix64 finalizer, chained: hash(parent, tokens) of a full block.
uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}
uint64_t block_hash(uint64_t parent, std::span<const int32_t> toks) {
  uint64_t h = mix(0x6b76636163686521ull, parent);
  for (int32_t t : toks) h = mix(h, uint32_t(t));
  return h;
}
}  // namespace

KvBlockManager::KvBlockManager(int64_t num_blocks, int64_t block_tokens) : block_tokens_(block_tokens) {
  LLMK_CHECK_ARG(num_blocks >= 1 && num_blocks < (int64_t(1) << 31), "KvBlockManager", "num_blocks", num_blocks,
                 "must be in [1, 2^31) (is the memory budget smaller than one block?)");
  LLMK_CHECK_ARG(block_tokens >= 1 && block_tokens <= kKvMaxBlockTokens, "KvBlockManager", "block_tokens", block_tokens,
                 "must be in [1, 2^20]");
  blocks_.resize(size_t(num_blocks));
  free_.reserve(size_t(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));  // block 0 is taken first
}

KvBlockManager::Seq& KvBlockManager::seq_ref(int64_t seq, const char* fn) {
  auto it = seqs_.find(seq);
  LLMK_CHECK_ARG(it != seqs_.end(), fn, "seq", seq, "must be a live sequence id");
  return it->second;
}
const KvBlockManager::Seq& KvBlockManager::seq_ref(int64_t seq, const char* fn) const {
  auto it = seqs_.find(seq);
  LLMK_CHECK_ARG(it != seqs_.end(), fn, "seq", seq, "must be a live sequence id");
  return it->second;
}

int64_t KvBlockManager::add_sequence() {
  seqs_[next_seq_] = Seq{};
  return next_seq_++;
}

int32_t KvBlockManager::take_block() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {  // evict the least recently used cached block
    b = lru_.front();
    lru_.pop_front();
    unhash(b);
  }
  blocks_[size_t(b)].ref = 1;
  return b;
}

void KvBlockManager::unhash(int32_t b) {
  Block& m = blocks_[size_t(b)];
  if (!m.hashed) return;
  auto it = by_hash_.find(m.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  m.hashed = false;
  m.tokens.clear();
}

void KvBlockManager::release(int32_t b) {
  Block& m = blocks_[size_t(b)];
  if (--m.ref > 0) return;
  if (m.hashed) {
    m.lru = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
  }
}

void KvBlockManager::register_full(Seq& s, int64_t i) {
  const int32_t b = s.blocks[size_t(i)];
  Block& m = blocks_[size_t(b)];
  const auto toks = std::span(s.tokens).subspan(size_t(i * block_tokens_), size_t(block_tokens_));
  // Blocks fill in order, reuse_prefix() records the blocks it reuses and
  // truncate() drops the hashes of the blocks it cuts, so s.hashes holds
  // blocks 0 .. i-1 here: the parent's hash in O(1), also when the parent is
  // not in the cache (an identical block was cached first; recomputing the
  // chain from the first block then made n identical sequences cost O(n *
  // length^2 / 16)).
  if (s.hashes.size() != size_t(i)) throw std::logic_error("KvBlockManager: block hashes out of step with blocks");
  m.parent = i == 0 ? 0 : s.hashes[size_t(i - 1)];
  m.hash = block_hash(m.parent, toks);
  s.hashes.push_back(m.hash);
  if (by_hash_.count(m.hash)) return;  // an identical block is cached already: keep this one private
  m.hashed = true;
  m.tokens.assign(toks.begin(), toks.end());
  by_hash_[m.hash] = b;
}

int64_t KvBlockManager::reuse_prefix(int64_t seq, std::span<const int32_t> tokens) {
  Seq& s = seq_ref(seq, "KvBlockManager::reuse_prefix");
  LLMK_CHECK_ARG(s.tokens.empty(), "KvBlockManager::reuse_prefix", "seq", seq, "must be an empty sequence");
  uint64_t parent = 0;
  const int64_t bt = block_tokens_;
  for (int64_t i = 0; (i + 1) * bt <= int64_t(tokens.size()); ++i) {
    const auto toks = tokens.subspan(size_t(i * bt), size_t(bt));
    const uint64_t h = block_hash(parent, toks);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    Block& m = blocks_[size_t(it->second)];
    if (m.parent != parent || !std::equal(toks.begin(), toks.end(), m.tokens.begin())) break;  // a collision
    if (m.ref++ == 0) lru_.erase(m.lru);
    s.blocks.push_back(it->second);
    s.tokens.insert(s.tokens.end(), toks.begin(), toks.end());
    s.hashes.push_back(h);
    parent = h;
  }
  return int64_t(s.tokens.size());
}

KvStatus KvBlockManager::append(int64_t seq, std::span<const int32_t> tokens, std::vector<int64_t>* slots,
                                std::vector<KvBlockCopy>* copies) {
  Seq& s = seq_ref(seq, "KvBlockManager::append");
  LLMK_CHECK_ARG(slots != nullptr, "KvBlockManager::append", "slots", slots, "must not be null");
  LLMK_CHECK_ARG(copies != nullptr, "KvBlockManager::append", "copies", copies, "must not be null");
  const int64_t bt = block_tokens_, len = int64_t(s.tokens.size()), n = int64_t(tokens.size());
  if (n == 0) return KvStatus::ok;
  const bool partial = len % bt != 0;
  const bool cow = partial && blocks_[size_t(s.blocks.back())].ref > 1;
  const int64_t need = (len + n + bt - 1) / bt - (len + bt - 1) / bt + (cow ? 1 : 0);
  if (need > available_blocks()) return KvStatus::out_of_blocks;
  // A partial block this sequence owns alone but that is still cached (its
  // sharers truncated or freed it) leaves the cache before it is written; only
  // now, so out_of_blocks keeps it cached.
  if (partial && !cow) unhash(s.blocks.back());
  if (cow) {
    const int32_t old = s.blocks.back(), nb = take_block();
    copies->push_back({old, nb});
    release(old);
    s.blocks.back() = nb;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = len + i;
    if (pos % bt == 0) s.blocks.push_back(take_block());
    s.tokens.push_back(tokens[size_t(i)]);
    slots->push_back(int64_t(s.blocks.back()) * bt + pos % bt);
    if ((pos + 1) % bt == 0) register_full(s, pos / bt);
  }
  return KvStatus::ok;
}

int64_t KvBlockManager::fork(int64_t seq) {
  const Seq copy = seq_ref(seq, "KvBlockManager::fork");
  for (int32_t b : copy.blocks) ++blocks_[size_t(b)].ref;
  seqs_[next_seq_] = copy;
  return next_seq_++;
}

void KvBlockManager::truncate(int64_t seq, int64_t length) {
  Seq& s = seq_ref(seq, "KvBlockManager::truncate");
  LLMK_CHECK_ARG(length >= 0 && length <= int64_t(s.tokens.size()), "KvBlockManager::truncate", "length", length,
                 "must be in [0, " + std::to_string(s.tokens.size()) + "]");
  const int64_t keep = (length + block_tokens_ - 1) / block_tokens_;
  while (int64_t(s.blocks.size()) > keep) {
    release(s.blocks.back());
    s.blocks.pop_back();
  }
  s.tokens.resize(size_t(length));
  s.hashes.resize(size_t(std::min<int64_t>(int64_t(s.hashes.size()), length / block_tokens_)));
  // A full block that becomes partial will be written again: if this sequence
  // owns it alone, it leaves the prefix cache; if shared, the write copies it.
  if (length % block_tokens_ != 0 && blocks_[size_t(s.blocks.back())].ref == 1) unhash(s.blocks.back());
}

void KvBlockManager::rollback(int64_t seq, int64_t length) {
  Seq& s = seq_ref(seq, "KvBlockManager::rollback");
  LLMK_CHECK_ARG(length >= 0 && length <= int64_t(s.tokens.size()), "KvBlockManager::rollback", "length", length,
                 "must be in [0, " + std::to_string(s.tokens.size()) + "]");
  for (size_t i = size_t(length / block_tokens_); i < s.blocks.size(); ++i)
    if (blocks_[size_t(s.blocks[i])].ref == 1) unhash(s.blocks[i]);
  truncate(seq, length);
}

void KvBlockManager::free_sequence(int64_t seq) {
  Seq& s = seq_ref(seq, "KvBlockManager::free_sequence");
  // Tail first, so the LRU evicts a finished sequence's tail before its prefix.
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) release(*it);
  seqs_.erase(seq);
}

int32_t KvBlockManager::refcount(int32_t block) const {
  LLMK_CHECK_ARG(block >= 0 && block < num_blocks(), "KvBlockManager::refcount", "block", block,
                 "must be in [0, " + std::to_string(num_blocks()) + ")");
  return blocks_[size_t(block)].ref;
}

bool KvBlockManager::cached(int32_t block) const {
  LLMK_CHECK_ARG(block >= 0 && block < num_blocks(), "KvBlockManager::cached", "block", block,
                 "must be in [0, " + std::to_string(num_blocks()) + ")");
  return blocks_[size_t(block)].hashed;
}

int64_t KvBlockManager::length(int64_t seq) const {
  return int64_t(seq_ref(seq, "KvBlockManager::length").tokens.size());
}
std::span<const int32_t> KvBlockManager::blocks(int64_t seq) const {
  return seq_ref(seq, "KvBlockManager::blocks").blocks;
}
std::span<const int32_t> KvBlockManager::tokens(int64_t seq) const {
  return seq_ref(seq, "KvBlockManager::tokens").tokens;
}

PageTable KvBlockManager::page_table(std::span<const int64_t> seqs) const {
  PageTable pt;
  pt.indptr.push_back(0);
  for (int64_t id : seqs) {
    const Seq& s = seq_ref(id, "KvBlockManager::page_table");
    pt.indices.insert(pt.indices.end(), s.blocks.begin(), s.blocks.end());
    pt.indptr.push_back(int64_t(pt.indices.size()));
    const int64_t len = int64_t(s.tokens.size());
    pt.last_len.push_back(len == 0 ? 0 : int32_t(len - (len - 1) / block_tokens_ * block_tokens_));
  }
  return pt;
}

KvStats KvBlockManager::stats() const {
  KvStats st;
  st.blocks_total = num_blocks();
  st.blocks_free = int64_t(free_.size());
  st.blocks_cached = int64_t(lru_.size());
  std::vector<int32_t> fill(blocks_.size(), 0);  // tokens holding data per block (max over sharers)
  for (const auto& [id, s] : seqs_)
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      const int64_t in_block = std::min<int64_t>(block_tokens_, int64_t(s.tokens.size()) - int64_t(i) * block_tokens_);
      fill[size_t(s.blocks[i])] = std::max(fill[size_t(s.blocks[i])], int32_t(in_block));
    }
  for (size_t b = 0; b < blocks_.size(); ++b)
    if (blocks_[b].ref > 0) {
      ++st.blocks_used;
      st.tokens_stored += fill[b];
    }
  st.fragmentation = st.blocks_used ? 1.0 - double(st.tokens_stored) / double(st.blocks_used * block_tokens_) : 0.0;
  return st;
}

}  // namespace llmk
