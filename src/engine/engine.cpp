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
#include <unordered_map>

#include "llmk/attention.hpp"
#include "llmk/error.hpp"
#include "llmk/kv_cache.hpp"
#include "llmk/sample.hpp"
#include "llmk/speculative.hpp"
#include "llmk/tokenizer.hpp"
#include "llmk/topk.hpp"

namespace llmk {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::running: return "running";
    case Finish::eos: return "eos";
    case Finish::length: return "length";
    case Finish::stop: return "stop";
    case Finish::error: return "error";
    case Finish::cancelled: return "cancelled";
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
  void attend(int64_t layer, const Batch& b, const float* q, float* out, int64_t window) override {
    AttentionOptions o;
    o.window = window;
    attention_prefill(q, qo_indptr.data(), cache.layer(layer), pages.view(), n_head_, scale_, out, o);
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
  LLMK_CHECK_ARG(int(c.kv_type) < kKvTypeCount, fn, "kv_type", int(c.kv_type), "must be a KvType");
  if (c.kv_v_type)
    LLMK_CHECK_ARG(int(*c.kv_v_type) < kKvTypeCount, fn, "kv_v_type", int(*c.kv_v_type), "must be a KvType");
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
  LLMK_CHECK_ARG(blocks < (int64_t(1) << 31) && !__builtin_mul_overflow(blocks, kv_block_bytes(k), &k.budget_bytes), fn,
                 "kv_tokens", c.kv_tokens,
                 "needs " + std::to_string(blocks) + " blocks of " + std::to_string(c.block_tokens) +
                     " tokens: the cache holds fewer than 2^31 blocks, of at most 2^63 bytes in all");
  validate(k, fn);
  return k;
}

struct Seq {
  int64_t id;
  Request req;
  std::vector<int32_t> generated;
  int64_t kv = -1;     // sequence in the cache, -1 while waiting
  int64_t cached = 0;  // tokens in the cache
  std::optional<StreamDecoder> dec;
  std::string full;       // text so far (cut at a stop string)
  size_t emitted = 0;     // bytes of `full` already sent
  bool admitted = false;  // admitted at least once (its prompt counted in the stats)
  bool cancel_requested = false;
  Output out;
  std::unique_ptr<NgramDrafter> drafter;        // while speculation is on for it (engine.hpp)
  std::vector<int32_t> draft;                   // this step's drafted tokens, after generated.back()
  std::unique_ptr<ConstraintState> constraint;  // Request::constraint's state for this request
};

}  // namespace

struct Engine::Impl {
  Model& model;
  const Tokenizer* tok;
  EngineConfig cfg;
  PagedKv kv;
  int64_t capacity;  // token slots in the cache: the most one sequence can hold
  std::deque<Seq*> waiting;
  std::vector<Seq*> running;                               // admission order
  std::unordered_map<int64_t, std::unique_ptr<Seq>> live;  // submitted, not finished
  std::vector<int64_t> cancels;                            // cancel() calls not yet applied
  std::vector<Output> done;                                // finished, not yet taken
  int64_t next_id = 0;
  EngineStats stats;
  std::vector<float> logits;
  std::vector<int32_t> history;
  std::vector<float> lp_probs;
  std::vector<int32_t> lp_index;
  std::vector<float> masked;  // a constrained row when its logprobs need the unmasked one

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
    s->draft.clear();
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

  void retire(Seq* s) {
    ++stats.finished;
    stats.cancelled += s->out.finish == Finish::cancelled;
    done.push_back(std::move(s->out));
    live.erase(s->id);
  }

  // Applies the pending cancel() calls: each such request ends now, with a last event.
  void apply_cancels(const std::function<void(const Event&)>& on_event) {
    std::vector<int64_t> ids;
    ids.swap(cancels);
    for (int64_t id : ids) {
      auto it = live.find(id);
      if (it == live.end()) continue;
      Seq* s = it->second.get();
      if (s->kv >= 0) {
        kv.cache.free_sequence(s->kv);
        s->kv = -1;
        running.erase(std::find(running.begin(), running.end(), s));
      } else {
        waiting.erase(std::find(waiting.begin(), waiting.end(), s));
      }
      s->out.finish = Finish::cancelled;
      if (on_event) on_event(Event{s->id, -1, {}, Finish::cancelled});
      retire(s);
    }
  }

