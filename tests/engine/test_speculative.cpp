// Speculative decoding (llmk/speculative.hpp): the n-gram drafter on its own, the
// block manager's rollback, and the engine's output with speculation against the
// same requests without it, compared bit for bit (tokens, logprobs, top logprobs)
// for greedy and seeded sampling, every KV type, mixed batches and preemption.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "llmk/engine.hpp"
#include "llmk/speculative.hpp"
#include "tests/common/testutil.hpp"
#include "tests/engine/engine_fixture.hpp"

// `stmt` throws E whose message names `field`.
#define EXPECT_THROW_MSG(stmt, E, field)                                                           \
  do {                                                                                             \
    try {                                                                                          \
      stmt;                                                                                        \
      ADD_FAILURE() << #stmt " did not throw";                                                     \
    } catch (const E& ex) {                                                                        \
      EXPECT_NE(std::string(ex.what()).find(field), std::string::npos) << #stmt ": " << ex.what(); \
    }                                                                                              \
  } while (0)

namespace {
using namespace llmk;

SpecConfig ngram(int32_t k_max = 8) {
  SpecConfig c;
  c.mode = SpecMode::ngram;
  c.k_max = k_max;
  return c;
}

std::vector<int32_t> drafted(NgramDrafter& d, std::vector<int32_t> toks, int64_t limit) {
  d.push(toks);
  return d.draft(limit);
}

TEST(NgramDrafter, LongestMatchFirstThenMostRecent) {
  // The 4-gram 1 2 3 4 occurred once (then 7 8); the 2-gram 3 4 later (then 6): the longer wins.
  NgramDrafter d(ngram(3));
  EXPECT_EQ(drafted(d, {1, 2, 3, 4, 7, 8, 5, 3, 4, 6, 1, 2, 3, 4}, 8), (std::vector<int32_t>{7, 8, 5}));
  // Only 2-grams match: the most recent occurrence of 9 4 (then 11) over the first (then 10).
  NgramDrafter e(ngram(2));
  EXPECT_EQ(drafted(e, {9, 4, 10, 0, 9, 4, 11, 0, 5, 9, 4}, 8), (std::vector<int32_t>{11, 0}));
  // limit caps the draft.
  NgramDrafter f(ngram(8));
  EXPECT_EQ(drafted(f, {1, 2, 3, 4, 7, 8, 5, 1, 2, 3, 4}, 2), (std::vector<int32_t>{7, 8}));
}

TEST(NgramDrafter, NoMatchBelowNgramMinDraftsNothing) {
  NgramDrafter d(ngram());
  EXPECT_TRUE(drafted(d, {1, 2, 3, 5, 3}, 8).empty());  // only the 1-gram 3 recurs; ngram_min = 2
  EXPECT_TRUE(d.draft(0).empty());
  SpecConfig one = ngram(2);
  one.ngram_min = 1;
  NgramDrafter u(one);
  EXPECT_EQ(drafted(u, {1, 2, 3, 5, 3}, 8), (std::vector<int32_t>{5, 3}));  // 5, then the copy's own next token
}

TEST(NgramDrafter, RepeatingRunDraftsItsNextPeriods) {
  NgramDrafter d(ngram(7));
  EXPECT_EQ(drafted(d, {8, 5, 6, 7, 5, 6, 7, 5}, 8), (std::vector<int32_t>{6, 7, 5, 6, 7, 5, 6}));
  d.push(6);  // the index grows with each pushed token
  EXPECT_EQ(d.draft(4), (std::vector<int32_t>{7, 5, 6, 7}));
}

TEST(NgramDrafter, KAdaptsAndLowAcceptancePauses) {
  SpecConfig c = ngram(8);
  c.window = 8;
  c.pause = 3;
  c.min_accept = 0.5f;
  NgramDrafter d(c);
  d.push(std::vector<int32_t>{1, 2, 1, 2, 1, 2});
  EXPECT_EQ(d.k(), 8);
  d.feedback(8, 5);  // rejected at the sixth: k = accepted + 1
  EXPECT_EQ(d.k(), 6);
  d.feedback(6, 6);  // all kept: k doubles, up to k_max
  EXPECT_EQ(d.k(), 8);
  d.feedback(2, 1);  // the last 8 drafted tokens: 7 kept
  EXPECT_EQ(d.k(), 2);
  EXPECT_FALSE(d.paused());
  d.feedback(8, 0);  // the last 8: none kept, below 0.5: pause for 3 steps, then k_max again
  EXPECT_TRUE(d.paused());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(d.draft(8).empty()) << "paused step " << i;
  EXPECT_FALSE(d.paused());
  EXPECT_EQ(d.draft(8).size(), 8u);
  d.feedback(8, 1);  // the second pause is twice as long
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(d.draft(8).empty()) << "second pause, step " << i;
  EXPECT_FALSE(d.draft(8).empty());
}

TEST(NgramDrafter, BadConfigNamesTheField) {
  auto bad = [](const char* field, void (*f)(SpecConfig&)) {
    SpecConfig c = ngram();
    f(c);
    EXPECT_THROW_MSG(NgramDrafter{c}, InvalidArgument, field);
  };
  bad("spec.k_max", [](SpecConfig& c) { c.k_max = 0; });
  bad("spec.k_max", [](SpecConfig& c) { c.k_max = 65; });
  bad("spec.ngram_min", [](SpecConfig& c) { c.ngram_min = 0; });
  bad("spec.ngram_max", [](SpecConfig& c) { c.ngram_max = 1; });
  bad("spec.min_accept", [](SpecConfig& c) { c.min_accept = 1.5f; });
  bad("spec.window", [](SpecConfig& c) { c.window = 0; });
  bad("spec.pause", [](SpecConfig& c) { c.pause = 0; });
  EXPECT_EQ(parse_spec_mode("ngram"), SpecMode::ngram);
  EXPECT_EQ(parse_spec_mode("off"), SpecMode::off);
  EXPECT_THROW_MSG(parse_spec_mode("draft", "--spec"), InvalidArgument, "--spec");
}

// Rejected drafts leave the prefix cache: a block they filled is not offered to another sequence.
TEST(KvBlockManager, RollbackUncachesBlocksHoldingCutTokens) {
  KvBlockManager m(8, 4);
  const std::vector<int32_t> real{1, 2, 3, 4, 5}, draft{6, 7, 8, 9, 10, 11, 12};
  const int64_t s = m.add_sequence();
  std::vector<int64_t> slots;
  std::vector<KvBlockCopy> copies;
  ASSERT_EQ(m.append(s, real, &slots, &copies), KvStatus::ok);
  ASSERT_EQ(m.append(s, draft, &slots, &copies), KvStatus::ok);  // fills blocks 1 (5..8) and 2 (9..12)
  const std::vector<int32_t> b(m.blocks(s).begin(), m.blocks(s).end());
  ASSERT_EQ(b.size(), 3u);
  EXPECT_TRUE(m.cached(b[1]) && m.cached(b[2]));
  m.rollback(s, 6);  // 5 and the draft's 6 kept
  EXPECT_FALSE(m.cached(b[1]));
  EXPECT_FALSE(m.cached(b[2]));
  EXPECT_EQ(m.length(s), 6);
  std::vector<int32_t> all = real;
  all.insert(all.end(), draft.begin(), draft.end());
  const int64_t t = m.add_sequence();
  EXPECT_EQ(m.reuse_prefix(t, all), 4);  // block 0 only
  // truncate(), for comparison, keeps a whole cut block cached (its tokens were real).
  const int64_t u = m.add_sequence();
  ASSERT_EQ(m.append(u, all, &slots, &copies), KvStatus::ok);
  const int32_t last = m.blocks(u)[2];
  m.truncate(u, 8);
  EXPECT_TRUE(m.cached(last));
  EXPECT_THROW_MSG(m.rollback(u, 9), InvalidArgument, "length");
}

ModelConfig tiny() { return test::tiny_engine_model(512); }

// A prompt that repeats, so the n-gram drafter finds matches, then a unique tail.
std::vector<int32_t> grounded_prompt(int64_t n, uint32_t seed) {
  std::vector<int32_t> base = test::engine_tokens(n, seed), p = base;
  p.insert(p.end(), base.begin(), base.end());
  p.insert(p.end(), base.begin(), base.begin() + n / 2);
  return p;
}

std::vector<Request> requests(float temp, int32_t logprobs) {
  std::vector<Request> rs;
  const int64_t lens[] = {6, 11, 3, 17, 9};
  for (int i = 0; i < 5; ++i) {
    Request r;
    r.prompt = grounded_prompt(lens[i], uint32_t(i + 1));
    r.max_tokens = 24 + 5 * i;
    r.sampling.temperature = temp;
    r.sampling.top_k = temp > 0 ? 8 : 0;
    r.seed = uint64_t(200 + i);
    r.logprobs = logprobs;
    rs.push_back(r);
  }
  return rs;
}

struct Runs {
  std::vector<Output> outs;
  EngineStats stats;
};

Runs run(Model& m, EngineConfig c, const std::vector<Request>& rs) {
  Engine e(m, nullptr, c);
  for (const Request& r : rs) e.submit(r);
  Runs out{e.run(), {}};
  out.stats = e.stats();
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Tokens, finish, logprobs and the top alternatives, bit for bit.
void expect_identical(const std::vector<Output>& a, const std::vector<Output>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << what << ", request " << i;
    EXPECT_EQ(a[i].finish, b[i].finish) << what << ", request " << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size()) << what << ", request " << i;
    for (size_t j = 0; j < a[i].logprobs.size(); ++j) {
      EXPECT_TRUE(same_bits(a[i].logprobs[j], b[i].logprobs[j]))
          << what << ", request " << i << " token " << j << ": " << a[i].logprobs[j] << " vs " << b[i].logprobs[j];
      ASSERT_EQ(a[i].top[j].size(), b[i].top[j].size());
      for (size_t k = 0; k < a[i].top[j].size(); ++k) {
        EXPECT_EQ(a[i].top[j][k].token, b[i].top[j][k].token) << what << ", request " << i << " token " << j;
        EXPECT_TRUE(same_bits(a[i].top[j][k].logprob, b[i].top[j][k].logprob))
            << what << ", request " << i << " token " << j;
      }
    }
  }
}

