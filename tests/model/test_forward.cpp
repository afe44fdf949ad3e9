// The decoder against its double oracle (forward_ref) on small random models of
// both families and every 32-value weight type (d_model 64 leaves no room for a
// 256-value K-quant block; tests/model/test_matmul.cpp covers those), and its internal consistency: a token's
// logits are the same bits whether its sequence is prefilled in one batch or
// fed token by token (cached vs uncached), and whether it shares the batch
// with other sequences of other lengths (batched vs one by one).
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "llmk/gguf.hpp"
#include "llmk/model.hpp"
#include "llmk/parallel.hpp"
#include "model/moe.hpp"
#include "tests/common/testutil.hpp"

namespace {
using namespace llmk;

ModelConfig tiny(Arch a) {
  ModelConfig c;
  c.arch = a;
  c.n_vocab = 301;
  c.n_ctx = 64;
  c.d_model = 64;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_head_kv = a == Arch::gpt2 ? 4 : 2;
  c.d_ff = 96;
  c.tied = a == Arch::gpt2;
  c.rope_base = 10000.0f;
  if (a == Arch::gemma3) {  // head_dim 32 (n_head * head_dim = 128 != d_model), layer 0 local, 1 global
    c.n_head_kv = 1;
    c.head_dim = 32;
    c.tied = true;
    c.rope_base = 1e6f;
    c.rope_base_local = 10000.0f;
    c.sliding_window = 64;
    c.swa_period = 2;
  }
  if (a == Arch::qwen3 || a == Arch::qwen3moe) c.head_dim = 32;  // n_head * head_dim = 128 != d_model, as Qwen3's
  if (a == Arch::qwen3moe) {                                     // 8 experts of width 64, 2 a token
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.d_ff_exp = 64;
  }
  if (a == Arch::phi3) {  // LongRoPE-like attention factor, partial rotation
    c.rope_attn_factor = 1.19f;
    c.rope_dim = 8;
  }
  if (a == Arch::llama) c.rope_freq_scale = 0.5f;  // linear RoPE scaling, factor 2
  return c;
}

// Mixtral-style: llama with 8 experts of width d_ff, 3 a token.
ModelConfig tiny_mixtral() {
  ModelConfig c = tiny(Arch::llama);
  c.n_expert = 8;
  c.n_expert_used = 3;
  return c;
}

// Every architecture's tiny config, and Mixtral's.
std::vector<ModelConfig> all_tiny() {
  std::vector<ModelConfig> v;
  for (Arch a : {Arch::llama, Arch::gpt2, Arch::gemma3, Arch::qwen2, Arch::qwen3, Arch::phi3, Arch::qwen3moe})
    v.push_back(tiny(a));
  v.push_back(tiny_mixtral());
  return v;
}

std::string name_of(const ModelConfig& c) {
  return std::string(arch_name(c.arch)) + (c.n_expert > 0 && c.arch == Arch::llama ? "-moe" : "");
}

std::vector<int32_t> tokens_of(int64_t n, uint32_t seed, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t((seed * 2654435761u + uint32_t(i) * 40503u) % uint32_t(vocab));
  return t;
}

// All logits of one sequence, prefilled in one forward.
std::vector<float> prefill(Model& m, std::span<const int32_t> toks) {
  DenseKv kv(m.config(), 1, 64);
  const int64_t T = int64_t(toks.size());
  std::vector<int64_t> pos(static_cast<size_t>(T));
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<int32_t> seq(size_t(T), 0);
  std::vector<float> logits(size_t(T * m.config().n_vocab));
  EXPECT_EQ(m.forward({toks, pos, seq, {}}, kv, logits.data()), T);
  return logits;
}

class ForwardTypes : public ::testing::TestWithParam<std::tuple<Arch, WType>> {};

// Tolerance. Float weights (f32/f16/bf16; the oracle sees the same stored
// values): only f32 rounding, each matmul/norm/softmax stage adding at most
// about K * eps_f32 relative to the magnitudes involved (K <= 96 here), about
// 12 stages per layer in 2 layers: 2 * 12 * 96 * 1.2e-7 ~ 3e-4 of the logit
// scale (max |logit|). Block weights: every matmul input is rounded to int8 per
// 32-block (relative RMS error about 1/(127 sqrt 3) ~ 0.5% per input; over ~8
// matmuls in sequence, independent errors grow to ~ sqrt(8) * 0.5% ~ 1.5%), so
// the logits are compared by relative L2 error under 3% (about 1% is seen);
// layout or formula errors give O(1).
void expect_matches_oracle(const std::vector<float>& got, const std::vector<double>& ref, WType wt,
                           const std::string& what) {
  ASSERT_EQ(got.size(), ref.size());
  double scale = 0, err2 = 0, ref2 = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  for (size_t i = 0; i < ref.size(); ++i) {
    err2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  if (wtype_is_quantized(wt)) {
    EXPECT_LT(std::sqrt(err2 / ref2), 0.03) << what;
  } else {
    EXPECT_TRUE(test::all_close(got.data(), ref.data(), ref.size(), 3e-4 * scale, 0.0, what));
  }
}

TEST_P(ForwardTypes, MatchesDoubleOracle) {
  const auto [arch, wt] = GetParam();
  Model m = Model::random(tiny(arch), wt, 42);
  const auto toks = tokens_of(11, 7, m.config().n_vocab);
  for (SimdLevel level : test::simd_levels()) {
    ScopedSimdLimit lim(level);
    expect_matches_oracle(prefill(m, toks), forward_ref(m, toks), wt, simd_name(level));
  }
}

INSTANTIATE_TEST_SUITE_P(All, ForwardTypes,
                         ::testing::Combine(::testing::Values(Arch::llama, Arch::gpt2, Arch::gemma3, Arch::qwen2,
                                                              Arch::qwen3, Arch::phi3),
                                            ::testing::Values(WType::f32, WType::f16, WType::bf16, WType::q8_0,
                                                              WType::q4_0, WType::q4_1, WType::q5_0, WType::q5_1)),
                         [](const auto& info) {
                           const Arch a = std::get<0>(info.param);
                           return std::string(arch_name(a)) + "_" + wtype_name(std::get<1>(info.param));
                         });

// Mixtures of experts against the oracle with float weights only: a token's experts are a
// discontinuous function of its router logits, and the int8 rounding of every matmul input
// (block weights, ~1% over a layer) moves a near-tied K-th and (K+1)-th logit across each
// other for some tokens, which changes that token's row by O(1). Block weights are held to
// the oracle through the FFN alone (Moe.FfnMatchesOracle: one input, so one routing).
INSTANTIATE_TEST_SUITE_P(Moe, ForwardTypes,
                         ::testing::Combine(::testing::Values(Arch::qwen3moe),
                                            ::testing::Values(WType::f32, WType::f16, WType::bf16)),
                         [](const auto& info) {
                           const Arch a = std::get<0>(info.param);
                           return std::string(arch_name(a)) + "_" + wtype_name(std::get<1>(info.param));
                         });

// gemma3's local layers see only the last sliding_window positions (llama.cpp:
// key k visible from position p iff p - k < window): past the window the
// model matches the oracle, which applies the same rule, and differs from the
// same weights without a window (so the window is in effect on both sides).
TEST(Forward, Gemma3SlidingWindowMatchesOracle) {
  ModelConfig c = tiny(Arch::gemma3);
  c.sliding_window = 5;
  Model m = Model::random(c, WType::f32, 5);
  ModelConfig wide = c;
  wide.sliding_window = 64;
  Model mw = Model::random(wide, WType::f32, 5);
  const auto toks = tokens_of(19, 3, c.n_vocab);
  const auto ref = forward_ref(m, toks), ref_wide = forward_ref(mw, toks);
  double scale = 0, diff = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  for (size_t i = 0; i < ref.size(); ++i) diff = std::max(diff, std::fabs(ref[i] - ref_wide[i]));
  EXPECT_GT(diff, 1e-2 * scale);  // the window changes the logits past it
  for (SimdLevel level : test::simd_levels()) {
    ScopedSimdLimit lim(level);
    const auto got = prefill(m, toks);
    EXPECT_TRUE(test::all_close(got.data(), ref.data(), ref.size(), 3e-4 * scale, 0.0, simd_name(level)));
  }
}

// Cached vs uncached: token-by-token decoding through the cache gives the same
// bits as recomputing the whole prefix in one batch.
TEST(Forward, CachedEqualsUncached) {
  for (const ModelConfig& c : all_tiny()) {
    if (c.arch == Arch::gemma3) continue;
    const Arch a = c.arch;
    Model m = Model::random(c, WType::q4_1, 3);
    const int64_t V = m.config().n_vocab;
    const auto toks = tokens_of(9, 11, V);
    const auto full = prefill(m, toks);
    DenseKv kv(m.config(), 1, 64);
    std::vector<float> lg(static_cast<size_t>(V));
    for (int64_t t = 0; t < int64_t(toks.size()); ++t) {
      const int32_t tok = toks[size_t(t)], seq = 0;
      m.forward({{&tok, 1}, {&t, 1}, {&seq, 1}, {}}, kv, lg.data());
      ASSERT_TRUE(std::equal(lg.begin(), lg.end(), full.begin() + t * V)) << name_of(c) << " position " << t;
      (void)a;
    }
  }
}

void batched_equals_one_by_one(const ModelConfig& c, WType wt) {
  SCOPED_TRACE(name_of(c) + " " + wtype_name(wt));
  Model m = Model::random(c, wt, 5);
  const int64_t V = m.config().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {tokens_of(9, 1, V), tokens_of(5, 2, V), tokens_of(7, 3, V)};
  DenseKv kv(m.config(), 3, 64);
  std::vector<int32_t> tok, seq;
  std::vector<int64_t> pos;
  std::vector<uint8_t> want;
  for (int64_t i = 0; i < 9; ++i)
    for (int32_t s = 0; s < 3; ++s) {
      if (i + 2 >= int64_t(prompts[size_t(s)].size())) continue;  // the last 2 tokens are decoded below
      tok.push_back(prompts[size_t(s)][size_t(i)]);
      pos.push_back(i);
      seq.push_back(s);
      want.push_back(i + 3 == int64_t(prompts[size_t(s)].size()));
    }
  std::vector<float> lg(size_t(3 * V));
  ASSERT_EQ(m.forward({tok, pos, seq, want}, kv, lg.data()), 3);
  std::vector<std::vector<float>> got(3);
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> t2, s2 = {0, 1, 2};
    std::vector<int64_t> p2;
    for (int32_t s = 0; s < 3; ++s) {
      const int64_t p = int64_t(prompts[size_t(s)].size()) - 2 + step;
      t2.push_back(prompts[size_t(s)][size_t(p)]);
      p2.push_back(p);
    }
    ASSERT_EQ(m.forward({t2, p2, s2, {}}, kv, lg.data()), 3);
    for (int s = 0; s < 3; ++s)
      got[size_t(s)].insert(got[size_t(s)].end(), lg.begin() + s * V, lg.begin() + (s + 1) * V);
  }
  for (int s = 0; s < 3; ++s) {
    const auto& p = prompts[size_t(s)];
    const auto alone = prefill(m, p);
    const int64_t n = int64_t(p.size());
    EXPECT_TRUE(std::equal(got[size_t(s)].begin(), got[size_t(s)].end(), alone.begin() + (n - 2) * V)) << "seq " << s;
  }
}

// Batched vs one by one: three sequences of lengths 7, 3, 5 prefilled in one
// batch (interleaved, only last-token logits wanted), then two decode steps
// together; each equals its sequence run alone.
TEST(Forward, BatchedEqualsOneByOne) {
  for (const ModelConfig& c : {tiny(Arch::llama), tiny(Arch::qwen3moe), tiny_mixtral()})
    for (WType wt : {WType::q8_0, WType::f32}) batched_equals_one_by_one(c, wt);
}

TEST(Forward, MixtralMatchesDoubleOracle) {
  for (WType wt : {WType::f32, WType::f16, WType::bf16}) {  // float weights: see Moe above
    Model m = Model::random(tiny_mixtral(), wt, 42);
    const auto toks = tokens_of(11, 7, m.config().n_vocab);
    for (SimdLevel level : test::simd_levels()) {
      ScopedSimdLimit lim(level);
      expect_matches_oracle(prefill(m, toks), forward_ref(m, toks), wt, simd_name(level));
    }
  }
}

TEST(Forward, BadBatchNamesTheArgument) {
  Model m = Model::random(tiny(Arch::gpt2), WType::f32, 1);
  DenseKv kv(m.config(), 1, 64);
  std::vector<float> lg(size_t(m.config().n_vocab));
  const int32_t bad_tok = 301, tok = 0, seq = 0;
  const int64_t pos = 0, far = 64;
  EXPECT_THROW(m.forward({{&bad_tok, 1}, {&pos, 1}, {&seq, 1}, {}}, kv, lg.data()), InvalidArgument);
  EXPECT_THROW(m.forward({{&tok, 1}, {&far, 1}, {&seq, 1}, {}}, kv, lg.data()), InvalidArgument);  // gpt2: pos < n_ctx
  EXPECT_THROW(m.forward({{&tok, 1}, {}, {&seq, 1}, {}}, kv, lg.data()), InvalidArgument);
  ModelConfig c = tiny(Arch::llama);
  c.n_head_kv = 3;
  EXPECT_THROW(Model::random(c, WType::f32, 1), InvalidArgument);
}

TEST(Forward, LayerIndexIsChecked) {
  const Model m = Model::random(tiny(Arch::llama), WType::f32, 1);
  EXPECT_EQ(m.layer(1).wq.rows, 64);
  const std::string msg = test::invalid_argument_message([&] { m.layer(2); });
  EXPECT_NE(msg.find("'i' = 2"), std::string::npos) << msg;
  EXPECT_THROW(m.layer(-1), InvalidArgument);
}

// A config that fails validate() (its head counts are divisors) and a size
// that wraps 64 bits are named by the constructor.
TEST(DenseKv, BadShapesAreNamed) {
  EXPECT_THROW(DenseKv(ModelConfig{}, 1, 1), InvalidArgument);
  const std::string msg = test::invalid_argument_message([] { DenseKv(tiny(Arch::llama), 1, (int64_t(1) << 57) + 1); });
  EXPECT_NE(msg.find("'n_layer x max_seqs x max_pos x d_kv' = 2 x 1 x 144115188075855873 x 32: the cache's bytes"),
            std::string::npos)
      << msg;
}

// store() and attend() check every token's layer, sequence and position
// before touching the cache: a refused store writes nothing.
TEST(DenseKv, StoreAndAttendCheckTheWholeBatch) {
  const ModelConfig c = tiny(Arch::llama);  // d_kv 32, 4 heads of 16
  DenseKv kv(c, 2, 4);
  const int64_t dkv = c.d_kv(), dq = c.n_head * c.d_head();
  const int32_t tok[2] = {0, 0}, seq0[2] = {0, 0};
  const int64_t pos0[2] = {0, 0};
  const std::vector<float> ones(size_t(2 * dkv), 1.0f), fives(size_t(2 * dkv), 5.0f), q(size_t(2 * dq), 0.5f);
  kv.store(0, {{tok, 1}, {pos0, 1}, {seq0, 1}, {}}, ones.data(), ones.data());
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  const int64_t pos_bad[2] = {0, 4}, pos_neg[2] = {0, -1};
  const int32_t seq_bad[2] = {0, 2}, seq_neg[2] = {0, -1};
  EXPECT_NE(msg([&] {
              kv.store(0, {tok, pos_bad, seq0, {}}, fives.data(), fives.data());
            }).find("'batch.pos[1]' = 4: must be in [0, max_pos = 4)"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.store(0, {tok, pos_neg, seq0, {}}, fives.data(), fives.data());
            }).find("'batch.pos[1]' = -1"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.store(0, {tok, pos0, seq_bad, {}}, fives.data(), fives.data());
            }).find("'batch.seq[1]' = 2"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.store(0, {tok, pos0, seq_neg, {}}, fives.data(), fives.data());
            }).find("'batch.seq[1]' = -1"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.store(2, {tok, pos0, seq0, {}}, fives.data(), fives.data());
            }).find("'layer' = 2"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.store(0, {tok, {pos0, 1}, seq0, {}}, fives.data(), fives.data());
            }).find("batch.pos.size"),
            std::string::npos);
  EXPECT_THROW(kv.store(0, {tok, pos0, seq0, {}}, nullptr, fives.data()), InvalidArgument);
  // token 0 (seq 0, pos 0) of every refused store above was not written: its V still reads 1
  std::vector<float> out(size_t(dq), -1.0f);
  kv.attend(0, {{tok, 1}, {pos0, 1}, {seq0, 1}, {}}, q.data(), out.data(), 0);
  EXPECT_EQ(out, std::vector<float>(size_t(dq), 1.0f));
  EXPECT_NE(msg([&] {
              kv.attend(0, {tok, pos_bad, seq0, {}}, q.data(), out.data(), 0);
            }).find("'batch.pos[1]' = 4"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.attend(0, {tok, pos_neg, seq0, {}}, q.data(), out.data(), 0);
            }).find("'batch.pos[1]' = -1"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.attend(0, {tok, pos0, seq_bad, {}}, q.data(), out.data(), 0);
            }).find("'batch.seq[1]' = 2"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              kv.attend(-1, {tok, pos0, seq0, {}}, q.data(), out.data(), 0);
            }).find("'layer' = -1"),
            std::string::npos);
  EXPECT_THROW(kv.attend(0, {tok, pos0, seq0, {}}, q.data(), nullptr, 0), InvalidArgument);
}

}  // namespace

