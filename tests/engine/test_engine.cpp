// The engine on small random models: batched, continuously batched and
// preempted generation give the same tokens as each request run alone (and,
// greedy with an f32 cache, as a plain loop over the dense cache); sampling
// is reproducible per (seed, step) whatever the batch; end-of-generation
// tokens, max_tokens and stop strings end a request with its text intact.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "llmk/engine.hpp"
#include "llmk/tokenizer.hpp"
#include "tests/common/testutil.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace {
using namespace llmk;

ModelConfig tiny() { return test::tiny_engine_model(256); }
std::vector<int32_t> prompt(int64_t n, uint32_t seed) { return test::engine_tokens(n, seed); }

std::vector<Request> requests(float temp) {
  std::vector<Request> rs;
  const int64_t lens[] = {5, 17, 1, 33, 9, 12};
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = prompt(lens[i], uint32_t(i + 1));
    r.max_tokens = 6 + 3 * i;
    r.sampling.temperature = temp;
    r.sampling.top_k = temp > 0 ? 20 : 0;
    r.seed = uint64_t(100 + i);
    rs.push_back(r);
  }
  return rs;
}

std::vector<int32_t> alone(Model& m, const Request& r, KvType kv) {
  EngineConfig c;
  c.kv_type = kv;
  c.max_seqs = 1;
  Engine e(m, nullptr, c);
  e.submit(r);
  return e.run()[0].tokens;
}

// Greedy over the dense f32 cache: the plain loop the engine must reproduce.
std::vector<int32_t> dense_greedy(Model& m, const Request& r) {
  DenseKv kv(m.config(), 1, 256);
  const int64_t V = m.config().n_vocab;
  std::vector<int32_t> toks = r.prompt, out;
  std::vector<float> lg(static_cast<size_t>(int64_t(toks.size()) * V));
  int64_t done = 0;
  while (int64_t(out.size()) < r.max_tokens) {
    const int64_t T = int64_t(toks.size()) - done;
    std::vector<int64_t> pos;
    for (int64_t i = 0; i < T; ++i) pos.push_back(done + i);
    const std::vector<int32_t> seq(static_cast<size_t>(T), 0);
    m.forward({{toks.data() + done, size_t(T)}, pos, seq, {}}, kv, lg.data());
    const float* last = lg.data() + (T - 1) * V;
    const int32_t t = int32_t(std::max_element(last, last + V) - last);
    done = int64_t(toks.size());
    toks.push_back(t);
    out.push_back(t);
  }
  return out;
}

TEST(Engine, BatchedGreedyEqualsAloneAndDenseLoop) {
  Model m = Model::random(tiny(), WType::q4_1, 7);
  for (KvType kv : {KvType::f32, KvType::f16, KvType::int8, KvType::int4}) {
    EngineConfig c;
    c.kv_type = kv;
    Engine e(m, nullptr, c);
    auto rs = requests(0.0f);
    for (const auto& r : rs) e.submit(r);
    const auto outs = e.run();
    ASSERT_EQ(outs.size(), rs.size());
    for (size_t i = 0; i < rs.size(); ++i) {
      EXPECT_EQ(int64_t(outs[i].tokens.size()), rs[i].max_tokens);
      EXPECT_EQ(outs[i].finish, Finish::length);
      EXPECT_EQ(outs[i].tokens, alone(m, rs[i], kv)) << kv_type_name(kv) << " request " << i;
      if (kv == KvType::f32) EXPECT_EQ(outs[i].tokens, dense_greedy(m, rs[i])) << "request " << i;
    }
    EXPECT_GT(e.stats().decode_tokens, 0);
    EXPECT_GT(e.stats().prefill_tokens, 0);
  }
}

