// What serving needs from the engine, on small random models: automatic prefix
// caching gives the same tokens (and log-probabilities) bit for bit as running
// without it, for every KV type and with rotation; cancel() ends one request
// and frees its blocks without changing the others; log-probabilities are the
// temperature-1 log softmax of the logits before penalties (checked against
// forward_sequence in double); penalties see the prompt and the generated
// tokens; AsyncEngine, driven from many threads, gives what one thread does.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "llmk/engine.hpp"
#include "tests/common/testutil.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace {
using namespace llmk;

ModelConfig tiny() { return test::tiny_engine_model(512); }
std::vector<int32_t> tokens(int64_t n, uint32_t seed) { return test::engine_tokens(n, seed); }

// Requests that share prefixes: a common 37-token "system prompt" (two full
// 16-token blocks and a part) with different questions, one exact repeat, one
// that is another's prompt plus more (a later chat turn), and one short prompt.
std::vector<Request> shared_prefix_requests(float temp, int32_t logprobs) {
  const std::vector<int32_t> sys = tokens(37, 5);
  std::vector<Request> rs;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = sys;
    const auto q = tokens(3 + 7 * i, uint32_t(20 + i));
    r.prompt.insert(r.prompt.end(), q.begin(), q.end());
    r.max_tokens = 7 + 2 * i;
    r.sampling.temperature = temp;
    r.sampling.top_k = temp > 0 ? 30 : 0;
    r.seed = uint64_t(7 + i);
    r.logprobs = logprobs;
    rs.push_back(r);
  }
  rs.push_back(rs[2]);    // a retried request
  Request turn2 = rs[4];  // the next turn: the prompt grows by 40 tokens
  const auto more = tokens(40, 99);
  turn2.prompt.insert(turn2.prompt.end(), more.begin(), more.end());
  rs.push_back(turn2);
  Request shorty;
  shorty.prompt = {sys[0]};
  shorty.max_tokens = 5;
  rs.push_back(shorty);
  return rs;
}

struct Waves {
  std::vector<Output> outs;
  EngineStats stats;
};

// Runs rs in two waves (the second after the first finished, so it finds the
// first's blocks cached); wave 1 is submitted all at once, so requests admitted
// in one step also share blocks.
Waves run_waves(Model& m, const EngineConfig& c, const std::vector<Request>& rs) {
  Engine e(m, nullptr, c);
  Waves r;
  const size_t half = rs.size() / 2;
  for (size_t i = 0; i < half; ++i) e.submit(rs[i]);
  r.outs = e.run();
  for (size_t i = half; i < rs.size(); ++i) e.submit(rs[i]);
  for (Output& o : e.run()) r.outs.push_back(std::move(o));
  r.stats = e.stats();
  EXPECT_EQ(e.kv_stats().blocks_used, 0) << "every block is released when every request finished";
  return r;
}

void expect_same_bits(const Waves& a, const Waves& b, const std::string& what) {
  ASSERT_EQ(a.outs.size(), b.outs.size());
  for (size_t i = 0; i < a.outs.size(); ++i) {
    EXPECT_EQ(a.outs[i].tokens, b.outs[i].tokens) << what << " request " << i;
    ASSERT_EQ(a.outs[i].logprobs.size(), b.outs[i].logprobs.size()) << what << " request " << i;
    for (size_t j = 0; j < a.outs[i].logprobs.size(); ++j)
      EXPECT_EQ(std::bit_cast<uint32_t>(a.outs[i].logprobs[j]), std::bit_cast<uint32_t>(b.outs[i].logprobs[j]))
          << what << " request " << i << " token " << j;
  }
}

struct KvCase {
  KvType k, v;
  bool rotate;
};