  // The sampled token's log-probability and the top `n` alternatives at temperature 1 (engine.hpp).
  void logprobs_of(const float* row, int64_t V, int32_t t, int32_t n, Event& ev) {
    const int64_t k = std::max<int64_t>(n, 1);
    lp_probs.resize(size_t(k));
    lp_index.resize(size_t(k));
    float lse = 0;
    softmax_topk(TensorView::matrix(row, DType::f32, 1, V), k, 1.0f, {lp_probs.data(), lp_index.data(), nullptr, &lse});
    ev.logprob = row[t] - lse;
    for (int32_t j = 0; j < n; ++j) ev.top.push_back({lp_index[size_t(j)], row[lp_index[size_t(j)]] - lse});
  }

  // Fills s->draft for this step when speculation is on for s. The
  // draft leaves room for the sampler's token after it (max_tokens) and fits the cache.
  void draft_for(Seq* s) {
    if (s->req.spec.value_or(cfg.spec.mode) != SpecMode::ngram) return;
    if (!s->drafter) s->drafter = std::make_unique<NgramDrafter>(cfg.spec);
    NgramDrafter& d = *s->drafter;
    const size_t np = s->req.prompt.size();
    for (size_t i = d.tokens().size(); i < np + s->generated.size(); ++i)
      d.push(i < np ? s->req.prompt[i] : s->generated[i - np]);
    const int64_t limit = std::min(s->req.max_tokens - int64_t(s->generated.size()) - 1, capacity - s->cached - 1);
    s->draft = d.draft(limit);
  }

