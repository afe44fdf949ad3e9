// The block manager and the host cache: slots, page tables, fork with
// copy-on-write, truncate, prefix reuse (hash chain, collisions by token
// compare), LRU eviction, out of blocks (all-or-nothing), stats and the
// memory target (256 sequences of 1..4096 tokens hold <= 1.04x their bytes).
#include <algorithm>
#include <map>
#include <string>
#include <numeric>
#include <random>
#include <vector>

#include "llmk/kv_cache.hpp"
#include "tests/common/testutil.hpp"

using namespace llmk;

namespace {
std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}
}  // namespace

TEST(KvCache, PoolBufferIsHugePageAligned) {  // so transparent huge pages can back all of it
  const llmk::Buffer b = llmk::kv_pool_buffer((size_t(5) << 20) + 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t(2) << 20), 0u);
  EXPECT_EQ(b.bytes(), (size_t(5) << 20) + 3);
  const llmk::Buffer small = llmk::kv_pool_buffer(1000);  // below a huge page: 64-byte aligned only
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  EXPECT_EQ(small.bytes(), 1000u);
}

// Every layer's K and V pool starts 64-byte aligned, also when the blocks of
// the pool before it (int8 / int4: 34 / 20 bytes a group) sum to 2 mod 4
// bytes: an f32 pool there would be misaligned for its element loads.
TEST(KvCache, EveryPoolIsAligned) {
  KvCacheConfig cfg;
  cfg.n_layers = 3, cfg.n_kv_heads = 1, cfg.head_dim = 96, cfg.block_tokens = 7;
  for (auto [kt, vt] : {std::pair{KvType::int8, KvType::f32}, std::pair{KvType::int4, KvType::f16},
                        std::pair{KvType::f32, KvType::int8}}) {
    cfg.k_type = kt, cfg.v_type = vt;
    cfg.budget_bytes = 5 * kv_block_bytes(cfg);  // 5 blocks: a K pool of 5 x 714 bytes (int8) ends at 2 mod 4
    KvCache c(cfg);
    for (int64_t l = 0; l < cfg.n_layers; ++l) {
      const KvLayerView v = c.layer(l);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.k) % 64, 0u) << kv_type_name(kt) << " layer " << l;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.v) % 64, 0u) << kv_type_name(vt) << " layer " << l;
      // and the pools do not overlap: K, then V, then the next layer's K
      const int64_t kp = 5 * 7 * kv_row_bytes(kt, 96), vp = 5 * 7 * kv_row_bytes(vt, 96);
      EXPECT_GE(static_cast<const uint8_t*>(v.v), static_cast<const uint8_t*>(v.k) + kp);
      if (l > 0) EXPECT_GE(static_cast<const uint8_t*>(v.k), static_cast<const uint8_t*>(c.layer(l - 1).v) + vp);
    }
  }
}