TEST(EnginePrefixCache, SameBitsWithAndWithoutReuseForEveryKvType) {
  Model m = Model::random(tiny(), WType::q4_1, 31);
  const KvCase cases[] = {{KvType::f32, KvType::f32, false},   {KvType::f16, KvType::f16, false},
                          {KvType::bf16, KvType::bf16, false}, {KvType::int8, KvType::int8, false},
                          {KvType::int4, KvType::int4, false}, {KvType::int8, KvType::int8, true},
                          {KvType::int4, KvType::int8, true},  {KvType::f16, KvType::f16, true}};
  for (const KvCase& kc : cases) {
    for (float temp : {0.0f, 0.8f}) {
      if (temp > 0 && kc.k != KvType::f32 && !(kc.k == KvType::int4 && kc.rotate)) continue;  // test time
      const std::string what = std::string(kv_type_name(kc.k)) + "/" + kv_type_name(kc.v) +
                               (kc.rotate ? " rotated" : "") + " T=" + std::to_string(temp);
      const auto rs = shared_prefix_requests(temp, 2);
      EngineConfig c;
      c.kv_type = kc.k;
      c.kv_v_type = kc.v;
      c.kv_rotate = kc.rotate;
      c.prefix_cache = false;
      const Waves cold = run_waves(m, c, rs);
      EXPECT_EQ(cold.stats.cached_tokens, 0) << what;
      c.prefix_cache = true;
      const Waves warm = run_waves(m, c, rs);
      expect_same_bits(cold, warm, what);
      // wave 1: requests 1..3 share the system prompt's 2 full blocks with request 0 (admitted in the same step);
      // wave 2 finds them cached, the repeat its whole prompt's full blocks, the next turn the earlier turn's.
      EXPECT_GE(warm.stats.cached_tokens, 32 * 7) << what;
      EXPECT_EQ(warm.outs[6].cached_tokens, (int64_t(rs[6].prompt.size()) - 1) / 16 * 16) << what;
      EXPECT_GE(warm.outs[7].cached_tokens, int64_t(rs[4].prompt.size()) / 16 * 16) << what;
      EXPECT_EQ(warm.outs[8].cached_tokens, 0) << what << ": a 1-token prompt always runs its token";
      EXPECT_LT(warm.stats.prefill_tokens, cold.stats.prefill_tokens) << what;
      EXPECT_EQ(warm.stats.prompt_tokens, cold.stats.prompt_tokens) << what;
    }
  }
}

// The same through gemma3's sliding window (11 positions on layer 0; the
// prompts run to 120 tokens): a reused prefix gives the rows of a cold
// prefill, whichever tile of queries a row falls in.
TEST(EnginePrefixCache, SameBitsWithAndWithoutReuseThroughASlidingWindow) {
  ModelConfig mc = tiny();
  mc.arch = Arch::gemma3;
  mc.n_head_kv = 1;
  mc.head_dim = 32;
  mc.tied = true;
  mc.rope_base = 1e6f;
  mc.rope_base_local = 10000.0f;
  mc.sliding_window = 11;
  mc.swa_period = 2;
  Model m = Model::random(mc, WType::q8_0, 32);
  for (KvType kt : {KvType::f32, KvType::int8, KvType::int4}) {
    const auto rs = shared_prefix_requests(0.0f, 2);
    EngineConfig c;
    c.kv_type = kt;
    c.prefix_cache = false;
    const Waves cold = run_waves(m, c, rs);
    c.prefix_cache = true;
    const Waves warm = run_waves(m, c, rs);
    expect_same_bits(cold, warm, std::string("gemma3 window 11, ") + kv_type_name(kt));
    EXPECT_GE(warm.stats.cached_tokens, 32 * 7) << kv_type_name(kt);
  }
}

// The same for mixtures of experts (qwen3moe, 8 experts of 64, 2 a token): a token routed in
// a cold prefill, in a batch with other requests' tokens or after a reused prefix meets the
// same experts with the same sums.
TEST(EnginePrefixCache, SameBitsWithAndWithoutReuseForExperts) {
  ModelConfig mc = tiny();
  mc.arch = Arch::qwen3moe;
  mc.head_dim = 32;
  mc.n_expert = 8;
  mc.n_expert_used = 2;
  mc.d_ff_exp = 64;
  Model m = Model::random(mc, WType::q8_0, 32);
  const auto rs = shared_prefix_requests(0.0f, 2);
  EngineConfig c;
  c.kv_type = KvType::f32;
  c.prefix_cache = false;
  const Waves cold = run_waves(m, c, rs);
  c.prefix_cache = true;
  const Waves warm = run_waves(m, c, rs);
  expect_same_bits(cold, warm, "qwen3moe");
  EXPECT_GE(warm.stats.cached_tokens, 32 * 7);
}

// Preemption re-admits a sequence with its generated tokens: with the prefix
// cache it re-attaches the blocks it left cached, and the tokens do not change.
TEST(EnginePrefixCache, PreemptionWithReuseKeepsTheTokens) {
  Model m = Model::random(tiny(), WType::q8_0, 32);
  std::vector<Request> rs;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = tokens(20 + 5 * i, uint32_t(40 + i));
    r.max_tokens = 30;
    rs.push_back(r);
  }
  EngineConfig c;
  c.kv_tokens = 96;
  c.prefix_cache = false;
  Engine off(m, nullptr, c);
  for (const auto& r : rs) off.submit(r);
  const auto a = off.run();
  c.prefix_cache = true;
  Engine on(m, nullptr, c);
  for (const auto& r : rs) on.submit(r);
  const auto b = on.run();
  EXPECT_GT(on.stats().preemptions, 0);
  EXPECT_GT(on.stats().reused_tokens, 0) << "a re-admitted sequence found some of its blocks still cached";
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
}