TEST(Engine, ContinuousBatchingAndSamplingAreReproducible) {
  Model m = Model::random(tiny(), WType::q8_0, 8);
  auto rs = requests(0.9f);
  Engine e(m, nullptr, EngineConfig{});
  e.submit(rs[0]);
  e.submit(rs[1]);
  for (int i = 0; i < 3; ++i) e.step();  // two running, then the rest join
  for (size_t i = 2; i < rs.size(); ++i) e.submit(rs[i]);
  const auto outs = e.run();
  bool any_differs_from_greedy = false;
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(outs[i].tokens, alone(m, rs[i], KvType::f32)) << "request " << i;
    Request g = rs[i];
    g.sampling.temperature = 0;
    any_differs_from_greedy |= outs[i].tokens != alone(m, g, KvType::f32);
  }
  EXPECT_TRUE(any_differs_from_greedy) << "temperature 0.9 sampled exactly the greedy tokens everywhere";
}

TEST(Engine, PreemptedSequencesAreRecomputedWithNothingLost) {
  Model m = Model::random(tiny(), WType::q4_1, 9);
  EngineConfig c;
  c.kv_tokens = 96;  // 6 blocks of 16: the requests below need up to 4 each
  c.block_tokens = 16;
  Engine e(m, nullptr, c);
  std::vector<Request> rs;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = prompt(20 + 5 * i, uint32_t(40 + i));
    r.max_tokens = 30;
    rs.push_back(r);
    e.submit(r);
  }
  std::vector<std::vector<int32_t>> streamed(4);
  const auto outs = e.run([&](const Event& ev) { streamed[size_t(ev.id)].push_back(ev.token); });
  EXPECT_GT(e.stats().preemptions, 0);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(outs[i].tokens, alone(m, rs[i], KvType::f32)) << "request " << i;
    EXPECT_EQ(streamed[i], outs[i].tokens) << "every token streamed exactly once";
  }
}

// A step's tokens and time go to one side (EngineStats): a step that prefills a
// newly admitted prompt while another sequence decodes counts both its tokens
// as prefill, so decode tokens are only ever counted with decode time.
TEST(Engine, MixedStepCountsTowardPrefill) {
  Model m = Model::random(tiny(), WType::q8_0, 10);
  Engine e(m, nullptr, EngineConfig{});
  Request a, b;
  a.prompt = prompt(5, 1);
  b.prompt = prompt(7, 2);
  a.max_tokens = b.max_tokens = 4;
  e.submit(a);
  ASSERT_TRUE(e.step());  // a's prompt
  e.submit(b);
  ASSERT_TRUE(e.step());  // b's prompt and a's first decode token
  EXPECT_EQ(e.stats().steps, 2);
  EXPECT_EQ(e.stats().prefill_tokens, 5 + 7 + 1);
  EXPECT_EQ(e.stats().decode_tokens, 0);
  EXPECT_EQ(e.stats().decode_seconds, 0.0);
  EXPECT_GT(e.stats().prefill_seconds, 0.0);
  ASSERT_TRUE(e.step());  // a and b decode
  EXPECT_EQ(e.stats().prefill_tokens, 5 + 7 + 1);
  EXPECT_EQ(e.stats().decode_tokens, 2);
  EXPECT_GT(e.stats().decode_seconds, 0.0);
}

// config() is the configuration the engine was built with, held by the engine:
// changing the caller's copy afterwards does not change it.
TEST(Engine, ConfigIsWhatItWasBuiltWith) {
  Model m = Model::random(tiny(), WType::q8_0, 13);
  EngineConfig c;
  c.kv_type = KvType::int4;
  c.kv_v_type = KvType::int8;
  c.kv_rotate = true;
  c.block_tokens = 32;
  c.kv_tokens = 640;
  c.max_seqs = 3;
  c.max_batch_tokens = 200;
  Engine e(m, nullptr, c);
  c.max_seqs = 9;
  const EngineConfig& got = e.config();
  EXPECT_EQ(got.kv_type, KvType::int4);
  EXPECT_EQ(got.kv_v_type, std::optional<KvType>(KvType::int8));
  EXPECT_TRUE(got.kv_rotate);
  EXPECT_EQ(got.block_tokens, 32);
  EXPECT_EQ(got.kv_tokens, 640);
  EXPECT_EQ(got.max_seqs, 3);
  EXPECT_EQ(got.max_batch_tokens, 200);
}