namespace {
using namespace llmk;
// A random model written to GGUF and read back computes the same bits; the
// loader rejects a wrong shape by naming the tensor.
TEST(ModelGguf, RoundTripComputesTheSameLogits) {
  for (const ModelConfig& c : all_tiny())
    for (WType t : {WType::q4_1, WType::f16}) {
      const Arch a = c.arch;
      Model m = Model::random(c, t, 9);
      gguf::Writer w;
      m.add_to_gguf(w);
      const auto bytes = w.bytes();
      const gguf::File f = gguf::File::parse(bytes, "tiny.gguf");
      Model back = Model::from_gguf(f);
      EXPECT_EQ(back.config().tied, m.config().tied);
      EXPECT_EQ(back.weight_bytes(), m.weight_bytes());
      const auto toks = tokens_of(6, 4, m.config().n_vocab);
      EXPECT_EQ(back.config().head_dim, m.config().head_dim);
      EXPECT_EQ(back.config().rope_dim, m.config().rope_dim);
      EXPECT_EQ(back.config().n_expert, m.config().n_expert);
      EXPECT_EQ(back.config().d_ff_expert(), m.config().d_ff_expert());
      EXPECT_EQ(prefill(back, toks), prefill(m, toks)) << arch_name(a) << " " << wtype_name(t);
    }
}

TEST(ModelGguf, WrongShapeNamesTheTensor) {
  Model m = Model::random(tiny(Arch::llama), WType::f32, 9);
  gguf::Writer w;
  m.add_to_gguf(w);
  w.set("llama.feed_forward_length", gguf::Value::of(uint32_t(128)));
  const auto bytes = w.bytes();
  const gguf::File f = gguf::File::parse(bytes, "bad.gguf");
  try {
    Model::from_gguf(f);
    FAIL() << "no error";
  } catch (const gguf::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_gate.weight' has shape [64, 96], expected [64, 128]"),
              std::string::npos)
        << e.what();
  }
}

