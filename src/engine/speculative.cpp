// The n-gram drafter of speculative decoding (llmk/speculative.hpp).
#include "llmk/speculative.hpp"

#include <algorithm>
#include <string>

#include "llmk/error.hpp"

namespace llmk {

const char* spec_mode_name(SpecMode m) { return m == SpecMode::ngram ? "ngram" : "off"; }

SpecMode parse_spec_mode(std::string_view s, std::string_view arg) {
  if (s == "off") return SpecMode::off;
  if (s == "ngram") return SpecMode::ngram;
  LLMK_CHECK_ARG(false, "parse_spec_mode", std::string(arg), std::string(s), "must be off or ngram");
  return SpecMode::off;
}

void validate(const SpecConfig& c, const char* fn, std::string_view at) {
  const std::string a(at);
  LLMK_CHECK_ARG(c.mode == SpecMode::off || c.mode == SpecMode::ngram, fn, "spec.mode" + a, int(c.mode),
                 "must be off or ngram");
  LLMK_CHECK_ARG(c.k_max >= 1 && c.k_max <= 64, fn, "spec.k_max" + a, c.k_max, "must be in [1, 64]");
  LLMK_CHECK_ARG(c.ngram_min >= 1, fn, "spec.ngram_min" + a, c.ngram_min, "must be >= 1");
  LLMK_CHECK_ARG(c.ngram_max >= c.ngram_min && c.ngram_max <= 16, fn, "spec.ngram_max" + a, c.ngram_max,
                 "must be in [ngram_min, 16]");
  LLMK_CHECK_ARG(c.min_accept >= 0.0f && c.min_accept <= 1.0f, fn, "spec.min_accept" + a, c.min_accept,
                 "must be in [0, 1]");
  LLMK_CHECK_ARG(c.window >= 1, fn, "spec.window" + a, c.window, "must be >= 1");
  LLMK_CHECK_ARG(c.pause >= 1, fn, "spec.pause" + a, c.pause, "must be >= 1");
}

namespace {
uint64_t ngram_hash(const int32_t* t, int64_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ uint64_t(n);
  for (int64_t i = 0; i < n; ++i) {
    h ^= uint32_t(t[i]) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}
}  // namespace

NgramDrafter::NgramDrafter(const SpecConfig& c) : c_(c), k_(c.k_max), next_pause_(c.pause) {
  validate(c, "NgramDrafter");
  index_.resize(size_t(c.ngram_max - c.ngram_min + 1));
  hist_.reserve(size_t(c.window));
}

void NgramDrafter::push(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    const int64_t L = int64_t(toks_.size());  // t's position: the n-grams ending at L - 1 now have a continuation
    for (int32_t n = c_.ngram_min; n <= c_.ngram_max && n <= L; ++n)
      index_[size_t(n - c_.ngram_min)][ngram_hash(toks_.data() + L - n, n)] = int32_t(L);
    toks_.push_back(t);
  }
}

std::vector<int32_t> NgramDrafter::draft(int64_t limit) {
  std::vector<int32_t> out;
  if (pause_left_ > 0) {
    --pause_left_;
    return out;
  }
  const int64_t m = std::min<int64_t>(k_, limit), S = int64_t(toks_.size());
  if (m <= 0) return out;
  for (int32_t n = std::min<int32_t>(c_.ngram_max, int32_t(std::min<int64_t>(S, 16))); n >= c_.ngram_min; --n) {
    const int32_t* suffix = toks_.data() + S - n;
    const auto& idx = index_[size_t(n - c_.ngram_min)];
    const auto it = idx.find(ngram_hash(suffix, n));
    if (it == idx.end()) continue;
    const int64_t i = it->second;  // toks_[i - n, i) is an earlier occurrence of the suffix (i < S)
    if (!std::equal(suffix, suffix + n, toks_.data() + i - n)) continue;  // a hash collision
    for (int64_t j = 0; j < m; ++j) out.push_back(i + j < S ? toks_[size_t(i + j)] : out[size_t(i + j - S)]);
    return out;
  }
  return out;
}

void NgramDrafter::feedback(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  k_ = accepted >= drafted ? std::min(2 * k_, c_.k_max) : int32_t(std::max<int64_t>(1, accepted + 1));
  for (int64_t j = 0; j < drafted; ++j) {
    const uint8_t kept = j < accepted;
    if (hist_.size() < size_t(c_.window)) {
      hist_.push_back(kept);
    } else {
      kept_in_hist_ -= hist_[hist_at_];
      hist_[hist_at_] = kept;
      hist_at_ = (hist_at_ + 1) % hist_.size();
    }
    kept_in_hist_ += kept;
  }
  // Judged over at least min(window, 8) drafted tokens, so one unlucky draft does not pause a request.
  const size_t enough = size_t(std::min(c_.window, 8));
  if (hist_.size() >= enough && float(kept_in_hist_) < c_.min_accept * float(hist_.size())) {
    pause_left_ = next_pause_;
    next_pause_ = std::min<int64_t>(next_pause_ * 2, int64_t(1) << 30);
    hist_.clear();
    hist_at_ = 0;
    kept_in_hist_ = 0;
    k_ = c_.k_max;
  }
}

}  // namespace llmk