  bool step(const std::function<void(const Event&)>& on_event) {
    if (running.empty() && waiting.empty() && cancels.empty()) return false;
    apply_cancels(on_event);
    if (running.empty() && waiting.empty()) return true;
    const auto t0 = std::chrono::steady_clock::now();
    // 1. one slot per decoding sequence, preempting the newest on a shortage
    std::vector<Seq*> groups;
    std::vector<std::vector<int64_t>> slots;
    for (Seq* s : running) draft_for(s);
    for (size_t i = 0; i < running.size();) {
      Seq* s = running[i];
      std::vector<int64_t> sl;
      if (!s->draft.empty()) {  // a draft is dropped rather than preempt for it
        std::vector<int32_t> feed{s->generated.back()};
        feed.insert(feed.end(), s->draft.begin(), s->draft.end());
        if (reserve(s, feed, sl)) {
          groups.push_back(s);
          slots.push_back(std::move(sl));
          ++i;
          continue;
        }
        s->draft.clear();
      }
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
      s->kv = kv.cache.add_sequence();
      // The last token is always run: its logits give the next token.
      const int64_t reused = cfg.prefix_cache ? kv.cache.reuse_prefix(s->kv, {feed.data(), feed.size() - 1})
                                              : int64_t(0);
      const int64_t fresh = int64_t(feed.size()) - reused;
      std::vector<int64_t> sl;
      if ((prefill > 0 && prefill + fresh > cfg.max_batch_tokens) ||
          !reserve(s, std::span<const int32_t>(feed).subspan(size_t(reused)), sl)) {
        kv.cache.free_sequence(s->kv);
        s->kv = -1;
        if (prefill > 0 && prefill + fresh > cfg.max_batch_tokens) break;
        // submit() and the cache-full finish keep every feed within `capacity`, so an empty cache takes it.
        if (running.empty() && groups.empty() && prefill == 0)
          throw RuntimeError("Engine::step: request " + std::to_string(s->id) + "'s " + std::to_string(feed.size()) +
                             " tokens do not fit in an empty KV cache");
        break;
      }
      waiting.pop_front();
      s->cached = reused;
      stats.reused_tokens += reused;
      if (!s->admitted) {
        s->admitted = true;
        s->out.cached_tokens = reused;
        stats.prompt_tokens += int64_t(s->req.prompt.size());
        stats.cached_tokens += reused;
      }
      running.push_back(s);
      groups.push_back(s);
      slots.push_back(std::move(sl));
      prefill += fresh;
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
        const int64_t ng = int64_t(s->generated.size());
        toks.push_back(p < np        ? s->req.prompt[size_t(p)]
                       : p - np < ng ? s->generated[size_t(p - np)]
                                     : s->draft[size_t(p - np - ng)]);
        pos.push_back(p);
        seq.push_back(int32_t(g));
        want.push_back(j >= n - 1 - int64_t(s->draft.size()));  // the newest token's and the drafts' rows
      }
      kv.slots.insert(kv.slots.end(), slots[g].begin(), slots[g].end());
      kv.qo_indptr.push_back(int64_t(toks.size()));
      kvseqs.push_back(s->kv);
    }
    kv.pages = kv.cache.page_table(kvseqs);
    const int64_t V = model.config().n_vocab;
    logits.resize(size_t(std::count(want.begin(), want.end(), uint8_t(1)) * V));
    model.forward({toks, pos, seq, want}, kv, logits.data());
    // 4. sample, stream, retire; a draft's rows in order while the sampler draws the drafted token
    int64_t rows = 0;
    const int64_t generated_before = stats.generated_tokens;
    for (size_t g = 0; g < groups.size(); ++g) {
      Seq* s = groups[g];
      const int64_t c0 = s->cached, nd = int64_t(s->draft.size()), run = int64_t(slots[g].size()) - nd;
      int64_t j = 0;
      for (;; ++j) {
        s->cached = c0 + run + j;
        float* row = logits.data() + (rows + j) * V;
        int32_t t = -1;
        Event ev{s->id, -1, {}, Finish::running};
        // An undefined row (a NaN / +inf / all -inf logit) would make sample() throw mid-step, after other
        // sequences took their tokens: s ends with Finish::error instead, and the step goes on (engine.hpp).
        // The constraint's mask (-inf on disallowed tokens) goes on the row itself, or on a copy when
        // logprobs must see the unmasked logits (engine.hpp); a draft's row j sees the state after its
        // first j tokens were accepted.
        const float* sample_from = row;
        bool masked_ok = true;
        if (s->constraint && softmax_defined(row, V)) {
          float* m = row;
          if (s->req.logprobs >= 0) {
            masked.assign(row, row + V);
            m = masked.data();
          }
          try {
            s->constraint->mask(m, V);
          } catch (const InvalidArgument&) {
            masked_ok = false;
          }
          sample_from = m;
        }
        if (masked_ok && softmax_defined(sample_from, V)) {
          const SamplingParams& sp = s->req.sampling;
          TokenHistory h;  // the tokens the penalties see (engine.hpp, Request::sampling)
          if (sp.repetition_penalty != 1.0f || sp.presence_penalty != 0.0f) {
            history.clear();
            if (sp.repetition_penalty != 1.0f) history.assign(s->req.prompt.begin(), s->req.prompt.end());
            history.insert(history.end(), s->generated.begin(), s->generated.end());
            h = {history.data(), int64_t(history.size())};
          }
          sample(TensorView::matrix(sample_from, DType::f32, 1, V), &sp, &h, s->req.seed, uint64_t(s->generated.size()),
                 &t);
          if (s->req.logprobs >= 0) {
            logprobs_of(row, V, t, s->req.logprobs, ev);
            s->out.logprobs.push_back(ev.logprob);
            s->out.top.push_back(ev.top);
          }
          s->generated.push_back(t);
          s->out.tokens.push_back(t);
          ++stats.generated_tokens;
          if (tok && tok->is_eog(t) && !s->req.ignore_eos) s->out.finish = Finish::eos;
          if (s->constraint) {
            s->constraint->accept(t);
            if (s->out.finish == Finish::running && s->constraint->done()) s->out.finish = Finish::stop;
          }
        } else {
          s->out.finish = Finish::error;
        }
        // A full cache has no slot for t even with s alone in it: t is s's last token (engine.hpp).
        const bool at_max = int64_t(s->generated.size()) >= s->req.max_tokens || s->cached >= capacity;
        std::string piece = text_of(s, t, s->out.finish != Finish::running || at_max);
        if (s->out.finish == Finish::running && at_max) s->out.finish = Finish::length;
        s->out.text += piece;
        ev.token = t;
        ev.text = std::move(piece);
        ev.finish = s->out.finish;
        if (on_event) on_event(ev);
        if (s->out.finish != Finish::running || j == nd || t != s->draft[size_t(j)]) break;
      }
      rows += nd + 1;
      if (nd > 0) {  // j of the nd drafted tokens kept; the cache drops the rest
        ++stats.verifies;
        stats.drafted_tokens += nd;
        stats.accepted_tokens += j;
        s->drafter->feedback(nd, j);
        if (s->out.finish == Finish::running && j < nd) kv.cache.rollback(s->kv, s->cached);
        s->draft.clear();
      }
      if (s->out.finish != Finish::running) {
        kv.cache.free_sequence(s->kv);
        s->kv = -1;
        running.erase(std::find(running.begin(), running.end(), s));
        retire(s);
      }
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats.steps;
    // A mixed step's decode tokens go with its time, to prefill (engine.hpp).
    (prefill > 0 ? stats.prefill_tokens : stats.decode_tokens) += int64_t(toks.size());
    (prefill > 0 ? stats.prefill_seconds : stats.decode_seconds) += dt;
    if (prefill == 0) stats.decode_generated += stats.generated_tokens - generated_before;
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
  validate(cfg.spec, "Engine");
  p_ = std::make_unique<Impl>(model, tokenizer, cfg);
}
Engine::~Engine() = default;

void Engine::check(const Request& r) const {
  const int64_t V = p_->model.config().n_vocab;
  LLMK_CHECK_ARG(!r.prompt.empty(), "Engine::submit", "prompt", "(empty)", "must hold at least one token");
  for (int32_t t : r.prompt)
    LLMK_CHECK_ARG(t >= 0 && t < V, "Engine::submit", "prompt token", t, "must be in [0, n_vocab)");
  LLMK_CHECK_ARG(r.max_tokens >= 1, "Engine::submit", "max_tokens", r.max_tokens, "must be >= 1");
  LLMK_CHECK_ARG(r.stop.empty() || p_->tok, "Engine::submit", "stop", r.stop.size(), "stop strings need a tokenizer");
  for (const auto& s : r.stop) LLMK_CHECK_ARG(!s.empty(), "Engine::submit", "stop", "\"\"", "must not be empty");
  LLMK_CHECK_ARG(r.logprobs >= -1 && r.logprobs <= kMaxLogprobs && r.logprobs < V, "Engine::submit", "logprobs",
                 r.logprobs, "must be in [-1, " + std::to_string(kMaxLogprobs) + "] and < n_vocab");
  // The sampler's own check, here so a bad request is never queued (sample() would throw mid-step, after the
  // model ran).
  validate(r.sampling, "Engine::submit", " (request.sampling)");
  if (r.spec)
    LLMK_CHECK_ARG(*r.spec == SpecMode::off || *r.spec == SpecMode::ngram, "Engine::submit", "spec", int(*r.spec),
                   "must be SpecMode::off or SpecMode::ngram");
  const int64_t np = int64_t(r.prompt.size()), n_ctx = p_->model.config().n_ctx;
  LLMK_CHECK_ARG(np <= p_->capacity, "Engine::submit", "prompt", std::to_string(np) + " tokens",
                 "does not fit in the KV cache (kv_tokens = " + std::to_string(p_->cfg.kv_tokens) + ": " +
                     std::to_string(p_->capacity) + " token slots)");
  // Compared without forming the sum (max_tokens may be near INT64_MAX).
  LLMK_CHECK_ARG(p_->model.config().arch != Arch::gpt2 || (np <= n_ctx && r.max_tokens <= n_ctx - np), "Engine::submit",
                 "prompt + max_tokens", std::to_string(np) + " + " + std::to_string(r.max_tokens),
                 "exceeds the model's learned positions (n_ctx = " + std::to_string(n_ctx) + ")");
}

int64_t Engine::submit(Request r) {
  check(r);
  auto s = std::make_unique<Seq>();
  s->id = p_->next_id++;
  s->out.id = s->id;
  s->out.prompt_tokens = int64_t(r.prompt.size());
  s->req = std::move(r);
  if (s->req.constraint) s->constraint = s->req.constraint->start();
  p_->waiting.push_back(s.get());
  p_->live.emplace(s->id, std::move(s));
  return p_->next_id - 1;
}

void Engine::cancel(int64_t id) {
  LLMK_CHECK_ARG(id >= 0 && id < p_->next_id, "Engine::cancel", "id", id,
                 "was never returned by submit() (ids are 0.." + std::to_string(p_->next_id - 1) + ")");
  auto it = p_->live.find(id);
  if (it == p_->live.end() || it->second->cancel_requested) return;
  it->second->cancel_requested = true;
  p_->cancels.push_back(id);
}

bool Engine::step(const std::function<void(const Event&)>& on_event) { return p_->step(on_event); }

std::vector<Output> Engine::run(const std::function<void(const Event&)>& on_event) {
  while (p_->step(on_event)) {
  }
  std::vector<Output> out = take_finished();
  std::sort(out.begin(), out.end(), [](const Output& a, const Output& b) { return a.id < b.id; });
  return out;
}

std::vector<Output> Engine::take_finished() {
  std::vector<Output> out;
  out.swap(p_->done);
  return out;
}
KvStats Engine::kv_stats() const { return p_->kv.cache.manager().stats(); }
int64_t Engine::waiting() const { return int64_t(p_->waiting.size()); }
int64_t Engine::running() const { return int64_t(p_->running.size()); }

const EngineStats& Engine::stats() const { return p_->stats; }
const EngineConfig& Engine::config() const { return p_->cfg; }

// --- AsyncEngine (engine.hpp, "Thread model") ---

std::vector<Event> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait_for(lk, timeout, [&] { return !events_.empty() || out_.has_value(); });
  std::vector<Event> r(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return r;
}
bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lk(m_);
  return out_.has_value();
}
std::optional<Output> RequestStream::output() const {
  std::lock_guard<std::mutex> lk(m_);
  return out_;
}
void RequestStream::push(std::vector<Event>& evs, std::optional<Output> out) {
  {
    std::lock_guard<std::mutex> lk(m_);
    for (Event& e : evs) events_.push_back(std::move(e));
    if (out) out_ = std::move(out);
  }
  cv_.notify_all();
}

