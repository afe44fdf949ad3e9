// The engine (include/llmk/engine.hpp): a scheduler over the paged KV cache.
// A step: reserve one KV slot per decoding sequence (preempting the newest
// when blocks run out), admit waiting sequences whose prompt fits, run the
// model on the batch grouped by sequence, sample one token per sequence,
// stream its text, retire the finished.
#include "llmk/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>

#include "llmk/attention.hpp"
#include "llmk/error.hpp"
#include "llmk/kv_cache.hpp"
#include "llmk/tokenizer.hpp"
#include "sample/sample_math.hpp"

namespace llmk {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::running: return "running";
    case Finish::eos: return "eos";
    case Finish::length: return "length";
    case Finish::stop: return "stop";
    case Finish::error: return "error";
  }
  return "?";
}

namespace {

// The model's KvStore over the paged cache. The engine fills slots (one per
// batch token, batch order), qo_indptr and the page table before forward():
// the batch holds, per sequence, its newest tokens, so attention_prefill's
// causal rule is the model's.
class PagedKv final : public KvStore {
 public:
  PagedKv(const KvCacheConfig& c, int64_t n_head, int64_t d_head)
      : cache(c), n_head_(n_head), scale_(1.0f / std::sqrt(float(d_head))) {}
  void store(int64_t layer, const Batch& b, const float* k, const float* v) override {
    cache.write(layer, slots, k, v);
  }
  void attend(int64_t layer, const Batch& b, const float* q, float* out) override {
    attention_prefill(q, qo_indptr.data(), cache.layer(layer), pages.view(), n_head_, scale_, out);
  }
  KvCache cache;
  std::vector<int64_t> slots, qo_indptr;
  PageTable pages;

 private:
  int64_t n_head_;
  float scale_;
};

// The cache for `c`. The EngineConfig fields the arithmetic uses are checked
// first, under their own names (validate() would name KvCacheConfig's fields,
// budget_bytes included, which the caller never set): block_tokens divides
// and, like the KV types, sizes a block in kv_block_bytes, which must not
// overflow; kv_tokens' block count and bytes are formed with overflow checks
// (a wrapped budget built a tiny cache silently).
KvCacheConfig kv_config(const Model& m, const EngineConfig& c, const char* fn) {
  LLMK_CHECK_ARG(c.block_tokens >= 1 && c.block_tokens <= kKvMaxBlockTokens, fn, "block_tokens", c.block_tokens,
                 "must be in [1, 2^20]");
  LLMK_CHECK_ARG(int(c.kv_type) <= int(KvType::int4), fn, "kv_type", int(c.kv_type), "must be a KvType");
  if (c.kv_v_type)
    LLMK_CHECK_ARG(int(*c.kv_v_type) <= int(KvType::int4), fn, "kv_v_type", int(*c.kv_v_type), "must be a KvType");
  LLMK_CHECK_ARG(c.kv_tokens > 0, fn, "kv_tokens", c.kv_tokens, "must be > 0");
  KvCacheConfig k;
  k.n_layers = m.config().n_layer;
  k.n_kv_heads = m.config().n_head_kv;
  k.head_dim = m.config().d_head();
  k.block_tokens = c.block_tokens;
  k.k_type = c.kv_type;
  k.v_type = c.kv_v_type.value_or(c.kv_type);
  k.k_rotate = c.kv_rotate;
  const int64_t blocks = c.kv_tokens / c.block_tokens + (c.kv_tokens % c.block_tokens != 0);
  LLMK_CHECK_ARG(blocks < (int64_t(1) << 31) && !__builtin_mul_overflow(blocks, kv_block_bytes(k), &k.budget_bytes),
                 fn, "kv_tokens", c.kv_tokens,
                 "needs " + std::to_string(blocks) + " blocks of " + std::to_string(c.block_tokens) +
                     " tokens: the cache holds fewer than 2^31 blocks, of at most 2^63 bytes in all");
  validate(k, fn);
  return k;
}


struct Seq {
  int64_t id;
  Request req;
  std::vector<int32_t> generated;
  int64_t kv = -1;      // sequence in the cache, -1 while waiting
  int64_t cached = 0;   // tokens in the cache
  std::optional<StreamDecoder> dec;
  std::string full;     // text so far (cut at a stop string)
  size_t emitted = 0;   // bytes of `full` already sent
  Output out;
};

}  // namespace