// The file's architecture must be one llmk knows; the error lists them.
TEST(ModelGguf, UnknownArchitectureListsTheKnownOnes) {
  Model m = Model::random(tiny(Arch::llama), WType::f32, 9);
  gguf::Writer w;
  m.add_to_gguf(w);
  w.set("general.architecture", gguf::Value::string("mamba"));
  const auto bytes = w.bytes();
  const gguf::File f = gguf::File::parse(bytes, "mamba.gguf");
  try {
    Model::from_gguf(f);
    FAIL() << "no error";
  } catch (const gguf::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'mamba' (supported: llama, gpt2, gemma3, qwen2, qwen3, phi3, qwen3moe)"),
              std::string::npos)
        << e.what();
  }
}

// Every required key of each architecture's table, left out, is named by the error.
TEST(ModelGguf, MissingRequiredKeyIsNamed) {
  for (Arch a : {Arch::llama, Arch::gpt2, Arch::gemma3, Arch::qwen2, Arch::qwen3, Arch::phi3, Arch::qwen3moe}) {
    Model m = Model::random(tiny(a), WType::f32, 9);
    gguf::Writer full;
    m.add_to_gguf(full);
    const auto ok = full.bytes();
    const gguf::File g = gguf::File::parse(ok, "ok.gguf");
    const std::string p = std::string(arch_name(a)) + ".";
    for (const char* key : {"context_length", "embedding_length", "block_count", "feed_forward_length",
                            "attention.head_count", "expert_count", "expert_used_count"}) {
      if (a != Arch::qwen3moe && std::string(key).starts_with("expert")) continue;
      gguf::Writer w;
      for (const auto& [k, v] : g.metadata())
        if (k != p + key) w.set(k, v);
      for (const gguf::TensorInfo& t : g.tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                     {static_cast<const uint8_t*>(t.data), size_t(t.n_bytes)});
      const auto bytes = w.bytes();
      const gguf::File f = gguf::File::parse(bytes, "nokey.gguf");
      try {
        Model::from_gguf(f);
        ADD_FAILURE() << arch_name(a) << ": no error without " << key;
      } catch (const gguf::FormatError& e) {
        EXPECT_NE(std::string(e.what()).find(p + key), std::string::npos) << e.what();
      }
    }
  }
}