TEST(Engine, BadRequestsNameTheField) {
  Model m = Model::random(tiny(), WType::f32, 1);
  EngineConfig c;
  c.kv_tokens = 32;
  Engine e(m, nullptr, c);
  EXPECT_THROW(e.submit(Request{}), InvalidArgument);
  Request r;
  r.prompt = {1, 2, 301};
  EXPECT_THROW(e.submit(r), InvalidArgument);
  r.prompt = {1};
  r.max_tokens = 0;
  EXPECT_THROW(e.submit(r), InvalidArgument);
  r.max_tokens = 4;
  r.stop = {"x"};
  EXPECT_THROW(e.submit(r), InvalidArgument);  // stop strings need a tokenizer
  r.stop.clear();
  r.prompt = prompt(40, 3);  // needs 3 blocks, the cache holds 2: rejected here, not mid-run
  try {
    e.submit(r);
    ADD_FAILURE() << "a 40-token prompt accepted by a 32-token cache";
  } catch (const InvalidArgument& ex) {
    EXPECT_NE(std::string(ex.what()).find("'prompt' = 40 tokens"), std::string::npos) << ex.what();
  }
  EXPECT_TRUE(e.run().empty());
}

// Sampling parameters are checked at submit, naming the field: a bad request is
// never queued, so the valid request before it still runs to its end (it never
// throws from the sampler mid-step, after the model ran, leaving a sequence with
// no token behind).
TEST(Engine, BadSamplingIsRejectedAtSubmit) {
  Model m = Model::random(tiny(), WType::f32, 14);
  Engine e(m, nullptr, EngineConfig{});
  Request ok;
  ok.prompt = prompt(3, 6);
  ok.max_tokens = 4;
  EXPECT_EQ(e.submit(ok), 0);
  const auto bad = [&](const char* field, auto set) {
    Request r;
    r.prompt = prompt(2, 7);
    r.max_tokens = 4;
    set(r.sampling);
    try {
      e.submit(r);
      ADD_FAILURE() << field << " accepted";
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find("Engine::submit: argument '" + std::string(field) + " (request.sampling)'"),
                std::string::npos)
          << ex.what();
    }
  };
  bad("top_p", [](SamplingParams& p) { p.top_p = 2; });
  bad("temperature", [](SamplingParams& p) { p.temperature = -1; });
  bad("top_k", [](SamplingParams& p) { p.top_k = -1; });
  bad("min_p", [](SamplingParams& p) { p.min_p = 1; });
  bad("repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0; });
  bad("presence_penalty", [](SamplingParams& p) { p.presence_penalty = std::numeric_limits<float>::infinity(); });
  const auto outs = e.run();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish, Finish::length);
  EXPECT_EQ(outs[0].tokens, alone(m, ok, KvType::f32));
  EXPECT_FALSE(e.step());
}

