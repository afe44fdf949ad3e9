// The generation engine: many requests over one Model and one paged KV cache.
//
// Each step() builds one batch: every running sequence contributes its last
// sampled token (decode) and newly admitted sequences their whole prompt
// (prefill), grouped by sequence, so prompts of different lengths prefill
// together while others decode (continuous batching: requests submitted at
// any time join at the next step). The model runs once on the batch, one
// token is sampled per sequence (llmk::sample: temperature 0 = greedy), and a
// sequence finishes on an end-of-generation token, at max_tokens, when its
// text contains a stop string (the text is cut before it), or when it fills the
// whole KV cache: a token sampled when prompt + earlier tokens take every slot
// of the cache has no slot even with the sequence alone, so it is the last one
// (Finish::length, fewer than max_tokens tokens).
// KV memory: before a step, every decoding sequence needs room for one more
// token; when the cache's blocks run out, the most recently admitted sequence
// is preempted: its blocks are freed and it goes back to the front of the
// queue with prompt + generated tokens, to be recomputed (prefilled) when room
// frees up. Nothing it produced is lost, and since a token's logits do not
// depend on its batch (matmul.hpp, attention.hpp), greedy output is the same
// bits as running each request alone.
// Prefix caching (EngineConfig::prefix_cache, on by default): a sequence being
// admitted first attaches the longest run of cached full KV blocks holding its
// first tokens (KvBlockManager::reuse_prefix: blocks that any earlier or
// running request filled, a shared system prompt, earlier chat turns, a
// retried request), all but its last token, and runs the model on the rest
// only. A cached token's K/V are the bits a cold prefill would store (the
// kernels are batch-invariant), so a request's tokens are the same bits with
// or without reuse, for every KV type and with rotation.
// Speculative decoding (EngineConfig::spec, Request::spec; llmk/speculative.hpp):
// a decoding sequence may append up to k drafted tokens after its newest one;
// the step runs them as its rows and keeps the longest run of them the sampler
// draws itself, plus the sampler's next token, so a step emits 1..k+1 tokens.
// The rejected drafts' KV slots are rolled back (KvCache::rollback). Output is
// the same bits as with speculation off, so it only changes speed.
// Thread-safety: an Engine is used from one thread at a time, except
// check(), which only reads the configuration. AsyncEngine (below) runs one
// on its own thread for callers on other threads.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmk/constraint.hpp"
#include "llmk/kv_cache.hpp"
#include "llmk/kv_quant.hpp"
#include "llmk/model.hpp"
#include "llmk/sample.hpp"
#include "llmk/speculative.hpp"

