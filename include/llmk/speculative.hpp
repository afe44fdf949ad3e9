// Draft-free speculative decoding: where the drafts come from and how much to draft.
//
// The engine (llmk/engine.hpp) asks a sequence's NgramDrafter for up to k
// tokens that may follow its tokens so far (prompt + generated), runs the
// newest token and the drafted ones as one multi-token step, and keeps the
// drafted tokens the sampler itself produces at their positions (greedy: the
// argmax; sampling: the token drawn with the (seed, step) it would use anyway),
// plus the sampler's token at the first mismatch. A token's logits do not
// depend on its batch, so the output (tokens, logprobs, text) is the same bits
// as plain decoding; speculation only changes how many steps it takes.
//
// Draft source: the longest n-gram (n from ngram_max down to ngram_min) ending
// the sequence that occurred earlier in it; the draft is what followed its most
// recent earlier occurrence, continued periodically past the end (a repeating
// run drafts its own next period). Draft length: starts at k_max; after a
// verify step, k = min(2k, k_max) when every drafted token was kept, else
// accepted + 1. Self-disable: each drafted token counts into a running
// acceptance rate (a window of the last `window` drafted tokens); while it is
// below min_accept, drafting pauses for `pause` tokens, doubling each time,
// so a request whose drafts keep failing (open chat) runs as plain decoding.
//
// Thread-safety: a drafter is used by one thread at a time.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llmk {

enum class SpecMode : uint8_t { off, ngram };
const char* spec_mode_name(SpecMode m);                                       // "off", "ngram"
SpecMode parse_spec_mode(std::string_view s, std::string_view arg = "spec");  // InvalidArgument naming arg

struct SpecConfig {
  SpecMode mode = SpecMode::off;
  int32_t k_max = 8;         // drafted tokens per step, at most; in [1, 64]
  int32_t ngram_max = 4;     // longest n-gram matched; in [ngram_min, 16]
  int32_t ngram_min = 2;     // shortest; >= 1
  float min_accept = 0.25f;  // pause drafting while the acceptance rate is below it; in [0, 1]
  int32_t window = 32;       // drafted tokens the acceptance rate is taken over; >= 1
  int32_t pause = 16;        // tokens the first pause lasts (doubling each time); >= 1
};
// InvalidArgument naming fn and the field (with `at` appended).
void validate(const SpecConfig& c, const char* fn, std::string_view at = "");

class NgramDrafter {
 public:
  explicit NgramDrafter(const SpecConfig& c);  // validates c
  // Feeds the sequence's next tokens (the prompt first, then each generated token).
  void push(std::span<const int32_t> tokens);
  void push(int32_t token) { push({&token, 1}); }
  // Drafts at most min(k(), limit) tokens that may follow the tokens pushed so far; empty when
  // nothing matches, while paused, or for limit <= 0. Counts a paused step toward the pause's end.
  std::vector<int32_t> draft(int64_t limit);
  // The verify step's result for the last non-empty draft: `accepted` of its `drafted` tokens kept.
  void feedback(int64_t drafted, int64_t accepted);
  int32_t k() const { return k_; }
  bool paused() const { return pause_left_ > 0; }
  const std::vector<int32_t>& tokens() const { return toks_; }

 private:
  SpecConfig c_;
  std::vector<int32_t> toks_;
  // per n - ngram_min: hash of the n-gram ending before position i -> the latest such i (< size)
  std::vector<std::unordered_map<uint64_t, int32_t>> index_;
  int32_t k_;
  std::vector<uint8_t> hist_;  // the last `window` drafted tokens: 1 kept, 0 rejected
  size_t hist_at_ = 0;
  int32_t kept_in_hist_ = 0;
  int64_t pause_left_ = 0, next_pause_;
};

}  // namespace llmk