// A Mistral-style window and LongRoPE's short context are limits forward() does not apply:
// a position at or past one is refused, naming it.
TEST(Forward, PositionsPastUnappliedLimitsAreRefused) {
  for (const bool window : {true, false}) {
    ModelConfig c = tiny(window ? Arch::llama : Arch::phi3);
    (window ? c.sliding_window : c.rope_short_ctx) = 8;
    Model m = Model::random(c, WType::f32, 5);
    DenseKv kv(m.config(), 1, 64);
    const std::vector<int32_t> toks = {1, 2};
    const std::vector<int64_t> pos = {7, 8};
    const std::vector<int32_t> seq = {0, 0};
    std::vector<float> logits(size_t(2 * c.n_vocab));
    const std::string msg = test::invalid_argument_message([&] { m.forward({toks, pos, seq, {}}, kv, logits.data()); });
    EXPECT_NE(msg.find("'batch.pos[1]' = 8"), std::string::npos) << msg;
    EXPECT_NE(msg.find(window ? "sliding window (8)" : "original_context_length (8)"), std::string::npos) << msg;
  }
}
}  // namespace

namespace {
using namespace llmk;

// Routing: the K largest logits, ties to the lower index, weights the softmax over the
// selected logits; a row's experts and weights are the same bits alone and among many rows
// (softmax_topk takes other paths for other batch sizes).
TEST(Moe, RouteTiesAndBatchInvariance) {
  moe::Scratch s;
  const float tie[8] = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f, 0.0f, 1.0f, -3.0f};
  int32_t idx[3];
  float w[3];
  moe::route(tie, 1, 8, 3, idx, w, s);
  EXPECT_EQ(std::vector<int32_t>(idx, idx + 3), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_FLOAT_EQ(w[0], 1.0f / 3.0f);
  const float two[4] = {1.0f, 0.0f, 3.0f, -2.0f};
  moe::route(two, 1, 4, 2, idx, w, s);
  EXPECT_EQ(idx[0], 2);
  EXPECT_EQ(idx[1], 0);
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);  // softmax over {3, 1}, not over all four
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-7);
  for (const int64_t E : {8, 60, 128})
    for (const int64_t K : {1, 2, 8}) {
      const int64_t T = 37;
      std::vector<float> l(size_t(T * E));
      for (size_t i = 0; i < l.size(); ++i) l[i] = float(int64_t(i * 2654435761u % 1000u) - 500) / 64.0f;
      std::vector<int32_t> all(size_t(T * K)), one(static_cast<size_t>(K));
      std::vector<float> wall(size_t(T * K)), wone(static_cast<size_t>(K));
      moe::route(l.data(), T, E, K, all.data(), wall.data(), s);
      for (int64_t t = 0; t < T; ++t) {
        moe::route(l.data() + t * E, 1, E, K, one.data(), wone.data(), s);
        ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + t * K)) << E << " " << K << " row " << t;
        ASSERT_TRUE(std::equal(wone.begin(), wone.end(), wall.begin() + t * K)) << E << " " << K << " row " << t;
      }
    }
}

