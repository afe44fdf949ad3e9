// The sampler (see llmk/sample.hpp): penalties on a copy of the row, then
// greedy, a full-row inverse-CDF draw, or a draw from softmax_topk's sorted
// top K. Without top-k, top-p / min-p start from K = 64 and double K until
// the kept prefix ends inside the K returned (or K = V), so the result is the
// same as with a full sort.
#include "llmk/sample.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "llmk/error.hpp"
#include "llmk/topk.hpp"

namespace llmk {
namespace {

void check_params(const char* fn, const SamplingParams& p, int64_t row) {
  const std::string at = " (row " + std::to_string(row) + ")";
  LLMK_CHECK_ARG(std::isfinite(p.temperature) && p.temperature >= 0, fn, "temperature" + at, p.temperature,
                 "must be finite and >= 0 (0 = greedy)");
  LLMK_CHECK_ARG(p.temperature == 0 || std::isfinite(1.0f / p.temperature), fn, "temperature" + at, p.temperature,
                 "1/T must be finite");
  LLMK_CHECK_ARG(p.top_k >= 0, fn, "top_k" + at, p.top_k, "must be >= 0 (0 = off)");
  LLMK_CHECK_ARG(p.top_p > 0 && p.top_p <= 1, fn, "top_p" + at, p.top_p, "must be in (0, 1]");
  LLMK_CHECK_ARG(p.min_p >= 0 && p.min_p < 1, fn, "min_p" + at, p.min_p, "must be in [0, 1)");
  LLMK_CHECK_ARG(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0, fn, "repetition_penalty" + at,
                 p.repetition_penalty, "must be finite and > 0 (1 = off)");
  LLMK_CHECK_ARG(std::isfinite(p.presence_penalty), fn, "presence_penalty" + at, p.presence_penalty,
                 "must be finite (0 = off)");
}

int32_t argmax(const float* z, int64_t v) {
  int64_t best = 0;
  for (int64_t j = 1; j < v; ++j)
    if (z[j] > z[best]) best = j;
  return int32_t(best);
}

// Inverse CDF over the whole row in index order; z is overwritten with the
// unnormalized probabilities (one exp per logit).
int32_t draw_full(float* z, int64_t v, float scale, double u) {
  float m = z[0];
  for (int64_t j = 1; j < v; ++j) m = std::max(m, z[j]);
  double s = 0;
  for (int64_t j = 0; j < v; ++j) s += z[j] = std::exp((z[j] - m) * scale);
  const double target = u * s;
  double c = 0;
  int64_t last = 0;
  for (int64_t j = 0; j < v; ++j) {
    if (z[j] > 0) last = j;
    c += z[j];
    if (c > target) return int32_t(j);
  }
  return int32_t(last);  // rounding left target at the very end
}

}  // namespace

int32_t sample_row(const float* logits, int64_t v, const SamplingParams& p, const TokenHistory& history, double u,
                   std::vector<float>& z) {
  const char* fn = "sample_row";
  LLMK_CHECK_ARG(logits != nullptr && v >= 1, fn, "v", v, "needs logits and V >= 1");
  LLMK_CHECK_ARG(u >= 0 && u < 1, fn, "u", u, "must be in [0, 1)");
  check_params(fn, p, 0);
  z.assign(logits, logits + v);
  for (int64_t i = 0; i < history.n; ++i)
    LLMK_CHECK_ARG(history.tokens[i] >= 0 && history.tokens[i] < v, fn, "history token", history.tokens[i],
                   "must be in [0, V)");
  if (history.n > 0 && (p.repetition_penalty != 1 || p.presence_penalty != 0)) {
    std::vector<int32_t> seen(history.tokens, history.tokens + history.n);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t t : seen) {
      float& x = z[t];
      x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
      x -= p.presence_penalty;
    }
  }
  float m = z[0];
  bool bad = false;
  for (int64_t j = 0; j < v; ++j) {
    bad |= std::isnan(z[j]) || z[j] == INFINITY;
    m = std::max(m, z[j]);
  }
  LLMK_CHECK_ARG(!bad && m > -INFINITY, fn, "logits", "a row with NaN / +inf or all -inf",
                 "softmax of the row must be defined");
  if (p.temperature == 0 || p.top_k == 1) return argmax(z.data(), v);
  const float scale = 1.0f / p.temperature;
  const int64_t k_cap = p.top_k > 0 ? std::min<int64_t>(p.top_k, v) : v;
  if (k_cap == v && p.top_p >= 1 && p.min_p <= 0) return draw_full(z.data(), v, scale, u);

  std::vector<float> probs;
  std::vector<int32_t> idx;
  for (int64_t k = p.top_k > 0 ? k_cap : std::min<int64_t>(64, v);; k = std::min(v, 2 * k)) {
    probs.resize(k);
    idx.resize(k);
    softmax_topk(TensorView::matrix(z.data(), DType::f32, 1, v), k, p.temperature,
                 {probs.data(), idx.data(), nullptr, nullptr});
    double mass = 0;  // top-k renormalizes over its k; otherwise the row's mass is 1
    for (int64_t j = 0; j < k; ++j) mass += probs[j];
    if (p.top_k == 0) mass = 1.0;
    int64_t n = k;
    bool decided = k == k_cap;
    if (p.top_p < 1) {
      double c = 0;
      for (int64_t j = 0; j < k; ++j) {
        c += probs[j] / mass;
        if (c >= p.top_p) {
          n = j + 1;
          decided = true;
          break;
        }
      }
    }
    if (p.min_p > 0) {
      const double floor = p.min_p * double(probs[0]);
      int64_t keep = k;
      while (keep > 1 && probs[keep - 1] < floor) --keep;
      if (keep < k) decided = true;
      n = std::min(n, keep);
    }
    if (!decided) continue;  // the kept prefix may extend past k: look further
    double total = 0;
    for (int64_t j = 0; j < n; ++j) total += probs[j];
    const double target = u * total;
    double c = 0;
    for (int64_t j = 0; j < n; ++j) {
      c += probs[j];
      if (c > target) return idx[j];
    }
    return idx[n - 1];
  }
}

void sample(const TensorView& logits, const SamplingParams* params, const TokenHistory* history, uint64_t seed,
            uint64_t step, int32_t* tokens) {
  const char* fn = "sample";
  LLMK_CHECK_ARG(logits.ndim == 2 && logits.dtype == DType::f32 && logits.device == Device::cpu, fn, "logits",
                 logits.describe(), "must be f32 [B, V] on the CPU");
  LLMK_CHECK_ARG(logits.cols() >= 1 && logits.cols() <= INT32_MAX, fn, "logits", logits.describe(),
                 "needs 1 <= V <= 2^31 - 1");
  LLMK_CHECK_ARG(params != nullptr, fn, "params", params, "must not be null");
  LLMK_CHECK_ARG(tokens != nullptr, fn, "tokens", tokens, "must not be null");
  const int64_t rows = logits.rows(), v = logits.cols();
  for (int64_t b = 0; b < rows; ++b) {
    check_params(fn, params[b], b);
    if (history) LLMK_CHECK_ARG(history[b].n == 0 || history[b].tokens, fn, "history", b, "tokens null with n > 0");
  }
  std::vector<float> scratch;
  for (int64_t b = 0; b < rows; ++b) {
    const float* row = logits.ptr<const float>() + b * logits.row_stride();
    try {
      tokens[b] = sample_row(row, v, params[b], history ? history[b] : TokenHistory{}, uniform01(seed, step, b),
                             scratch);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(e.what()) + " (sample: row " + std::to_string(b) + ")");
    }
  }
}

}  // namespace llmk