TEST(KvBlockManager, AppendGivesSlotsAndPageTable) {
  KvBlockManager m(8, 4);
  const int64_t s = m.add_sequence();
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  ASSERT_EQ(m.append(s, iota_tokens(6), &slots, &copies), KvStatus::ok);
  ASSERT_EQ(slots.size(), 6u);
  const auto blocks = m.blocks(s);
  ASSERT_EQ(blocks.size(), 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(slots[size_t(i)], int64_t(blocks[size_t(i / 4)]) * 4 + i % 4);
  EXPECT_TRUE(copies.empty());
  const int64_t ids[] = {s};
  const PageTable pt = m.page_table(ids);
  EXPECT_EQ(pt.indptr, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(pt.last_len, (std::vector<int32_t>{2}));
  const KvStats st = m.stats();
  EXPECT_EQ(st.blocks_used, 2);
  EXPECT_EQ(st.tokens_stored, 6);
  EXPECT_DOUBLE_EQ(st.fragmentation, 0.25);
}

TEST(KvBlockManager, ForkSharesThenCopiesPartialBlockOnWrite) {
  KvBlockManager m(8, 4);
  const int64_t a = m.add_sequence();
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  ASSERT_EQ(m.append(a, iota_tokens(6), &slots, &copies), KvStatus::ok);
  const int64_t b = m.fork(a);
  const std::vector<int32_t> shared(m.blocks(a).begin(), m.blocks(a).end());
  EXPECT_EQ(m.refcount(shared[0]), 2);
  EXPECT_EQ(m.refcount(shared[1]), 2);
  slots.clear();
  ASSERT_EQ(m.append(b, iota_tokens(1, 7), &slots, &copies), KvStatus::ok);
  ASSERT_EQ(copies.size(), 1u);  // b's partial block copied once
  EXPECT_EQ(copies[0].src, shared[1]);
  EXPECT_EQ(m.blocks(b)[0], shared[0]);  // the full block stays shared
  EXPECT_EQ(m.blocks(b)[1], copies[0].dst);
  EXPECT_EQ(slots[0], int64_t(copies[0].dst) * 4 + 2);
  EXPECT_EQ(m.refcount(shared[1]), 1);
  copies.clear();
  slots.clear();
  ASSERT_EQ(m.append(a, iota_tokens(1, 9), &slots, &copies), KvStatus::ok);
  EXPECT_TRUE(copies.empty());  // a owns its partial block alone now
  EXPECT_EQ(slots[0], int64_t(shared[1]) * 4 + 2);
}

TEST(KvBlockManager, OutOfBlocksChangesNothing) {
  KvBlockManager m(3, 4);
  const int64_t a = m.add_sequence();
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  ASSERT_EQ(m.append(a, iota_tokens(10), &slots, &copies), KvStatus::ok);  // 3 blocks
  const int64_t b = m.fork(a);
  slots.clear();
  EXPECT_EQ(m.append(b, iota_tokens(1), &slots, &copies), KvStatus::out_of_blocks);  // would need a CoW block
  EXPECT_TRUE(slots.empty());
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(m.length(b), 10);
  EXPECT_EQ(m.refcount(m.blocks(a)[2]), 2);
  m.free_sequence(a);
  EXPECT_EQ(m.append(b, iota_tokens(2), &slots, &copies), KvStatus::ok);  // now in place
  EXPECT_EQ(m.length(b), 12);
  EXPECT_EQ(m.append(b, iota_tokens(1), &slots, &copies), KvStatus::out_of_blocks);
}

// A partial block the sequence owns alone but that is still cached (its full
// twin was forked, the fork truncated, the original freed) stays cached when
// the append runs out of blocks: out_of_blocks changes nothing.
TEST(KvBlockManager, OutOfBlocksKeepsACachedPartialBlock) {
  KvBlockManager m(2, 2);
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  const auto prompt = iota_tokens(2, 7);
  const int64_t a = m.add_sequence();
  ASSERT_EQ(m.append(a, prompt, &slots, &copies), KvStatus::ok);  // block 0 full, cached
  const int64_t b = m.fork(a);
  m.truncate(b, 1);
  m.free_sequence(a);  // b holds block 0 alone, partial, still cached
  slots.clear();
  EXPECT_EQ(m.append(b, iota_tokens(4), &slots, &copies), KvStatus::out_of_blocks);  // needs 2 more, 1 left
  EXPECT_TRUE(slots.empty());
  EXPECT_EQ(m.length(b), 1);
  m.free_sequence(b);
  EXPECT_EQ(m.reuse_prefix(m.add_sequence(), prompt), 2);
}

TEST(KvBlockManager, TruncateReleasesBlocks) {
  KvBlockManager m(8, 4);
  const int64_t a = m.add_sequence();
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  ASSERT_EQ(m.append(a, iota_tokens(13), &slots, &copies), KvStatus::ok);
  m.truncate(a, 5);
  EXPECT_EQ(m.length(a), 5);
  EXPECT_EQ(m.blocks(a).size(), 2u);
  EXPECT_EQ(m.stats().blocks_used, 2);
  slots.clear();
  ASSERT_EQ(m.append(a, iota_tokens(1, 500), &slots, &copies), KvStatus::ok);
  EXPECT_EQ(slots[0], int64_t(m.blocks(a)[1]) * 4 + 1);  // rollback: rewrite position 5 in place
  EXPECT_THROW(m.truncate(a, 7), InvalidArgument);
  m.truncate(a, 0);
  EXPECT_EQ(m.stats().blocks_used, 0);
}

TEST(KvBlockManager, PrefixReuseAndLruEviction) {
  KvBlockManager m(6, 4);
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  const auto prompt = iota_tokens(10);  // 2 full blocks + 2 tokens
  const int64_t a = m.add_sequence();
  ASSERT_EQ(m.append(a, prompt, &slots, &copies), KvStatus::ok);
  const std::vector<int32_t> ablocks(m.blocks(a).begin(), m.blocks(a).end());
  // a live sequence's full blocks are shared at once
  const int64_t b = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(b, prompt), 8);
  EXPECT_EQ(m.blocks(b)[0], ablocks[0]);
  EXPECT_EQ(m.refcount(ablocks[1]), 2);
  // a different second block: only the first is reused
  auto other = prompt;
  other[5] = 9999;
  const int64_t c = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(c, other), 4);
  // the same tokens at another position do not match (the hash chains the parent)
  const int64_t d = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(d, std::vector<int32_t>(prompt.begin() + 4, prompt.end())), 0);
  m.free_sequence(a);
  m.free_sequence(b);
  m.free_sequence(c);
  KvStats st = m.stats();
  EXPECT_EQ(st.blocks_used, 0);
  EXPECT_EQ(st.blocks_cached, 2);  // the two full blocks stay cached
  EXPECT_EQ(st.blocks_free, 4);
  // reuse after free: cached blocks come back
  const int64_t e = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(e, prompt), 8);
  EXPECT_EQ(m.stats().blocks_cached, 0);
  m.free_sequence(e);  // tail first: block 1 is evicted before block 0
  const int64_t f = m.add_sequence();
  slots.clear();
  ASSERT_EQ(m.append(f, iota_tokens(17, 5000), &slots, &copies), KvStatus::ok);  // 5 blocks: 4 free + 1 evicted
  st = m.stats();
  EXPECT_EQ(st.blocks_cached, 1);
  const int64_t g = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(g, prompt), 4);  // block 0 survived, block 1 (the tail) was evicted
  slots.clear();
  EXPECT_EQ(m.append(f, iota_tokens(4), &slots, &copies), KvStatus::out_of_blocks);  // g holds the last one
}