// The FFN of one layer on the same inputs as the oracle's moe_ffn_ref, every weight type and
// SIMD level, T = 1 (decode: each token's K experts) and 37 (grouped by expert). The router
// is f32 on exact inputs (its logits within f32 rounding of the oracle's, so the same experts
// unless two logits agree to ~1e-6). Bound: the matmul's for block weights (relative L2 under
// 3%, the int8 rounding of x and of the expert's SwiGLU output), f32 rounding otherwise.
TEST(Moe, FfnMatchesOracle) {
  ModelConfig wide = tiny(Arch::qwen3moe);  // 256-value rows for the K-quants
  wide.d_model = 256;
  wide.d_ff_exp = 256;
  wide.head_dim = 64;
  for (const ModelConfig& c : {tiny(Arch::qwen3moe), tiny_mixtral(), wide})
    for (WType wt : {WType::f32, WType::f16, WType::q8_0, WType::q4_0, WType::q4_1, WType::q5_0, WType::q5_1,
                     WType::q4_k, WType::q6_k}) {
      if ((wt == WType::q4_k || wt == WType::q6_k) != (c.d_model == 256)) continue;
      const Model m = Model::random(c, wt, 8);
      const LayerWeights& L = m.layer(1);
      const int64_t d = c.d_model;
      for (const int64_t T : {1, 37}) {
        std::vector<float> h(size_t(T * d));
        for (size_t i = 0; i < h.size(); ++i) h[i] = float(int64_t(i * 2654435761u % 2001u) - 1000) / 500.0f;
        std::vector<double> ref;
        for (int64_t t = 0; t < T; ++t) {
          const std::vector<double> ht(h.begin() + t * d, h.begin() + (t + 1) * d);
          const auto r = moe::ffn_ref(c, L, ht);
          ref.insert(ref.end(), r.begin(), r.end());
        }
        for (SimdLevel level : test::simd_levels()) {
          ScopedSimdLimit lim(level);
          moe::Scratch s;
          std::vector<float> got(size_t(T * d) + 1, 0.0f);
          got.back() = 12345.0f;  // sentinel
          moe::ffn(c, L, h.data(), got.data(), T, s);
          EXPECT_EQ(got.back(), 12345.0f);
          got.pop_back();
          expect_matches_oracle(got, ref, wt,
                                name_of(c) + " " + wtype_name(wt) + " T=" + std::to_string(T) + " " + simd_name(level));
        }
      }
    }
}