std::vector<int32_t> alone(Model& m, const Request& r) {
  EngineConfig c;
  c.prefix_cache = false;
  Engine e(m, nullptr, c);
  e.submit(r);
  return e.run()[0].tokens;
}

TEST(EngineCancel, EndsOneRequestAndFreesItsBlocks) {
  Model m = Model::random(tiny(), WType::q4_1, 33);
  std::vector<Request> rs;
  for (int i = 0; i < 5; ++i) {
    Request r;
    r.prompt = tokens(10 + 9 * i, uint32_t(60 + i));
    r.max_tokens = 25;
    r.sampling.temperature = 0.7f;
    r.seed = uint64_t(i);
    rs.push_back(r);
  }
  EngineConfig c;
  c.max_seqs = 3;  // requests 3 and 4 wait
  Engine e(m, nullptr, c);
  for (const auto& r : rs) e.submit(r);
  std::map<int64_t, std::vector<Event>> evs;
  auto on = [&](const Event& ev) { evs[ev.id].push_back(ev); };
  for (int i = 0; i < 4; ++i) e.step(on);
  const int64_t used_before = e.kv_stats().blocks_used;
  e.cancel(1);  // running
  e.cancel(4);  // waiting
  e.cancel(1);  // twice: once is enough
  EXPECT_EQ(e.kv_stats().blocks_used, used_before) << "cancel acts at the next step";
  e.step(on);
  const auto outs = e.run(on);
  ASSERT_EQ(outs.size(), 5u);
  for (int64_t id : {1, 4}) {
    EXPECT_EQ(outs[size_t(id)].finish, Finish::cancelled);
    ASSERT_FALSE(evs[id].empty());
    EXPECT_EQ(evs[id].back().finish, Finish::cancelled);
    EXPECT_EQ(evs[id].back().token, -1);
    EXPECT_EQ(std::count_if(evs[id].begin(), evs[id].end(), [](const Event& x) { return x.finish != Finish::running; }),
              1);
  }
  EXPECT_EQ(outs[1].tokens.size(), 4u) << "request 1 keeps the 4 tokens it produced";
  EXPECT_TRUE(outs[4].tokens.empty());
  for (size_t i : {size_t(0), size_t(2), size_t(3)}) {
    EXPECT_EQ(outs[i].tokens, alone(m, rs[i])) << "request " << i;
    EXPECT_EQ(outs[i].finish, Finish::length);
  }
  EXPECT_EQ(e.kv_stats().blocks_used, 0);
  EXPECT_EQ(e.stats().cancelled, 2);
  e.cancel(1);  // finished: nothing happens
  EXPECT_FALSE(e.step());
  EXPECT_THROW(e.cancel(5), InvalidArgument);
  EXPECT_THROW(e.cancel(-1), InvalidArgument);
}

TEST(EngineCancel, TakeFinishedForgetsOutputs) {
  Model m = Model::random(tiny(), WType::q4_1, 34);
  Engine e(m, nullptr, EngineConfig{});
  Request r;
  r.prompt = tokens(5, 1);
  r.max_tokens = 3;
  e.submit(r);
  e.submit(r);
  while (e.step()) {
  }
  auto got = e.take_finished();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(e.take_finished().empty());
  EXPECT_TRUE(e.run().empty());
  EXPECT_EQ(e.submit(r), 2) << "ids keep counting";
}