// A sequence that fills the whole KV cache ends with Finish::length on its last
// token, which it keeps (engine.hpp): 32 slots hold a 4-token prompt and 28
// generated tokens, and the 29th, sampled from the full cache, is the last.
// Two such requests take turns (the newer is preempted and recomputed) and a
// request behind them still runs; a prompt of exactly the cache's size gets one token.
TEST(Engine, RequestThatFillsTheCacheEndsWithItsTokens) {
  Model m = Model::random(tiny(), WType::f32, 15);
  EngineConfig c;
  c.kv_tokens = 32;
  c.block_tokens = 16;
  Engine e(m, nullptr, c);
  Request big_a, big_b, small, full;
  big_a.prompt = prompt(4, 20);
  big_b.prompt = prompt(4, 21);
  big_a.max_tokens = big_b.max_tokens = 100;
  small.prompt = prompt(5, 22);
  small.max_tokens = 3;
  full.prompt = prompt(32, 23);
  full.max_tokens = 5;
  for (const Request* r : {&big_a, &big_b, &small, &full}) e.submit(*r);
  std::vector<std::vector<int32_t>> streamed(4);
  std::vector<Finish> last(4, Finish::running);
  const auto outs = e.run([&](const Event& ev) {
    EXPECT_EQ(last[size_t(ev.id)], Finish::running) << "an event after the last one of request " << ev.id;
    streamed[size_t(ev.id)].push_back(ev.token);
    last[size_t(ev.id)] = ev.finish;
  });
  ASSERT_EQ(outs.size(), 4u);
  const int64_t want[] = {29, 29, 3, 1};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(int64_t(outs[i].tokens.size()), want[i]) << "request " << i;
    EXPECT_EQ(outs[i].finish, Finish::length) << "request " << i;
    EXPECT_EQ(last[i], Finish::length) << "request " << i;
    EXPECT_EQ(streamed[i], outs[i].tokens) << "request " << i;
  }
  // The same tokens as the first ones of a run with room to spare.
  Request a = big_a, b = big_b;
  a.max_tokens = b.max_tokens = 29;
  EXPECT_EQ(outs[0].tokens, alone(m, a, KvType::f32));
  EXPECT_EQ(outs[1].tokens, alone(m, b, KvType::f32));
  EXPECT_EQ(outs[2].tokens, alone(m, small, KvType::f32));
  EXPECT_GT(e.stats().preemptions, 0);
  EXPECT_FALSE(e.step());
}

// EngineConfig fields are checked before any arithmetic uses them, each under
// its own name: block_tokens = 0 would divide by zero, and a huge kv_tokens
// would wrap the cache's byte budget (a tiny cache, silently) or be reported as
// budget_bytes, a field the caller never set.
// Logits the model makes undefined (here every row NaN, from a poisoned norm
// weight) end the requests they hit with Finish::error and token -1, keeping
// their earlier tokens; the step does not throw, and the engine runs the next
// request normally once the weight is restored.
TEST(Engine, UndefinedLogitsEndTheirRequestsWithError) {
  Model m = Model::random(tiny(), WType::f32, 17);
  const std::vector<Request> rs = requests(0.0f);
  Engine e(m, nullptr, EngineConfig{});
  e.submit(rs[0]);
  e.submit(rs[1]);
  std::vector<Event> ev;
  const auto record = [&](const Event& x) { ev.push_back(x); };
  ASSERT_TRUE(e.step(record));  // prefill: one token each
  ASSERT_TRUE(e.step(record));  // one decode step: two tokens each
  ASSERT_EQ(ev.size(), 4u);
  float* w = const_cast<float*>(m.layer(1).ffn_norm);
  const float saved = w[0];
  w[0] = std::numeric_limits<float>::quiet_NaN();
  ev.clear();
  ASSERT_NO_THROW(e.step(record));
  w[0] = saved;
  ASSERT_EQ(ev.size(), 2u);
  for (const Event& x : ev) {
    EXPECT_EQ(x.finish, Finish::error) << x.id;
    EXPECT_EQ(x.token, -1) << x.id;
    EXPECT_TRUE(x.text.empty()) << x.id;
  }
  const Request fresh = rs[2];
  e.submit(fresh);
  const std::vector<Output> out = e.run();
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(out[size_t(i)].finish, Finish::error) << i;
    const std::vector<int32_t> full = alone(m, rs[size_t(i)], KvType::f32);
    EXPECT_EQ(out[size_t(i)].tokens, std::vector<int32_t>(full.begin(), full.begin() + 2)) << i;
  }
  EXPECT_EQ(out[2].finish, Finish::length);
  EXPECT_EQ(out[2].tokens, alone(m, fresh, KvType::f32));
  EXPECT_STREQ(finish_name(Finish::error), "error");
}