// Only the selected experts are read: with one expert's layer-1 weights NaN, a token's
// logits are NaN exactly when the oracle routes it there (an expert multiplied by a zero
// weight, or read for another token, would spread the NaN).
TEST(Moe, ReadsOnlyTheSelectedExperts) {
  for (const ModelConfig& c : {tiny(Arch::qwen3moe), tiny_mixtral()}) {
    const auto toks = tokens_of(12, 5, c.n_vocab);
    int hit = 0;
    for (int64_t e = 0; e < c.n_expert; ++e) {
      Model m = Model::random(c, WType::f32, 21);
      const LayerWeights& L = m.layer(1);
      const int64_t F = c.d_ff_expert();
      // the test owns the random model's buffers: poison expert e's gate rows in place
      float* g = const_cast<float*>(static_cast<const float*>(L.gate_exps.data)) + e * F * c.d_model;
      std::fill_n(g, F * c.d_model, std::nanf(""));
      const auto got = prefill(m, toks);
      const auto ref = forward_ref(m, toks);
      for (size_t t = 0; t < toks.size(); ++t) {
        const bool nan_ref = std::isnan(ref[t * size_t(c.n_vocab)]), nan_got = std::isnan(got[t * size_t(c.n_vocab)]);
        EXPECT_EQ(nan_got, nan_ref) << name_of(c) << " expert " << e << " token " << t;
        hit += nan_ref;
      }
    }
    EXPECT_EQ(hit, int(toks.size()) * int(c.n_expert_used)) << name_of(c);  // each token meets K experts
  }
}

