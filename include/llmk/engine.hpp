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
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmk/kv_quant.hpp"
#include "llmk/model.hpp"
#include "llmk/sample.hpp"

namespace llmk {

class Tokenizer;

struct Request {
  std::vector<int32_t> prompt;     // >= 1 token
  int64_t max_tokens = 128;        // new tokens, >= 1
  SamplingParams sampling{0.0f};   // temperature 0: greedy
  uint64_t seed = 0;               // draw (seed, step) where step = tokens generated so far
  std::vector<std::string> stop;   // stop strings (need a tokenizer)
};

// length: max_tokens reached, or the sequence filled the whole KV cache (above).
// error: the model's logits for the sequence were undefined (a NaN or +inf,
// or all -inf: a broken model file, or overflow), so no token could be drawn;
// the request ends without one (its last Event has token -1), keeping what it
// produced before, and the other requests go on.
enum class Finish : uint8_t { running, eos, length, stop, error };
const char* finish_name(Finish f);

struct Event {        // one new token of one request
  int64_t id;         // submit() order
  int32_t token;      // -1 on a Finish::error event (no token could be drawn)
  std::string text;   // its complete UTF-8 text (held back across a split character or a possible stop string)
  Finish finish;      // != running on the request's last event
};

struct Output {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // generated tokens
  std::string text;
  Finish finish = Finish::running;
  int64_t preemptions = 0;
};

struct EngineConfig {
  KvType kv_type = KvType::f32;     // K's storage type, and V's unless kv_v_type is set
  std::optional<KvType> kv_v_type;  // V's type when it differs from K's (e.g. int4 rotated K, int8 V)
  bool kv_rotate = false;           // Hadamard-rotate K before it is stored (KvCacheConfig::k_rotate)
  int64_t block_tokens = 16;
  int64_t kv_tokens = 8192;         // cache capacity in tokens (rounded up to blocks): bounds a prompt and a sequence
  int64_t max_seqs = 64;            // sequences running at once
  int64_t max_batch_tokens = 1024;  // prefill tokens a step may admit (a longer prompt runs alone)
};

// A step's tokens and its time go to the same side, so tokens / seconds is a
// rate on either side: a step that prefills any prompt is a prefill step, and
// all its tokens count as prefill tokens, the decode tokens of the sequences
// already running included; a step of decode tokens only is a decode step.
// prefill_tokens + decode_tokens is every token the model was run on.
struct EngineStats {
  int64_t prefill_tokens = 0, decode_tokens = 0, preemptions = 0, steps = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

class Engine {
 public:
  // tokenizer: for text, end-of-generation tokens and stop strings; may be null
  // (then only max_tokens ends a request). Both must outlive the engine.
  Engine(Model& model, const Tokenizer* tokenizer, const EngineConfig& cfg);
  ~Engine();
  // InvalidArgument naming a bad field (sampling parameters as llmk::sample checks them, a prompt longer than
  // the cache's token slots); a rejected request changes nothing.
  int64_t submit(Request r);
  // One step; `on_event` sees every new token. Returns false when idle.
  bool step(const std::function<void(const Event&)>& on_event = {});
  // Runs until every submitted request is finished; outputs in submit order.
  std::vector<Output> run(const std::function<void(const Event&)>& on_event = {});
  const EngineStats& stats() const;
  const EngineConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

// Logits of every position of one sequence (positions 0..T-1) through a fresh
// paged cache with kv's storage types, rotation and block size (its capacity
// fields are ignored): logits [T, n_vocab]. For perplexity and for comparisons
// with other implementations.
void forward_sequence(Model& model, const EngineConfig& kv, std::span<const int32_t> tokens, float* logits);

}  // namespace llmk