namespace llmk {

class Tokenizer;

struct Request {
  std::vector<int32_t> prompt;  // >= 1 token
  int64_t max_tokens = 128;     // new tokens, >= 1
  // temperature 0: greedy. The penalties see the generated tokens, and the
  // prompt's too when repetition_penalty != 1 (presence: OpenAI's and vLLM's
  // rule; repetition: Hugging Face's and vLLM's).
  SamplingParams sampling{0.0f};
  uint64_t seed = 0;              // draw (seed, step) where step = tokens generated so far
  std::vector<std::string> stop;  // stop strings (need a tokenizer)
  // -1: off. 0..kMaxLogprobs: each Event carries the sampled token's
  // log-probability and the `logprobs` most likely tokens with theirs. These are
  // log softmax of the model's logits at temperature 1, before penalties and
  // before top-k / top-p / min-p (as vLLM returns them by default), so they do
  // not depend on the sampling parameters.
  int32_t logprobs = -1;
  bool ignore_eos = false;  // an end-of-generation token does not end the request (benchmarks)
  // Speculative decoding for this request (off or ngram); unset: EngineConfig::spec.mode.
  std::optional<SpecMode> spec;
  // Structured output (llmk/constraint.hpp, llmk/grammar.hpp): null = none. Each request gets its own
  // state (Constraint::start); its mask sets disallowed logits to -inf before sampling, and the request
  // ends with Finish::stop once the constraint is done(). Logprobs are those of the unmasked logits.
  std::shared_ptr<const Constraint> constraint;
};
inline constexpr int32_t kMaxLogprobs = 20;

struct TokenLogprob {
  int32_t token;
  float logprob;  // logit - log-sum-exp of the row, f32
};

// length: max_tokens reached, or the sequence filled the whole KV cache (above).
// error: the model's logits for the sequence were undefined (a NaN or +inf,
// or all -inf: a broken model file, or overflow), so no token could be drawn;
// the request ends without one (its last Event has token -1), keeping what it
// produced before, and the other requests go on.
// cancelled: Engine::cancel(); its last Event has token -1 and no text.
enum class Finish : uint8_t { running, eos, length, stop, error, cancelled };
const char* finish_name(Finish f);

struct Event {        // one new token of one request
  int64_t id;         // submit() order (RequestStream::id() for AsyncEngine's events)
  int32_t token;      // -1 on a Finish::error (no token could be drawn) or Finish::cancelled event
  std::string text;   // its complete UTF-8 text (held back across a split character or a possible stop string)
  Finish finish;      // != running on the request's last event
  float logprob = 0;  // the token's log-probability when Request::logprobs >= 0 (0 on a token -1 event)
  std::vector<TokenLogprob> top{};  // Request::logprobs most likely tokens, descending (ties: lower id first)
};

struct Output {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // generated tokens
  std::string text;
  Finish finish = Finish::running;
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;                   // prompt tokens taken from the prefix cache at the first admission
  std::vector<float> logprobs;                 // [tokens] when Request::logprobs >= 0, else empty
  std::vector<std::vector<TokenLogprob>> top;  // [tokens] likewise
};

struct EngineConfig {
  KvType kv_type = KvType::f32;     // K's storage type, and V's unless kv_v_type is set
  std::optional<KvType> kv_v_type;  // V's type when it differs from K's (e.g. int4 rotated K, int8 V)
  bool kv_rotate = false;           // Hadamard-rotate K before it is stored (KvCacheConfig::k_rotate)
  int64_t block_tokens = 16;
  int64_t kv_tokens = 8192;         // cache capacity in tokens (rounded up to blocks): bounds a prompt and a sequence
  int64_t max_seqs = 64;            // sequences running at once
  int64_t max_batch_tokens = 1024;  // prefill tokens a step may admit (a longer prompt runs alone)
  bool prefix_cache = true;         // reuse cached full KV blocks of a new sequence's prefix (above)
  SpecConfig spec;                  // speculative decoding (above); mode off by default
};

// A step's tokens and its time go to the same side, so tokens / seconds is a
// rate on either side: a step that prefills any prompt is a prefill step, and
// all its tokens count as prefill tokens, the decode tokens of the sequences
// already running included; a step of decode tokens only is a decode step.
// prefill_tokens + decode_tokens is every token the model was run on.
// prompt_tokens: prompts of requests admitted for the first time; cached_tokens:
// those of them taken from the prefix cache (cached_tokens / prompt_tokens is the
// hit rate); reused_tokens: tokens taken from the prefix cache at any admission,
// re-admissions after a preemption included. generated_tokens: tokens sampled.
// Speculation: verifies counts the sequences' steps that ran a draft, drafted_tokens
// their drafted tokens (counted among the tokens run too), accepted_tokens those kept;
// decode_generated: tokens sampled in decode steps (decode_tokens less rejected drafts).
struct EngineStats {
  int64_t prefill_tokens = 0, decode_tokens = 0, preemptions = 0, steps = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  int64_t verifies = 0, drafted_tokens = 0, accepted_tokens = 0, decode_generated = 0;
  int64_t finished = 0, cancelled = 0;
};

class Engine {
 public:
  // tokenizer: for text, end-of-generation tokens and stop strings; may be null
  // (then only max_tokens ends a request). Both must outlive the engine.
  Engine(Model& model, const Tokenizer* tokenizer, const EngineConfig& cfg);
  ~Engine();
  // InvalidArgument naming a bad field (sampling parameters as llmk::sample checks them, a prompt longer than
  // the cache's token slots, logprobs outside [-1, kMaxLogprobs]); a rejected request changes nothing.
  // Ids count up from 0 in submit order.
  int64_t submit(Request r);
  // Throws what submit() would for `r`, and nothing else; reads only the
  // configuration, so it may run on any thread while another steps.
  void check(const Request& r) const;
  // Ends request `id` at the next step with Finish::cancelled (a waiting one
  // without running it): its blocks are freed (full ones stay in the prefix
  // cache) and its last Event has token -1. The other requests are not
  // affected. A finished id is a no-op; an id never returned by submit() is
  // InvalidArgument.
  void cancel(int64_t id);
  // One step; `on_event` sees every new token. Returns false when idle.
  bool step(const std::function<void(const Event&)>& on_event = {});
  // Runs until every submitted request is finished; the outputs of the
  // requests not yet taken, in submit order.
  std::vector<Output> run(const std::function<void(const Event&)>& on_event = {});
  // The outputs of the requests finished since the last take_finished() or
  // run(), in finish order; the engine keeps nothing of them afterwards (a
  // long-running caller calls it to bound memory).
  std::vector<Output> take_finished();
  const EngineStats& stats() const;
  const EngineConfig& config() const;
  KvStats kv_stats() const;
  int64_t waiting() const;  // submitted, not running (never admitted, or preempted)
  int64_t running() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

// Thread model: AsyncEngine owns an Engine and the one thread that steps it.
// Any other thread (an HTTP handler) only
//  - submit()s: the request is checked on the caller's thread
//    (Engine::check: bad fields throw InvalidArgument there), given an id, and
//    put on a command queue; the stepping thread moves queued commands into the
//    Engine between steps and sleeps while there is no work;
//  - cancel()s by id, through the same queue (applied at the next step);
//  - reads its request's events from the RequestStream submit() returned:
//    the stepping thread appends each step's events (and, with the last one, the
//    request's Output) under the stream's own lock and wakes its reader.
// Every member function of AsyncEngine and RequestStream may be called from
// any thread. The Engine is touched by the stepping thread only, so its
// results are those of a single-threaded run of the same commands.
class RequestStream {
 public:
  int64_t id() const { return id_; }
  // Waits until an event is queued, the request is finished or `timeout`
  // passes; returns the queued events (possibly none) in order. The last event
  // of a request has finish != running; after it, output() is set.
  std::vector<Event> wait(std::chrono::milliseconds timeout);
  bool finished() const;
  std::optional<Output> output() const;