// Log-probabilities against forward_sequence's logits in double: the sampled
// token's and the top-N (order and ids exact), at temperature 1 before penalties,
// whatever the request's temperature, top-k and penalties.
TEST(EngineLogprobs, AreTheTemperatureOneLogSoftmaxBeforePenalties) {
  Model m = Model::random(tiny(), WType::q8_0, 35);
  const int64_t V = m.config().n_vocab;
  for (int variant = 0; variant < 3; ++variant) {
    Request r;
    r.prompt = tokens(23, uint32_t(70 + variant));
    r.max_tokens = 12;
    r.logprobs = variant == 0 ? 0 : variant == 1 ? 5 : kMaxLogprobs;
    if (variant > 0) {
      r.sampling.temperature = 1.7f;
      r.sampling.top_k = 4;
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.presence_penalty = 0.5f;
      r.seed = 3;
    }
    EngineConfig c;
    Engine e(m, nullptr, c);
    e.submit(r);
    std::vector<Event> evs;
    const Output o = e.run([&](const Event& ev) { evs.push_back(ev); })[0];
    ASSERT_EQ(o.tokens.size(), 12u);
    std::vector<int32_t> seq = r.prompt;
    seq.insert(seq.end(), o.tokens.begin(), o.tokens.end() - 1);
    std::vector<float> lg(seq.size() * size_t(V));
    forward_sequence(m, c, seq, lg.data());
    for (size_t j = 0; j < o.tokens.size(); ++j) {
      const float* row = lg.data() + (r.prompt.size() - 1 + j) * size_t(V);
      double mx = -INFINITY, sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      const double lse = mx + std::log(sum);
      EXPECT_NEAR(o.logprobs[j], double(row[o.tokens[j]]) - lse, 1e-5 * (1 + std::abs(lse)))
          << "variant " << variant << " token " << j;
      EXPECT_EQ(evs[j].logprob, o.logprobs[j]);
      std::vector<int32_t> order(static_cast<size_t>(V));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      ASSERT_EQ(o.top[j].size(), size_t(r.logprobs));
      for (size_t k = 0; k < o.top[j].size(); ++k) {
        EXPECT_EQ(o.top[j][k].token, order[k]) << "variant " << variant << " token " << j << " rank " << k;
        EXPECT_NEAR(o.top[j][k].logprob, double(row[order[k]]) - lse, 1e-5 * (1 + std::abs(lse)));
      }
      EXPECT_EQ(evs[j].top.size(), o.top[j].size());
    }
  }
  Engine e(m, nullptr, EngineConfig{});
  Request bad;
  bad.prompt = {1};
  for (int32_t lp : {-2, kMaxLogprobs + 1}) {
    bad.logprobs = lp;
    EXPECT_THROW(e.submit(bad), InvalidArgument) << lp;
  }
  bad.logprobs = -1;
  const Output o = [&] {
    e.submit(bad);
    return e.run()[0];
  }();
  EXPECT_TRUE(o.logprobs.empty());
  EXPECT_TRUE(o.top.empty());
}

// Presence penalties see the generated tokens: with a huge one, greedy never
// repeats a token it generated (it did without); a huge repetition penalty sees
// the prompt too, so no prompt token comes back either.
TEST(EngineSampling, PenaltiesSeeTheGeneratedTokensAndRepetitionThePrompt) {
  Model m = Model::random(tiny(), WType::q4_1, 36);
  Request r;
  r.prompt = tokens(30, 11);
  r.max_tokens = 40;
  auto repeats = [](const std::vector<int32_t>& seen0, const std::vector<int32_t>& gen) {
    std::vector<int32_t> seen = seen0;
    for (int32_t t : gen) {
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) return true;
      seen.push_back(t);
    }
    return false;
  };
  const auto plain = alone(m, r);
  EXPECT_TRUE(repeats({}, plain)) << "the unpenalized run repeats a token, so the checks below can fail";
  EXPECT_TRUE(repeats(r.prompt, plain));
  r.sampling.presence_penalty = 1e6f;
  EXPECT_FALSE(repeats({}, alone(m, r)));
  r.sampling.presence_penalty = 0;
  r.sampling.repetition_penalty = 1e30f;  // positive logits / 1e30, negative * 1e30
  EXPECT_FALSE(repeats(r.prompt, alone(m, r)));
}