TEST(Engine, BadConfigsNameTheField) {
  Model m = Model::random(tiny(), WType::f32, 16);
  const auto expect_bad = [&](const char* field, auto set) {
    EngineConfig c;
    set(c);
    for (int which = 0; which < 2; ++which) {
      const char* fn = which == 0 ? "llmk::Engine: " : "llmk::forward_sequence: ";
      try {
        if (which == 0) {
          Engine e(m, nullptr, c);
        } else {
          const auto toks = prompt(4, 1);
          std::vector<float> lg(toks.size() * size_t(m.config().n_vocab));
          forward_sequence(m, c, toks, lg.data());
        }
        // forward_sequence sizes its own cache: kv_tokens is not the caller's there.
        if (which == 0 || std::string(field) != "kv_tokens") ADD_FAILURE() << fn << field << " accepted";
      } catch (const InvalidArgument& ex) {
        EXPECT_NE(std::string(ex.what()).find(std::string(fn) + "argument '" + field + "'"), std::string::npos)
            << ex.what();
      }
    }
  };
  expect_bad("block_tokens", [](EngineConfig& c) { c.block_tokens = 0; });
  expect_bad("block_tokens", [](EngineConfig& c) { c.block_tokens = -16; });
  expect_bad("block_tokens", [](EngineConfig& c) { c.block_tokens = int64_t(1) << 40; });
  expect_bad("kv_type", [](EngineConfig& c) { c.kv_type = KvType(9); });
  expect_bad("kv_v_type", [](EngineConfig& c) { c.kv_v_type = KvType(9); });
  for (int64_t n :
       {int64_t(0), int64_t(-1), (int64_t(1) << 55) + 128, int64_t(1) << 62, std::numeric_limits<int64_t>::max()})
    expect_bad("kv_tokens", [n](EngineConfig& c) { c.kv_tokens = n; });
}

// GPT-2 has learned positions: prompt + max_tokens must fit n_ctx, checked
// without forming the sum (a max_tokens near INT64_MAX must not wrap past it).
TEST(Engine, Gpt2RequestsMustFitTheLearnedPositions) {
  ModelConfig g = tiny();
  g.arch = Arch::gpt2;
  g.n_head_kv = g.n_head;
  g.tied = true;
  Model m = Model::random(g, WType::f32, 2);
  Engine e(m, nullptr, EngineConfig{});
  Request r;
  r.prompt = prompt(200, 5);
  r.max_tokens = 56;  // 256 = n_ctx: fits
  EXPECT_NO_THROW(e.submit(r));
  for (int64_t n : {int64_t(57), std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 150}) {
    r.max_tokens = n;
    try {
      e.submit(r);
      ADD_FAILURE() << "max_tokens " << n << " accepted";
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find("n_ctx = 256"), std::string::npos) << ex.what();
    }
  }
}

// GPT-2's byte -> printable symbol map, so a tokenizer can be built from parts.
std::string byte_symbol(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) s += char(cp);
  else {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  }
  return s;
}

// A byte-level vocabulary over the model's 301 ids: ids 0..255 the bytes,
// 256..299 two-letter pieces, and `eog` replaced by <|im_end|> (CONTROL).
Tokenizer vocab(int32_t eog) {
  std::vector<std::string> toks;
  std::vector<TokenType> types;
  for (int i = 0; i < 301; ++i) {
    if (i < 256) toks.push_back(byte_symbol(i));
    else toks.push_back(std::string(1, char('a' + (i - 256) % 26)) + char('A' + (i - 256) / 26));
    types.push_back(TokenType::normal);
  }
  if (eog >= 0) {
    toks[size_t(eog)] = "<|im_end|>";
    types[size_t(eog)] = TokenType::control;
  }
  return Tokenizer(toks, {}, types, PreTokenizer::gpt2);
}