 private:
  friend class AsyncEngine;
  explicit RequestStream(int64_t id) : id_(id) {}
  void push(std::vector<Event>& evs, std::optional<Output> out);
  int64_t id_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::optional<Output> out_;
};

struct AsyncEngineStatus {  // a snapshot taken after the latest step
  EngineStats stats;
  KvStats kv;
  int64_t in_flight = 0;  // accepted, not yet finished
  int64_t running = 0;    // of those, holding a KV sequence
  int64_t queued = 0;     // in_flight - running
};

class AsyncEngine {
 public:
  // max_queue: submit() refuses (queue_full) while max_queue accepted requests
  // are not running; >= 1. Starts the stepping thread.
  AsyncEngine(Model& model, const Tokenizer* tokenizer, const EngineConfig& cfg, int64_t max_queue);
  // stop(), then waits for the stepping thread.
  ~AsyncEngine();
  enum class Refused { none, queue_full, stopped };
  // The request's stream, or null with *why set (queue full, or after stop()).
  // A bad request throws InvalidArgument (Engine::check) and is not queued.
  std::shared_ptr<RequestStream> submit(Request r, Refused* why);
  // Ends request `id` (RequestStream::id) with Finish::cancelled unless it has
  // finished; an unknown id is ignored.
  void cancel(int64_t id);
  // Refuses new requests and cancels every accepted one; each stream still gets
  // its final event. Returns at once; the destructor (or wait_idle()) waits.
  void stop();
  // Blocks until no accepted request is in flight and every stream has its final event.
  void wait_idle();
  AsyncEngineStatus status() const;
  const EngineConfig& config() const { return engine_.config(); }

 private:
  void loop();
  struct Cmd {
    std::shared_ptr<RequestStream> stream;  // null: a cancel of `id`
    int64_t id;
    Request req;
  };
  Engine engine_;
  const int64_t max_queue_;
  mutable std::mutex m_;
  std::condition_variable wake_, idle_;
  std::deque<Cmd> cmds_;
  bool stopping_ = false;
  int64_t delivering_ = 0;  // finished (no longer in_flight_) but their final events not yet pushed
  int64_t next_id_ = 0, in_flight_ = 0;
  AsyncEngineStatus status_;
  std::thread thread_;  // last: starts after every member above is built
};

// Logits of every position of one sequence (positions 0..T-1) through a fresh
// paged cache with kv's storage types, rotation and block size (its capacity
// fields are ignored): logits [T, n_vocab]. For perplexity and for comparisons
// with other implementations.
void forward_sequence(Model& model, const EngineConfig& kv, std::span<const int32_t> tokens, float* logits);

}  // namespace llmk
