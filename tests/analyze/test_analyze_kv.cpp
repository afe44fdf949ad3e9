// analyze's sizes against the library's own: KV bytes per token against what a
// KvCache allocates (its pools' extents, measured from the layer views), for
// every pair of storage types and head_dims whose quantized rows end in a
// partial group or hold an odd number of groups; the storage types' names and
// sizes against their traits tables; and shape_of against a loaded config.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "llmk/analyze.hpp"
#include "llmk/error.hpp"
#include "llmk/kv_cache.hpp"
#include "llmk/model.hpp"

namespace llmk::analyze {
namespace {

// A llama config of the given KV shape (the other sizes only have to be valid).
llmk::ModelConfig llama(int64_t n_layer, int64_t n_head_kv, int64_t head_dim) {
  llmk::ModelConfig c;
  c.arch = Arch::llama;
  c.n_layer = n_layer, c.n_head = 2 * n_head_kv, c.n_head_kv = n_head_kv, c.head_dim = head_dim;
  c.d_model = 64, c.d_ff = 128, c.n_vocab = 100, c.n_ctx = 4096;
  return c;
}

// K and V bytes the cache holds per token, measured from the layer views: layer 0's K
// pool runs from layer(0).k to layer(0).v and its V pool from there to layer(1).k (64
// blocks of 16 tokens make whole multiples of 64 bytes, so no alignment padding sits
// between), and every layer holds the same.
struct PerToken {
  int64_t k, v;
};
PerToken allocated_per_token(const KvCache& c) {
  const auto at = [&](int64_t l, bool v) { return static_cast<const char*>(v ? c.layer(l).v : c.layer(l).k); };
  const int64_t k = at(0, true) - at(0, false), v = at(1, false) - at(0, true);
  const int64_t L = c.config().n_layers, tokens = c.manager().num_blocks() * c.config().block_tokens;
  EXPECT_EQ(k % tokens, 0);
  EXPECT_EQ(v % tokens, 0);
  return {L * k / tokens, L * v / tokens};
}

TEST(AnalyzeKvCache, BytesPerTokenAreWhatTheCacheAllocates) {
  // 80 = 2.5 groups of 32 (int4: 3 groups), 208 = 6.5 (7 groups), 16 = half a group.
  for (int64_t D : {16, 64, 80, 128, 208, 256})
    for (KvType k : all_kv_types())
      for (KvType v : all_kv_types()) {
        const llmk::ModelConfig mc = llama(3, 2, D);
        const ModelConfig m = shape_of(mc, "toy", 1000);
        KvCacheConfig cc;
        cc.n_layers = mc.n_layer, cc.n_kv_heads = mc.n_head_kv, cc.head_dim = mc.d_head();
        cc.block_tokens = 16, cc.k_type = k, cc.v_type = v;
        cc.budget_bytes = 64 * kv_block_bytes(cc);
        const KvCache cache(cc);
        ASSERT_EQ(cache.manager().num_blocks(), 64);
        const std::string what = std::string(kv_type_name(k)) + "/" + kv_type_name(v) + " D=" + std::to_string(D);
        const PerToken a = allocated_per_token(cache);
        EXPECT_EQ(kv_bytes_per_token(m, k, k), 2 * a.k) << what;
        EXPECT_EQ(kv_bytes_per_token(m, v, v), 2 * a.v) << what;
        EXPECT_EQ(kv_bytes_per_token(m, k, v), a.k + a.v) << what;
        EXPECT_EQ(double(kv_bytes_per_token(m, k, v)), kv_bytes_per_token(cc)) << what;
      }
}

// The names and sizes analyze prints are the tables' rows.
TEST(AnalyzeKvCache, TypesAreTheTablesRows) {
  ASSERT_EQ(all_kv_types().size(), size_t(kKvTypeCount));
  for (KvType t : all_kv_types()) {
    const KvTypeTraits& r = kv_type_traits(t);
    EXPECT_EQ(parse_kv_type(r.name), t);
    EXPECT_EQ(parse_kv_type(r.cli_name), t);
    EXPECT_EQ(kv_type_size(t).num, r.group_bytes);
    EXPECT_EQ(kv_type_size(t).den, r.group_values);
  }
  for (WeightType t : weight_types()) {
    EXPECT_EQ(parse_weight_type(weight_type_name(t)), t);
    EXPECT_EQ(weight_type_size(t).num, wtype_traits(t).block_bytes);
  }
  // The types docs/capacity.md sizes, and no K-quant (a K-quant file mixes types).
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "Q4_1"}) EXPECT_NO_THROW(parse_weight_type(name));
  EXPECT_THROW(parse_weight_type("q4_k"), InvalidArgument);
  EXPECT_EQ(parse_kv_type("Q8"), KvType::int8);
}

// analyze's built-in SmolLM2-135M shape is what shape_of makes of the model's own config.
TEST(AnalyzeKvCache, ShapeOfAConfig) {
  llmk::ModelConfig c = llama(30, 3, 0);
  c.d_model = 576, c.n_head = 9, c.d_ff = 1536, c.n_vocab = 49152, c.n_ctx = 8192, c.tied = true;
  const ModelConfig s = shape_of(c, "smollm2-135m", 134515008), b = find_model("smollm2-135m");
  EXPECT_EQ(s.head_dim, 64);  // d_model / n_head
  EXPECT_EQ(s.n_layers, b.n_layers);
  EXPECT_EQ(s.hidden, b.hidden);
  EXPECT_EQ(s.n_heads, b.n_heads);
  EXPECT_EQ(s.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(s.ffn, b.ffn);
  EXPECT_EQ(s.vocab, b.vocab);
  EXPECT_EQ(s.params, b.params);
  EXPECT_EQ(s.max_context, b.max_context);
  EXPECT_EQ(s.tied_embeddings, b.tied_embeddings);
  EXPECT_TRUE(s.gated_ffn);
  c.arch = Arch::gpt2;
  EXPECT_FALSE(shape_of(c, "g", 1).gated_ffn);
}

}  // namespace
}  // namespace llmk::analyze