// AsyncEngine from 8 threads: each request's events and output are those of a
// single-threaded run; a cancel from another thread ends its request; stop()
// ends the rest with a final event.
TEST(AsyncEngine, ManyThreadsGetWhatOneThreadGets) {
  Model m = Model::random(tiny(), WType::q4_1, 37);
  std::vector<Request> rs;
  for (int i = 0; i < 24; ++i) {
    Request r;
    r.prompt = tokens(5 + (i * 7) % 40, uint32_t(i % 6));  // repeats: the prefix cache is used
    r.max_tokens = 6 + i % 9;
    r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
    r.seed = uint64_t(i);
    rs.push_back(r);
  }
  std::vector<std::vector<int32_t>> expect;
  for (const auto& r : rs) expect.push_back(alone(m, r));
  EngineConfig c;
  c.max_seqs = 6;
  c.kv_tokens = int64_t(1) << 16;
  AsyncEngine ae(m, nullptr, c, 64);
  std::vector<std::vector<int32_t>> got(rs.size());
  std::vector<Finish> fin(rs.size(), Finish::running);
  std::atomic<bool> done{false};
  std::thread poller([&] {  // as /metrics does, while the engine steps
    int64_t seen = 0;
    while (!done.load()) seen = std::max(seen, ae.status().stats.generated_tokens);
    EXPECT_GE(seen, 0);
  });
  std::vector<std::thread> th;
  for (int t = 0; t < 8; ++t)
    th.emplace_back([&, t] {
      for (size_t i = size_t(t); i < rs.size(); i += 8) {
        AsyncEngine::Refused why;
        auto st = ae.submit(rs[i], &why);
        ASSERT_TRUE(st);
        for (;;) {
          for (const Event& ev : st->wait(std::chrono::milliseconds(50))) {
            EXPECT_EQ(ev.id, st->id());
            if (ev.token >= 0) got[i].push_back(ev.token);
            fin[i] = ev.finish;
          }
          if (fin[i] != Finish::running) break;
        }
        ASSERT_TRUE(st->output());
        EXPECT_EQ(st->output()->tokens, got[i]);
      }
    });
  for (auto& x : th) x.join();
  done.store(true);
  poller.join();
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(got[i], expect[i]) << "request " << i;
  ae.wait_idle();
  const AsyncEngineStatus s = ae.status();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.kv.blocks_used, 0);
  EXPECT_GT(s.stats.cached_tokens, 0);

  // A long request cancelled from another thread, then stop() with others in flight.
  Request longr;
  longr.prompt = tokens(8, 9);
  longr.max_tokens = int64_t(1) << 40;  // ends only when cancelled (or after 2^16 tokens)
  AsyncEngine::Refused why;
  auto a = ae.submit(longr, &why);
  auto b = ae.submit(longr, &why);
  ASSERT_TRUE(a && b);
  std::thread canceller([&] {
    while (a->wait(std::chrono::milliseconds(10)).empty() && !a->finished()) {
    }
    ae.cancel(a->id());
  });
  canceller.join();
  while (!a->finished()) a->wait(std::chrono::milliseconds(50));
  EXPECT_EQ(a->output()->finish, Finish::cancelled);
  ae.stop();
  EXPECT_FALSE(ae.submit(longr, &why));
  EXPECT_EQ(why, AsyncEngine::Refused::stopped);
  ae.wait_idle();
  ASSERT_TRUE(b->finished());
  EXPECT_EQ(b->output()->finish, Finish::cancelled);
  EXPECT_EQ(ae.status().kv.blocks_used, 0);
}

TEST(AsyncEngine, FullQueueRefusesAndBadRequestsThrowOnTheCallersThread) {
  Model m = Model::random(tiny(), WType::q4_1, 38);
  EngineConfig c;
  c.max_seqs = 1;
  c.kv_tokens = int64_t(1) << 16;
  AsyncEngine ae(m, nullptr, c, 2);
  Request r;
  r.prompt = tokens(4, 2);
  r.max_tokens = int64_t(1) << 40;  // ends only when cancelled (or after 2^16 tokens)
  AsyncEngine::Refused why;
  std::vector<std::shared_ptr<RequestStream>> ok;
  for (int i = 0; i < 3; ++i) ok.push_back(ae.submit(r, &why));  // 3 accepted: at most 2 queued, 1 running
  ASSERT_TRUE(ok[0] && ok[1]);
  int refused = 0;
  for (int i = 0; i < 3; ++i) refused += !ae.submit(r, &why) && why == AsyncEngine::Refused::queue_full;
  EXPECT_GE(refused, 2) << "with 1 running and 2 queued, later submits are refused";
  Request bad = r;
  bad.max_tokens = 0;
  EXPECT_THROW(ae.submit(bad, &why), InvalidArgument);
  EXPECT_THROW(AsyncEngine(m, nullptr, c, 0), InvalidArgument);
  ae.stop();
  ae.wait_idle();
  EXPECT_EQ(ae.status().kv.blocks_used, 0);
}

// A client that has its request's last event may submit again at once: the finished request
// no longer counts against max_queue (it did until after every stream had been fed).
TEST(AsyncEngine, FinishedRequestFreesItsQueueSlotBeforeItsLastEvent) {
  Model m = Model::random(tiny(), WType::q4_1, 39);
  EngineConfig c;
  c.max_seqs = 1;
  AsyncEngine ae(m, nullptr, c, 1);
  Request r;
  r.prompt = tokens(4, 3);
  r.max_tokens = 1;
  for (int i = 0; i < 300; ++i) {
    AsyncEngine::Refused why;
    auto st = ae.submit(r, &why);
    ASSERT_TRUE(st) << "submit " << i << " refused right after the previous request's last event";
    while (!st->finished()) st->wait(std::chrono::milliseconds(50));
  }
}

}  // namespace