AsyncEngine::AsyncEngine(Model& model, const Tokenizer* tokenizer, const EngineConfig& cfg, int64_t max_queue)
    : engine_(model, tokenizer, cfg), max_queue_(max_queue) {
  LLMK_CHECK_ARG(max_queue >= 1, "AsyncEngine", "max_queue", max_queue, "must be >= 1");
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  stop();
  thread_.join();
}

std::shared_ptr<RequestStream> AsyncEngine::submit(Request r, Refused* why) {
  engine_.check(r);
  std::lock_guard<std::mutex> lk(m_);
  *why = Refused::none;
  if (stopping_) {
    *why = Refused::stopped;
    return nullptr;
  }
  if (in_flight_ - status_.running >= max_queue_) {
    *why = Refused::queue_full;
    return nullptr;
  }
  std::shared_ptr<RequestStream> st(new RequestStream(next_id_++));
  cmds_.push_back(Cmd{st, st->id(), std::move(r)});
  ++in_flight_;
  wake_.notify_one();
  return st;
}

void AsyncEngine::cancel(int64_t id) {
  std::lock_guard<std::mutex> lk(m_);
  cmds_.push_back(Cmd{nullptr, id, {}});
  wake_.notify_one();
}

void AsyncEngine::stop() {
  std::lock_guard<std::mutex> lk(m_);
  stopping_ = true;
  wake_.notify_one();
}