// Every KV type, greedy and seeded sampling: the same bits with and without speculation, and
// the drafts were both kept and rejected (so both the accept path and the rollback ran).
TEST(Speculative, SameBitsAsPlainDecodingForEveryKvTypeGreedyAndSampled) {
  Model m = Model::random(tiny(), WType::q4_1, 11);
  for (KvType kv : {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4}) {
    for (float temp : {0.0f, 0.7f}) {
      const std::string what = std::string(kv_type_name(kv)) + (temp > 0 ? " sampled" : " greedy");
      const auto rs = requests(temp, 3);
      EngineConfig c;
      c.kv_type = kv;
      const Runs plain = run(m, c, rs);
      c.spec = ngram();
      const Runs spec = run(m, c, rs);
      expect_identical(spec.outs, plain.outs, what);
      EXPECT_GT(spec.stats.accepted_tokens, 0) << what;
      EXPECT_GT(spec.stats.drafted_tokens, spec.stats.accepted_tokens) << what;
      EXPECT_LT(spec.stats.steps, plain.stats.steps) << what;
      EXPECT_EQ(spec.stats.generated_tokens, plain.stats.generated_tokens) << what;
    }
  }
}

// Speculation on for some requests (Request::spec) and off for others in one batch; a small
// cache forces preemptions (a draft is dropped before a sequence is preempted for it).
TEST(Speculative, MixedBatchWithPreemptionIsTheSameBits) {
  Model m = Model::random(tiny(), WType::q4_1, 11);
  for (float temp : {0.0f, 0.7f}) {
    auto rs = requests(temp, 2);
    for (size_t i = 0; i < rs.size(); ++i) rs[i].spec = i % 2 ? SpecMode::off : SpecMode::ngram;
    EngineConfig c;
    c.kv_tokens = 160;  // 10 blocks of 16 for 5 requests of up to ~75 tokens
    const Runs plain = run(m, c, requests(temp, 2));
    const Runs mixed = run(m, c, rs);
    expect_identical(mixed.outs, plain.outs, temp > 0 ? "sampled" : "greedy");
    EXPECT_GT(mixed.stats.preemptions, 0);
    EXPECT_GT(mixed.stats.accepted_tokens, 0);
    EngineConfig big;
    const Runs roomy = run(m, big, requests(temp, 2));
    expect_identical(roomy.outs, plain.outs, "without preemption");
  }
}