TEST(KvBlockManager, RewrittenBlockLeavesThePrefixCache) {
  KvBlockManager m(4, 4);
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  const auto prompt = iota_tokens(4);
  const int64_t a = m.add_sequence();
  ASSERT_EQ(m.append(a, prompt, &slots, &copies), KvStatus::ok);
  m.truncate(a, 2);  // the full, hashed block becomes partial and will be rewritten
  ASSERT_EQ(m.append(a, iota_tokens(2, 900), &slots, &copies), KvStatus::ok);
  const int64_t b = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(b, prompt), 0);  // must not match the old content
}

// The chained hash of a block whose parent is not in the cache (an identical
// block was cached first, so the parent stayed private), after a truncate and
// rewrite, and in a fork: the blocks registered then must still be found by a
// later reuse_prefix of the same tokens, so their parent hashes were right.
TEST(KvBlockManager, ChainedHashWithPrivateParentsTruncateAndFork) {
  KvBlockManager m(16, 4);
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  const auto prompt = iota_tokens(12);  // 3 full blocks
  const int64_t a = m.add_sequence(), b = m.add_sequence();
  ASSERT_EQ(m.append(a, prompt, &slots, &copies), KvStatus::ok);
  ASSERT_EQ(m.append(b, prompt, &slots, &copies), KvStatus::ok);  // identical: b's blocks stay private
  m.free_sequence(a);
  m.truncate(b, 6);
  const auto x = iota_tokens(6, 700);
  ASSERT_EQ(m.append(b, x, &slots, &copies), KvStatus::ok);  // blocks 1 and 2 rewritten, registered
  const int64_t d = m.fork(b);
  const auto z = iota_tokens(4, 900);
  ASSERT_EQ(m.append(d, z, &slots, &copies), KvStatus::ok);  // block 3, its parent from the copied chain
  std::vector<int32_t> want(prompt.begin(), prompt.begin() + 6);
  want.insert(want.end(), x.begin(), x.end());
  const int64_t c = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(c, want), 12);
  EXPECT_NE(m.blocks(c)[0], m.blocks(b)[0]);  // a's cached block 0; b's identical one stayed private
  EXPECT_EQ(m.blocks(c)[1], m.blocks(b)[1]);
  EXPECT_EQ(m.blocks(c)[2], m.blocks(b)[2]);
  want.insert(want.end(), z.begin(), z.end());
  const int64_t e = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(e, want), 16);
  EXPECT_EQ(m.blocks(e)[3], m.blocks(d)[3]);
}