void AsyncEngine::wait_idle() {
  std::unique_lock<std::mutex> lk(m_);
  idle_.wait(lk, [&] { return in_flight_ == 0 && delivering_ == 0; });
}

AsyncEngineStatus AsyncEngine::status() const {
  std::lock_guard<std::mutex> lk(m_);
  AsyncEngineStatus s = status_;
  s.in_flight = in_flight_;
  s.queued = std::max<int64_t>(0, in_flight_ - s.running);
  return s;
}

// The stepping thread: the only one that touches engine_.
void AsyncEngine::loop() {
  std::unordered_map<int64_t, int64_t> engine_id;                       // stream id -> engine id
  std::unordered_map<int64_t, std::shared_ptr<RequestStream>> streams;  // engine id -> stream
  for (;;) {
    std::deque<Cmd> cmds;
    bool stopping;
    {
      std::unique_lock<std::mutex> lk(m_);
      const bool busy = !streams.empty();
      wake_.wait(lk, [&] { return busy || stopping_ || !cmds_.empty(); });
      if (stopping_ && streams.empty() && cmds_.empty()) return;
      cmds.swap(cmds_);
      stopping = stopping_;
    }
    int64_t ended = 0;  // requests finished outside a step
    for (Cmd& c : cmds) {
      if (!c.stream) {
        auto it = engine_id.find(c.id);
        if (it != engine_id.end()) engine_.cancel(it->second);
        continue;
      }
      try {
        const int64_t eid = engine_.submit(std::move(c.req));
        engine_id[c.stream->id()] = eid;
        streams[eid] = c.stream;
      } catch (const std::exception&) {  // check() passed on the caller's thread, so this is not expected
        std::vector<Event> ev{Event{c.stream->id(), -1, {}, Finish::error}};
        Output o;
        o.id = c.stream->id();
        o.finish = Finish::error;
        c.stream->push(ev, std::move(o));
        ++ended;
      }
    }
    if (stopping)
      for (const auto& kv : streams) engine_.cancel(kv.first);
    std::unordered_map<int64_t, std::vector<Event>> evs;
    std::vector<Output> done;
    try {
      engine_.step([&](const Event& e) { evs[e.id].push_back(e); });
      done = engine_.take_finished();
    } catch (const std::exception&) {
      // A step that throws leaves the engine unusable: every request ends with an error, and no more are taken.
      for (auto& kv : streams) {
        Output o;
        o.id = kv.first;
        o.finish = Finish::error;
        done.push_back(o);
        evs[kv.first].push_back(Event{kv.first, -1, {}, Finish::error});
      }
      std::lock_guard<std::mutex> lk(m_);
      stopping_ = true;
    }
    for (const Output& o : done) ended += streams.count(o.id) ? 1 : 0;
    {  // before the streams hear of it: a client that saw its last event finds its request gone from
       // the status and from in_flight_, so an immediate next submit() is not refused as queue_full
      std::lock_guard<std::mutex> lk(m_);
      status_.stats = engine_.stats();
      status_.kv = engine_.kv_stats();
      status_.running = engine_.running();
      in_flight_ -= ended;
      delivering_ += ended;
    }
    std::unordered_map<int64_t, Output*> out_of;
    for (Output& o : done) out_of[o.id] = &o;
    for (auto& kv : evs) {
      auto st = streams.find(kv.first);
      if (st == streams.end()) continue;
      auto o = out_of.find(kv.first);
      std::optional<Output> out;
      if (o != out_of.end()) out = std::move(*o->second);
      for (Event& e : kv.second) e.id = st->second->id();
      if (out) out->id = st->second->id();
      st->second->push(kv.second, std::move(out));
    }
    for (const Output& o : done) {
      auto st = streams.find(o.id);
      if (st == streams.end()) continue;
      engine_id.erase(st->second->id());
      streams.erase(st);
    }
    std::lock_guard<std::mutex> lk(m_);
    delivering_ -= ended;
    if (in_flight_ == 0 && delivering_ == 0) idle_.notify_all();
  }
}

}  // namespace llmk