// Requests that end inside a verify step (max_tokens, a cache that fills) stop at the same token
// with the same finish; every token is streamed once.
TEST(Speculative, RequestsEndingInsideADraftEndThere) {
  Model m = Model::random(tiny(), WType::q4_1, 13);
  std::vector<Request> rs = requests(0.0f, -1);
  for (size_t i = 0; i < rs.size(); ++i) rs[i].max_tokens = 3 + int64_t(i) * 4;
  EngineConfig c;
  c.max_seqs = 1;
  c.kv_tokens = 64;  // the longest request fills the cache
  Request fill;
  fill.prompt = grounded_prompt(17, 9);
  fill.max_tokens = 1000;
  rs.push_back(fill);
  const Runs plain = run(m, c, rs);
  c.spec = ngram();
  Engine e(m, nullptr, c);
  for (const Request& r : rs) e.submit(r);
  std::vector<std::vector<int32_t>> streamed(rs.size());
  const auto outs = e.run([&](const Event& ev) { streamed[size_t(ev.id)].push_back(ev.token); });
  expect_identical(outs, plain.outs, "ending inside drafts");
  EXPECT_EQ(outs.back().finish, Finish::length);
  EXPECT_LT(int64_t(outs.back().tokens.size()), fill.max_tokens);
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(streamed[i], outs[i].tokens) << "request " << i;
  EXPECT_GT(e.stats().accepted_tokens, 0);
}

TEST(Speculative, BadSpecNamesTheField) {
  Model m = Model::random(tiny(), WType::q8_0, 14);
  EngineConfig c;
  c.spec.k_max = 0;
  EXPECT_THROW_MSG(Engine(m, nullptr, c), InvalidArgument, "spec.k_max");
  Engine e(m, nullptr, EngineConfig{});
  Request r;
  r.prompt = {1, 2, 3};
  r.spec = SpecMode(7);
  EXPECT_THROW_MSG(e.submit(r), InvalidArgument, "spec");
}

}  // namespace