struct Engine::Impl {
  Model& model;
  const Tokenizer* tok;
  EngineConfig cfg;
  PagedKv kv;
  int64_t capacity;  // token slots in the cache: the most one sequence can hold
  std::deque<Seq*> waiting;
  std::vector<Seq*> running;  // admission order
  std::vector<std::unique_ptr<Seq>> all;
  EngineStats stats;
  std::vector<float> logits;

  Impl(Model& m, const Tokenizer* t, const EngineConfig& c)
      : model(m),
        tok(t),
        cfg(c),
        kv(kv_config(m, c, "Engine"), m.config().n_head, m.config().d_head()),
        capacity(kv.cache.manager().num_blocks() * c.block_tokens) {}

  void preempt(Seq* s) {
    kv.cache.free_sequence(s->kv);
    s->kv = -1;
    s->cached = 0;
    ++s->out.preemptions;
    ++stats.preemptions;
    running.erase(std::find(running.begin(), running.end(), s));
    waiting.push_front(s);
  }

  // Appends `toks` to s's cache sequence; false when the blocks ran out.
  bool reserve(Seq* s, std::span<const int32_t> toks, std::vector<int64_t>& slots) {
    return kv.cache.append(s->kv, toks, &slots) == KvStatus::ok;
  }

  // Text of a new token; returns what may be sent now and sets s->out.finish on a stop string.
  std::string text_of(Seq* s, int32_t token, bool last) {
    if (!tok) return {};
    if (!s->dec) s->dec.emplace(*tok, true);
    if (token >= 0 && s->out.finish != Finish::eos) s->full += s->dec->push(token);
    if (last) s->full += s->dec->finish();
    size_t hold = 0;
    for (const std::string& st : s->req.stop) {
      const size_t from = s->emitted >= st.size() ? s->emitted - st.size() + 1 : 0;
      const size_t at = s->full.find(st, from);
      if (at != std::string::npos) {
        s->full.resize(at);
        if (s->out.finish != Finish::error) s->out.finish = Finish::stop;
        hold = 0;
        break;
      }
      for (size_t n = std::min(st.size() - 1, s->full.size()); n > hold; --n)  // a stop string may be starting
        if (s->full.compare(s->full.size() - n, n, st, 0, n) == 0) {
          hold = n;
          break;
        }
    }
    if (s->out.finish != Finish::running) hold = 0;
    const size_t end = s->full.size() - hold;
    std::string piece = end > s->emitted ? s->full.substr(s->emitted, end - s->emitted) : "";
    s->emitted = std::max(s->emitted, end);
    return piece;
  }