TEST(KvBlockManager, BadArguments) {
  EXPECT_THROW(KvBlockManager(0, 16), InvalidArgument);
  EXPECT_THROW(KvBlockManager(4, 0), InvalidArgument);
  KvBlockManager m(4, 4);
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  EXPECT_THROW(m.append(42, iota_tokens(1), &slots, &copies), InvalidArgument);
  const int64_t a = m.add_sequence();
  ASSERT_EQ(m.append(a, iota_tokens(1), &slots, &copies), KvStatus::ok);
  EXPECT_THROW(m.reuse_prefix(a, iota_tokens(4)), InvalidArgument);  // not empty
  try {
    m.free_sequence(7);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'seq' = 7"), std::string::npos) << e.what();
  }
  KvCacheConfig cfg;
  cfg.budget_bytes = 10;
  EXPECT_THROW(KvCache{cfg}, InvalidArgument);
  cfg.budget_bytes = 1 << 20;
  cfg.head_dim = 72;
  EXPECT_THROW(KvCache{cfg}, InvalidArgument);
}

TEST(KvBlockManager, RefcountChecksTheBlock) {
  KvBlockManager m(2, 4);
  EXPECT_EQ(m.refcount(1), 0);
  const std::string msg = test::invalid_argument_message([&] { m.refcount(2); });
  EXPECT_NE(msg.find("'block' = 2: must be in [0, 2)"), std::string::npos) << msg;
  EXPECT_THROW(m.refcount(-1), InvalidArgument);
}

// 256 sequences of 1..4096 tokens, 16-token blocks: memory held <= 1.04x the
// bytes of the tokens (the waste is each sequence's last, partial block).
TEST(KvBlockManager, MemoryTarget) {
  KvCacheConfig cfg;  // SmolLM2-135M, f16
  cfg.n_layers = 30, cfg.n_kv_heads = 3, cfg.head_dim = 64, cfg.k_type = cfg.v_type = KvType::f16;
  const int64_t nblocks = 256 * 4096 / 16;
  KvBlockManager m(nblocks, cfg.block_tokens);
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<int> len(1, 4096);
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  int64_t tokens = 0;
  for (int i = 0; i < 256; ++i) {
    const int n = len(rng);
    tokens += n;
    ASSERT_EQ(m.append(m.add_sequence(), std::vector<int32_t>(size_t(n), 1), &slots, &copies), KvStatus::ok);
  }
  const KvStats st = m.stats();
  EXPECT_EQ(st.tokens_stored, tokens);
  const double held = double(st.blocks_used * kv_block_bytes(cfg));
  const double ratio = held / (double(tokens) * kv_bytes_per_token(cfg));
  EXPECT_LE(ratio, 1.04);
  EXPECT_GT(ratio, 1.0);
}

// The host cache stores quantized rows through the slot map and applies
// copy-on-write copies to every layer.
TEST(KvCache, WriteThroughSlotsAndCopyOnWrite) {
  KvCacheConfig cfg;
  cfg.n_layers = 2, cfg.n_kv_heads = 2, cfg.head_dim = 32, cfg.block_tokens = 4;
  cfg.k_type = KvType::int8, cfg.v_type = KvType::f16;
  cfg.budget_bytes = 8 * kv_block_bytes(cfg);
  KvCache c(cfg);
  const int64_t a = c.add_sequence();
  std::vector<int64_t> slots;
  ASSERT_EQ(c.append(a, iota_tokens(6), &slots), KvStatus::ok);
  std::vector<float> k(6 * 64), v(6 * 64);
  test::fill_normal(k.data(), k.size(), 1);
  test::fill_normal(v.data(), v.size(), 2);
  for (int l = 0; l < 2; ++l) c.write(l, slots, k.data(), v.data());
  const int64_t b = c.fork(a);
  std::vector<int64_t> bslots;
  ASSERT_EQ(c.append(b, iota_tokens(1), &bslots), KvStatus::ok);
  // b's copied block holds a's rows 4 and 5 in every layer
  for (int l = 0; l < 2; ++l) {
    const KvLayerView L = c.layer(l);
    for (int t = 4; t < 6; ++t)
      for (int h = 0; h < 2; ++h) {
        const int64_t blk = c.manager().blocks(b)[1];
        const int64_t row = (blk * 2 + h) * 4 + t % 4;
        std::vector<float> y(32), want(32);
        kv_dequantize_row(KvType::int8, static_cast<const uint8_t*>(L.k) + row * 34, 32, y.data());
        const int64_t arow = (slots[size_t(t)] / 4 * 2 + h) * 4 + t % 4;
        kv_dequantize_row(KvType::int8, static_cast<const uint8_t*>(L.k) + arow * 34, 32, want.data());
        EXPECT_EQ(y, want);
      }
  }
  EXPECT_THROW(c.write(2, slots, k.data(), v.data()), InvalidArgument);
  const int64_t bad[] = {8 * 4};
  EXPECT_THROW(c.write(0, bad, k.data(), v.data()), InvalidArgument);
}