TEST(Engine, EndOfGenerationAndStopStrings) {
  Model m = Model::random(tiny(), WType::q8_0, 4);
  Request r;
  r.prompt = prompt(7, 5);
  r.max_tokens = 12;
  const Tokenizer plain = vocab(-1);
  Engine e0(m, &plain, EngineConfig{});
  e0.submit(r);
  std::string streamed;
  const Output o = e0.run([&](const Event& ev) { streamed += ev.text; })[0];
  ASSERT_EQ(o.finish, Finish::length);
  EXPECT_EQ(streamed, o.text);
  EXPECT_EQ(o.text, plain.decode(o.tokens, true));
  // The first token not seen before position k >= 2 becomes an end-of-generation token.
  size_t k = 2;
  while (k < o.tokens.size() && std::count(o.tokens.begin(), o.tokens.begin() + long(k), o.tokens[k])) ++k;
  ASSERT_LT(k, o.tokens.size());
  const Tokenizer with_eog = vocab(o.tokens[k]);
  Engine e1(m, &with_eog, EngineConfig{});
  e1.submit(r);
  const Output o1 = e1.run()[0];
  EXPECT_EQ(o1.finish, Finish::eos);
  EXPECT_EQ(o1.tokens, std::vector<int32_t>(o.tokens.begin(), o.tokens.begin() + long(k) + 1));
  // ignore_eos: the same tokens as without the end-of-generation token, to max_tokens.
  Request ri = r;
  ri.ignore_eos = true;
  Engine ei(m, &with_eog, EngineConfig{});
  ei.submit(ri);
  const Output oi = ei.run()[0];
  EXPECT_EQ(oi.finish, Finish::length);
  EXPECT_EQ(oi.tokens, o.tokens);
  // A stop string from the middle of the text: the text is cut just before it.
  ASSERT_GE(o.text.size(), 6u);
  Request rs = r;
  rs.stop = {o.text.substr(3, 3)};
  Engine e2(m, &plain, EngineConfig{});
  e2.submit(rs);
  std::string streamed2;
  const Output o2 = e2.run([&](const Event& ev) { streamed2 += ev.text; })[0];
  EXPECT_EQ(o2.finish, Finish::stop);
  EXPECT_EQ(o2.text, o.text.substr(0, o.text.find(rs.stop[0])));
  EXPECT_EQ(streamed2, o2.text) << "held-back text never leaks a stop string's start";
}

}  // namespace

namespace {
// forward_sequence through the paged f32 cache against the dense f32 cache: the
// same K/V values, only the attention kernels' summation order differs (f32
// rounding over <= 40 positions and 16-value dots: well under 1e-4 of the logit
// scale). The quantized cache types' own error bounds are the kv component's tests.
TEST(Engine, PagedLogitsMatchDenseCache) {
  Model m = Model::random(tiny(), WType::f32, 11);
  const auto toks = prompt(40, 9);
  const int64_t T = int64_t(toks.size()), V = m.config().n_vocab;
  DenseKv dense(m.config(), 1, 64);
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < T; ++i) pos.push_back(i);
  const std::vector<int32_t> seq(static_cast<size_t>(T), 0);
  std::vector<float> ref(static_cast<size_t>(T * V)), got(static_cast<size_t>(T * V));
  m.forward({toks, pos, seq, {}}, dense, ref.data());
  forward_sequence(m, EngineConfig{}, toks, got.data());
  double scale = 0;
  for (float r : ref) scale = std::max(scale, double(std::fabs(r)));
  EXPECT_TRUE(test::all_close(got.data(), ref.data(), got.size(), 1e-4 * scale, 0.0, "paged f32 vs dense"));
}

// kv_v_type sets V's storage apart from K's: naming V's type equal to K's is
// the default bit for bit, and changing only V's type (either way) changes the
// logits, so the cache really stores V in the type asked for.
TEST(Engine, SeparateVTypeIsApplied) {
  Model m = Model::random(tiny(), WType::f32, 12);
  const auto toks = prompt(40, 10);
  const size_t n = toks.size() * size_t(m.config().n_vocab);
  auto run = [&](KvType k, std::optional<KvType> v) {
    EngineConfig c;
    c.kv_type = k, c.kv_v_type = v;
    std::vector<float> lg(n);
    forward_sequence(m, c, toks, lg.data());
    return lg;
  };
  const auto f32 = run(KvType::f32, std::nullopt), q8 = run(KvType::int8, std::nullopt);
  EXPECT_EQ(run(KvType::int8, KvType::int8), q8);
  EXPECT_NE(run(KvType::f32, KvType::int8), f32);
  EXPECT_NE(run(KvType::int8, KvType::f32), q8);
}
}  // namespace