  bool step(const std::function<void(const Event&)>& on_event) {
    if (running.empty() && waiting.empty()) return false;
    const auto t0 = std::chrono::steady_clock::now();
    // 1. one slot per decoding sequence, preempting the newest on a shortage
    std::vector<Seq*> groups;
    std::vector<std::vector<int64_t>> slots;
    for (size_t i = 0; i < running.size();) {
      Seq* s = running[i];
      std::vector<int64_t> sl;
      if (reserve(s, {&s->generated.back(), 1}, sl)) {
        groups.push_back(s);
        slots.push_back(std::move(sl));
        ++i;
        continue;
      }
      preempt(running.back());  // the newest; may be s itself, then the loop ends
    }
    // 2. admit waiting sequences (prompt + anything generated before a preemption)
    int64_t prefill = 0;
    while (!waiting.empty() && int64_t(running.size()) < cfg.max_seqs) {
      Seq* s = waiting.front();
      std::vector<int32_t> feed = s->req.prompt;
      feed.insert(feed.end(), s->generated.begin(), s->generated.end());
      if (prefill > 0 && prefill + int64_t(feed.size()) > cfg.max_batch_tokens) break;
      s->kv = kv.cache.add_sequence();
      std::vector<int64_t> sl;
      if (!reserve(s, feed, sl)) {
        kv.cache.free_sequence(s->kv);
        s->kv = -1;
        // submit() and the cache-full finish keep every feed within `capacity`, so an empty cache takes it.
        if (running.empty() && groups.empty() && prefill == 0)
          throw RuntimeError("Engine::step: request " + std::to_string(s->id) + "'s " + std::to_string(feed.size()) +
                             " tokens do not fit in an empty KV cache");
        break;
      }
      waiting.pop_front();
      running.push_back(s);
      groups.push_back(s);
      slots.push_back(std::move(sl));
      prefill += int64_t(feed.size());
    }
    if (groups.empty()) return !waiting.empty();
    // 3. the batch, grouped by sequence: its newest tokens at their positions
    std::vector<int32_t> toks, seq;
    std::vector<int64_t> pos, kvseqs;
    std::vector<uint8_t> want;
    kv.slots.clear();
    kv.qo_indptr.assign(1, 0);
    for (size_t g = 0; g < groups.size(); ++g) {
      Seq* s = groups[g];
      const int64_t n = int64_t(slots[g].size());
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = s->cached + j;
        const int64_t np = int64_t(s->req.prompt.size());
        toks.push_back(p < np ? s->req.prompt[size_t(p)] : s->generated[size_t(p - np)]);
        pos.push_back(p);
        seq.push_back(int32_t(g));
        want.push_back(j == n - 1);
      }
      kv.slots.insert(kv.slots.end(), slots[g].begin(), slots[g].end());
      kv.qo_indptr.push_back(int64_t(toks.size()));
      kvseqs.push_back(s->kv);
    }
    kv.pages = kv.cache.page_table(kvseqs);
    const int64_t V = model.config().n_vocab;
    logits.resize(size_t(int64_t(groups.size()) * V));
    model.forward({toks, pos, seq, want}, kv, logits.data());
    // 4. sample, stream, retire
    for (size_t g = 0; g < groups.size(); ++g) {
      Seq* s = groups[g];
      s->cached += int64_t(slots[g].size());
      const float* row = logits.data() + int64_t(g) * V;
      int32_t t = -1;
      // An undefined row (a NaN / +inf / all -inf logit) would make sample() throw mid-step, after other
      // sequences took their tokens: s ends with Finish::error instead, and the step goes on (engine.hpp).
      if (!std::isnan(sample_math::defined_max(row, V))) {
        sample(TensorView::matrix(row, DType::f32, 1, V), &s->req.sampling, nullptr, s->req.seed,
               uint64_t(s->generated.size()), &t);
        s->generated.push_back(t);
        s->out.tokens.push_back(t);
        if (tok && tok->is_eog(t)) s->out.finish = Finish::eos;
      } else {
        s->out.finish = Finish::error;
      }
      // A full cache has no slot for t even with s alone in it: t is s's last token (engine.hpp).
      const bool at_max = int64_t(s->generated.size()) >= s->req.max_tokens || s->cached >= capacity;
      std::string piece = text_of(s, t, s->out.finish != Finish::running || at_max);
      if (s->out.finish == Finish::running && at_max) s->out.finish = Finish::length;
      s->out.text += piece;
      if (on_event) on_event(Event{s->id, t, std::move(piece), s->out.finish});
      if (s->out.finish != Finish::running) {
        kv.cache.free_sequence(s->kv);
        s->kv = -1;
        running.erase(std::find(running.begin(), running.end(), s));
      }
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats.steps;
    // A mixed step's decode tokens go with its time, to prefill (engine.hpp).
    (prefill > 0 ? stats.prefill_tokens : stats.decode_tokens) += int64_t(toks.size());
    (prefill > 0 ? stats.prefill_seconds : stats.decode_seconds) += dt;
    return true;
  }
};