// Shapes whose block size wraps int64 (to 0 here: a division by zero before),
// and budgets of 2^31 blocks or more, are errors that name the arguments.
TEST(KvCache, HugeShapesAndBudgetsAreNamed) {
  KvCacheConfig cfg;
  cfg.n_layers = int64_t(1) << 62, cfg.n_kv_heads = 4, cfg.budget_bytes = int64_t(1) << 62;
  std::string m = test::invalid_argument_message([&] { KvCache c(cfg); });
  EXPECT_NE(m.find("'n_layers x n_kv_heads x block_tokens' = 4611686018427387904 x 4 x 16"), std::string::npos) << m;
  cfg.n_layers = int64_t(1) << 40, cfg.n_kv_heads = int64_t(1) << 40;
  m = test::invalid_argument_message([&] { KvCache c(cfg); });
  EXPECT_NE(m.find("overflow"), std::string::npos) << m;
  cfg = KvCacheConfig{};
  cfg.budget_bytes = INT64_MAX;
  m = test::invalid_argument_message([&] { KvCache c(cfg); });
  EXPECT_NE(m.find("'budget_bytes' = 9223372036854775807: must hold fewer than 2^31 blocks"), std::string::npos) << m;
}

// A slot of a block no sequence holds (freed, or cached for prefix reuse) is
// not written: that would change the rows a later reuse_prefix() attaches.
TEST(KvCache, WriteRejectsSlotsOfBlocksNoSequenceHolds) {
  KvCacheConfig cfg;
  cfg.head_dim = 16, cfg.block_tokens = 4;
  cfg.budget_bytes = 8 * kv_block_bytes(cfg);
  KvCache c(cfg);
  const int64_t a = c.add_sequence();
  std::vector<int64_t> slots;
  ASSERT_EQ(c.append(a, iota_tokens(4), &slots), KvStatus::ok);
  std::vector<float> k(4 * 16, 1.0f);
  c.write(0, slots, k.data(), k.data());
  c.free_sequence(a);  // its full block stays cached
  const std::string m = test::invalid_argument_message([&] { c.write(0, slots, k.data(), k.data()); });
  EXPECT_NE(m.find("'slot' = " + std::to_string(slots[0]) + ": must be in a block a live sequence holds"),
            std::string::npos)
      << m;
  const int64_t never[] = {7 * 4};  // a block never handed out
  EXPECT_THROW(c.write(0, never, k.data(), k.data()), InvalidArgument);
}