// A Mixtral-style model writes and reads expert_count; bad expert counts are named.
TEST(Moe, BadExpertConfigIsNamed) {
  ModelConfig c = tiny(Arch::qwen3moe);
  c.n_expert_used = 9;
  EXPECT_NE(test::invalid_argument_message([&] { c.validate(); }).find("'n_expert_used' = 9"), std::string::npos);
  c = tiny(Arch::qwen3moe);
  c.n_expert = 0;
  c.n_expert_used = 0;
  EXPECT_NE(test::invalid_argument_message([&] { c.validate(); }).find("'n_expert' = 0"), std::string::npos);
  c = tiny(Arch::qwen2);
  c.n_expert = 4;
  c.n_expert_used = 1;
  EXPECT_NE(test::invalid_argument_message([&] { c.validate(); }).find("'n_expert' = 4"), std::string::npos);
  c = tiny(Arch::qwen3moe);
  c.d_ff_exp = 40;
  EXPECT_NE(test::invalid_argument_message([&] { c.validate(); }).find("'d_ff_exp' = 40"), std::string::npos);
}

// Bytes a token reads: every dense matrix, the router, K of E experts.
TEST(Moe, TokenWeightBytesCountsTheUsedExperts) {
  const ModelConfig c = tiny(Arch::qwen3moe);
  const Model m = Model::random(c, WType::q8_0, 1);
  const int64_t F = c.d_ff_expert(), d = c.d_model, L = c.n_layer;
  const int64_t experts = L * 3 * c.n_expert * F *
                          wtype_row_bytes(WType::q8_0, d);  // gate, up: F rows of d; down: d of F
  EXPECT_EQ(m.weight_bytes() - m.token_weight_bytes(), experts / c.n_expert * (c.n_expert - c.n_expert_used));
}
}  // namespace