void forward_sequence(Model& model, const EngineConfig& kv_cfg, std::span<const int32_t> tokens, float* logits) {
  const int64_t T = int64_t(tokens.size());
  LLMK_CHECK_ARG(T > 0, "forward_sequence", "tokens", "(empty)", "must hold at least one token");
  EngineConfig c = kv_cfg;
  c.kv_tokens = T;
  PagedKv kv(kv_config(model, c, "forward_sequence"), model.config().n_head, model.config().d_head());
  const int64_t s = kv.cache.add_sequence();
  if (kv.cache.append(s, tokens, &kv.slots) != KvStatus::ok) throw RuntimeError("forward_sequence: KV cache too small");
  kv.qo_indptr = {0, T};
  kv.pages = kv.cache.page_table({&s, 1});
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = i;
  const std::vector<int32_t> seq(size_t(T), 0);
  model.forward({tokens, pos, seq, {}}, kv, logits);
}

Engine::Engine(Model& model, const Tokenizer* tokenizer, const EngineConfig& cfg) {
  LLMK_CHECK_ARG(cfg.max_seqs > 0, "Engine", "max_seqs", cfg.max_seqs, "must be > 0");
  LLMK_CHECK_ARG(cfg.max_batch_tokens > 0, "Engine", "max_batch_tokens", cfg.max_batch_tokens, "must be > 0");
  p_ = std::make_unique<Impl>(model, tokenizer, cfg);
}
Engine::~Engine() = default;

int64_t Engine::submit(Request r) {
  const int64_t V = p_->model.config().n_vocab;
  LLMK_CHECK_ARG(!r.prompt.empty(), "Engine::submit", "prompt", "(empty)", "must hold at least one token");
  for (int32_t t : r.prompt) LLMK_CHECK_ARG(t >= 0 && t < V, "Engine::submit", "prompt token", t, "must be in [0, n_vocab)");
  LLMK_CHECK_ARG(r.max_tokens >= 1, "Engine::submit", "max_tokens", r.max_tokens, "must be >= 1");
  LLMK_CHECK_ARG(r.stop.empty() || p_->tok, "Engine::submit", "stop", r.stop.size(), "stop strings need a tokenizer");
  for (const auto& s : r.stop) LLMK_CHECK_ARG(!s.empty(), "Engine::submit", "stop", "\"\"", "must not be empty");
  // The sampler's own check, here so a bad request is never queued (sample() would throw mid-step, after the
  // model ran).
  sample_math::check_params("Engine::submit", r.sampling, " (request.sampling)");
  const int64_t np = int64_t(r.prompt.size()), n_ctx = p_->model.config().n_ctx;
  LLMK_CHECK_ARG(np <= p_->capacity, "Engine::submit", "prompt", std::to_string(np) + " tokens",
                 "does not fit in the KV cache (kv_tokens = " + std::to_string(p_->cfg.kv_tokens) + ": " +
                     std::to_string(p_->capacity) + " token slots)");
  // Compared without forming the sum (max_tokens may be near INT64_MAX).
  LLMK_CHECK_ARG(p_->model.config().arch != Arch::gpt2 || (np <= n_ctx && r.max_tokens <= n_ctx - np),
                 "Engine::submit", "prompt + max_tokens",
                 std::to_string(np) + " + " + std::to_string(r.max_tokens),
                 "exceeds the model's learned positions (n_ctx = " + std::to_string(n_ctx) + ")");
  auto s = std::make_unique<Seq>();
  s->id = int64_t(p_->all.size());
  s->out.id = s->id;
  s->req = std::move(r);
  p_->waiting.push_back(s.get());
  p_->all.push_back(std::move(s));
  return p_->all.back()->id;
}

bool Engine::step(const std::function<void(const Event&)>& on_event) { return p_->step(on_event); }

std::vector<Output> Engine::run(const std::function<void(const Event&)>& on_event) {
  while (p_->step(on_event)) {
  }
  std::vector<Output> out;
  for (const auto& s : p_->all) out.push_back(s->out);
  return out;
}

const EngineStats& Engine::stats() const { return p_->stats; }
const EngineConfig& Engine::config() const { return p_->cfg; }

}  // namespace llmk