// copy_block writes a block only the caller holds, from another block of the
// pool; a refused copy writes nothing.
TEST(KvCache, CopyBlockChecksItsBlocks) {
  KvCacheConfig cfg;
  cfg.head_dim = 16, cfg.block_tokens = 4;
  cfg.budget_bytes = 3 * kv_block_bytes(cfg);
  KvCache c(cfg);
  std::vector<int64_t> sa, sc;
  const int64_t a = c.add_sequence(), s = c.add_sequence();
  ASSERT_EQ(c.append(a, iota_tokens(4), &sa), KvStatus::ok);
  ASSERT_EQ(c.append(s, iota_tokens(4, 500), &sc), KvStatus::ok);
  const std::vector<float> ones(4 * 16, 1.0f), twos(4 * 16, 2.0f);
  c.write(0, sa, ones.data(), ones.data());
  c.write(0, sc, twos.data(), twos.data());
  const int32_t ba = c.manager().blocks(a)[0], bs = c.manager().blocks(s)[0];
  const int64_t b = c.fork(a);  // ba is shared now
  const auto first_k = [&](int32_t blk) { return static_cast<const float*>(c.layer(0).k)[blk * 4 * 16]; };
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  EXPECT_NE(msg([&] { c.copy_block(ba, 3); }).find("'dst' = 3: must be in [0, 3)"), std::string::npos);
  EXPECT_NE(msg([&] { c.copy_block(-1, bs); }).find("'src' = -1"), std::string::npos);
  EXPECT_NE(msg([&] { c.copy_block(bs, bs); }).find("must differ from src"), std::string::npos);
  EXPECT_NE(msg([&] { c.copy_block(bs, ba); }).find("'dst' = " + std::to_string(ba)), std::string::npos);  // shared
  EXPECT_EQ(first_k(ba), 1.0f);
  c.free_sequence(a);
  c.free_sequence(b);  // ba: held by no sequence, cached for prefix reuse
  EXPECT_THROW(c.copy_block(bs, ba), InvalidArgument);
  EXPECT_EQ(first_k(ba), 1.0f);
  // s holds bs alone, but bs is full and registered: reuse_prefix() would hand out ba's rows as bs's tokens'
  EXPECT_NE(msg([&] { c.copy_block(ba, bs); }).find("prefix reuse"), std::string::npos);
  EXPECT_EQ(first_k(bs), 2.0f);
  std::vector<int64_t> sp;
  const int64_t p = c.add_sequence();
  ASSERT_EQ(c.append(p, iota_tokens(2, 900), &sp), KvStatus::ok);  // a partial block: not registered
  const int32_t bp = c.manager().blocks(p)[0];
  ASSERT_FALSE(c.manager().cached(bp));
  ASSERT_NE(bp, ba);
  c.copy_block(ba, bp);
  EXPECT_EQ(first_k(bp), 1.0f);
}

// Random operations against a plain model (each live sequence's token list),
// with a fake storage that holds, per slot, the token id written there: after
// every step each sequence's page table must read back exactly its tokens (a
// copy-on-write that writes a shared block, a prefix attached from the wrong
// chain, an eviction of a block still in use or a truncate that keeps a stale
// block shows up as a wrong token), reference counts must equal the number of
// sequences holding a block, the stats must add up, and an out_of_blocks
// append must change nothing. Tokens come from a vocabulary of 3 and prompts
// from a few shared documents, so equal blocks under different parents and
// prefix hits are common; 24 blocks of 4 tokens run out often.
TEST(KvBlockManager, RandomOperationsAgainstAModel) {
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 g(seed);
    const int64_t nb = 24, bt = 4;
    KvBlockManager m(nb, bt);
    std::vector<int32_t> store(size_t(nb * bt), -1);  // token id written at each slot
    std::map<int64_t, std::vector<int32_t>> model;
    std::vector<std::vector<int32_t>> docs(3);
    for (auto& d : docs)
      for (int i = 0; i < 40; ++i) d.push_back(int32_t(g() % 3));
    const auto rand_tokens = [&](int n) {
      std::vector<int32_t> t(static_cast<size_t>(n));
      for (auto& x : t) x = int32_t(g() % 3);
      return t;
    };
    const auto pick = [&]() {
      auto it = model.begin();
      std::advance(it, g() % model.size());
      return it->first;
    };
    // Appends through the fake storage (copies first, then the new tokens).
    const auto append = [&](int64_t s, const std::vector<int32_t>& t) {
      std::vector<int64_t> slots;
      std::vector<KvBlockCopy> copies;
      const KvStatus st = m.append(s, t, &slots, &copies);
      if (st != KvStatus::ok) return st;
      for (const KvBlockCopy& c : copies)
        std::copy_n(store.begin() + int64_t(c.src) * bt, bt, store.begin() + int64_t(c.dst) * bt);
      EXPECT_EQ(slots.size(), t.size());
      for (size_t i = 0; i < t.size(); ++i) store[size_t(slots[i])] = t[i];
      model[s].insert(model[s].end(), t.begin(), t.end());
      return st;
    };
    for (int step = 0; step < 3000; ++step) {
      const int op = model.empty() ? 0 : int(g() % 10);
      const std::string at = "seed " + std::to_string(seed) + " step " + std::to_string(step) + " op " +
                             std::to_string(op);
      if (op <= 1) {  // a new sequence: a document's prefix (reused where cached) and its own tokens
        const int64_t s = m.add_sequence();
        model[s] = {};
        const auto& d = docs[g() % docs.size()];
        std::vector<int32_t> prompt(d.begin(), d.begin() + int64_t(g() % d.size()));
        const int64_t reused = m.reuse_prefix(s, prompt);
        ASSERT_EQ(reused % bt, 0) << at;
        ASSERT_LE(reused, int64_t(prompt.size())) << at;
        model[s].assign(prompt.begin(), prompt.begin() + reused);
        std::vector<int32_t> rest(prompt.begin() + reused, prompt.end());
        const auto more = rand_tokens(int(g() % 6));
        rest.insert(rest.end(), more.begin(), more.end());
        if (append(s, rest) != KvStatus::ok) {  // keep the sequence as reused; maybe free it
          if (g() % 2) {
            m.free_sequence(s);
            model.erase(s);
          }
        }
      } else if (op <= 4) {  // append to a live sequence; out_of_blocks must change nothing
        const int64_t s = pick();
        const auto before = m.stats();
        std::map<int64_t, std::vector<int32_t>> blocks_before;
        for (const auto& [q, _] : model) blocks_before[q].assign(m.blocks(q).begin(), m.blocks(q).end());
        if (append(s, rand_tokens(1 + int(g() % 9))) == KvStatus::out_of_blocks) {
          const auto after = m.stats();
          ASSERT_EQ(after.blocks_used, before.blocks_used) << at;
          ASSERT_EQ(after.blocks_cached, before.blocks_cached) << at;
          ASSERT_EQ(after.tokens_stored, before.tokens_stored) << at;
          for (const auto& [q, b] : blocks_before)
            ASSERT_TRUE(std::equal(b.begin(), b.end(), m.blocks(q).begin(), m.blocks(q).end())) << at;
        }
      } else if (op == 5) {
        const int64_t s = pick();
        const int64_t f = m.fork(s);
        model[f] = model[s];
      } else if (op == 6) {
        const int64_t s = pick();
        const int64_t len = int64_t(g() % (model[s].size() + 1));
        m.truncate(s, len);
        model[s].resize(size_t(len));
      } else {
        const int64_t s = pick();
        m.free_sequence(s);
        model.erase(s);
      }
      // Invariants over every live sequence.
      std::vector<int32_t> refs(size_t(nb), 0);
      std::vector<int64_t> seqs;
      for (const auto& [s, toks] : model) {
        seqs.push_back(s);
        ASSERT_EQ(m.length(s), int64_t(toks.size())) << at << " seq " << s;
        ASSERT_TRUE(std::equal(toks.begin(), toks.end(), m.tokens(s).begin(), m.tokens(s).end())) << at;
        const auto blocks = m.blocks(s);
        ASSERT_EQ(int64_t(blocks.size()), (int64_t(toks.size()) + bt - 1) / bt) << at << " seq " << s;
        for (size_t p = 0; p < toks.size(); ++p)
          ASSERT_EQ(store[size_t(int64_t(blocks[p / bt]) * bt + int64_t(p) % bt)], toks[p])
              << at << " seq " << s << " position " << p;
        for (int32_t b : blocks) ++refs[size_t(b)];
      }
      int64_t used = 0;
      for (int32_t b = 0; b < int32_t(nb); ++b) {
        ASSERT_EQ(m.refcount(b), refs[size_t(b)]) << at << " block " << b;
        used += refs[size_t(b)] > 0;
      }
      const KvStats st = m.stats();
      ASSERT_EQ(st.blocks_used, used) << at;
      ASSERT_EQ(st.blocks_used + st.blocks_free + st.blocks_cached, nb) << at;
      ASSERT_EQ(m.available_blocks(), st.blocks_free + st.blocks_cached) << at;
      const PageTable pt = m.page_table(seqs);
      for (size_t i = 0; i < seqs.size(); ++i) {
        const auto blocks = m.blocks(seqs[i]);
        ASSERT_EQ(pt.indptr[i + 1] - pt.indptr[i], int64_t(blocks.size())) << at;
        ASSERT_TRUE(std::equal(blocks.begin(), blocks.end(), pt.indices.begin() + pt.indptr[i])) << at;
        const int64_t len = m.length(seqs[i]);
        ASSERT_EQ(pt.last_len[i], len == 0 ? 0 : int32_t(len - (int64_t(blocks.size()) - 1) * bt)) << at;
      }
    }
  }
}
