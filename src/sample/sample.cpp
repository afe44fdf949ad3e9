// The sampler on the CPU (see llmk/sample.hpp): penalties on a copy of the
// row, then greedy, a full-row inverse-CDF draw, or a draw from
// softmax_topk's sorted top K, all through the shared arithmetic of
// sample_math.hpp (the GPU path, sample.cu, calls the same functions). Also
// the host half of the GPU path: argument checks shared with sample.cu and
// the launch plan (sample_cuda_plan), which needs no CUDA to build or test.
#include "llmk/sample.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/constants.hpp"
#include "llmk/error.hpp"
#include "llmk/topk.hpp"
#include "sample/sample_math.hpp"

namespace llmk {
namespace sample_math {

std::string row_at(int64_t row) { return " (row " + std::to_string(row) + ")"; }

}  // namespace sample_math

void validate(const SamplingParams& p, const char* fn, const std::string& at) {
  LLMK_CHECK_ARG(std::isfinite(p.temperature) && p.temperature >= 0, fn, "temperature" + at, p.temperature,
                 "must be finite and >= 0 (0 = greedy)");
  LLMK_CHECK_ARG(p.temperature == 0 || std::isfinite((1.0f / p.temperature) * kLog2e), fn, "temperature" + at,
                 p.temperature, "log2(e)/T must be finite in f32 (softmax_topk's scale)");
  LLMK_CHECK_ARG(p.top_k >= 0, fn, "top_k" + at, p.top_k, "must be >= 0 (0 = off)");
  LLMK_CHECK_ARG(p.top_p > 0 && p.top_p <= 1, fn, "top_p" + at, p.top_p, "must be in (0, 1]");
  LLMK_CHECK_ARG(p.min_p >= 0 && p.min_p < 1, fn, "min_p" + at, p.min_p, "must be in [0, 1)");
  LLMK_CHECK_ARG(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0, fn, "repetition_penalty" + at,
                 p.repetition_penalty, "must be finite and > 0 (1 = off)");
  LLMK_CHECK_ARG(std::isfinite(p.presence_penalty), fn, "presence_penalty" + at, p.presence_penalty,
                 "must be finite (0 = off)");
}

bool softmax_defined(const float* logits, int64_t v) {
  LLMK_CHECK_ARG(v >= 0, "softmax_defined", "v", v, "must be >= 0");
  LLMK_CHECK_ARG(v == 0 || logits != nullptr, "softmax_defined", "logits", logits, "must not be null when v > 0");
  return !std::isnan(sample_math::defined_max(logits, v));
}

namespace {

// A row's history where it enters the API: n >= 0 and, when n > 0, tokens to read.
void check_history(const char* fn, const TokenHistory& h, int64_t row) {
  const std::string at = sample_math::row_at(row);
  LLMK_CHECK_ARG(h.n >= 0, fn, "history.n" + at, h.n, "must be >= 0");
  LLMK_CHECK_ARG(h.n == 0 || h.tokens != nullptr, fn, "history.tokens" + at, h.tokens, "null with n > 0");
}

int32_t argmax(const float* z, int64_t v) {
  int64_t best = 0;
  for (int64_t j = 1; j < v; ++j)
    if (z[j] > z[best]) best = j;
  return int32_t(best);
}

}  // namespace

int32_t sample_row(const float* logits, int64_t v, const SamplingParams& p, const TokenHistory& history, double u,
                   std::vector<float>& z) {
  const char* fn = "sample_row";
  LLMK_CHECK_ARG(v >= 1 && v <= INT32_MAX, fn, "v", v, "needs 1 <= V <= 2^31 - 1");
  LLMK_CHECK_ARG(logits != nullptr, fn, "logits", logits, "must not be null");
  LLMK_CHECK_ARG(u >= 0 && u < 1, fn, "u", u, "must be in [0, 1)");
  validate(p, fn, sample_math::row_at(0));
  check_history(fn, history, 0);
  z.assign(logits, logits + v);
  for (int64_t i = 0; i < history.n; ++i)
    LLMK_CHECK_ARG(history.tokens[i] >= 0 && history.tokens[i] < v, fn, "history token", history.tokens[i],
                   "must be in [0, V)");
  if (history.n > 0 && (p.repetition_penalty != 1 || p.presence_penalty != 0)) {
    std::vector<int32_t> seen(history.tokens, history.tokens + history.n);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t t : seen) z[t] = sample_math::penalize(z[t], p.repetition_penalty, p.presence_penalty);
  }
  const float m = sample_math::defined_max(z.data(), v);
  LLMK_CHECK_ARG(!std::isnan(m), fn, "logits", "a row with NaN / +inf or all -inf",
                 "softmax of the row must be defined");
  const sample_math::RowPlan plan = sample_math::plan_row(p, v);
  if (plan.mode == sample_math::kGreedy) return argmax(z.data(), v);
  if (plan.mode == sample_math::kFull) {
    const float scale = 1.0f / p.temperature;
    double sums[kSampleFullChunks];
    for (int c = 0; c < kSampleFullChunks; ++c)
      sums[c] = sample_math::full_chunk_sum(z.data(), sample_math::full_chunk_begin(v, c),
                                            sample_math::full_chunk_begin(v, c + 1), m, scale);
    return sample_math::full_pick(z.data(), v, sums, m, scale, u);
  }
  std::vector<float> probs(plan.k);
  std::vector<int32_t> idx(plan.k);
  softmax_topk(TensorView::matrix(z.data(), DType::f32, 1, v), plan.k, p.temperature,
               {probs.data(), idx.data(), nullptr, nullptr});
  return sample_math::select_sorted(probs.data(), idx.data(), plan.k, plan.top_k_on, p.top_p, p.min_p, u);
}

void sample(const TensorView& logits, const SamplingParams* params, const TokenHistory* history, uint64_t seed,
            uint64_t step, int32_t* tokens) {
  const char* fn = "sample";
  // Row b is read at data + b * row_stride, its V elements consecutive (as softmax_topk's view).
  LLMK_CHECK_ARG(logits.ndim == 2 && logits.dtype == DType::f32 && logits.device == Device::cpu, fn, "logits",
                 logits.describe(), "must be f32 [B, V] on the CPU");
  check_rows_view(fn, "logits", logits);
  LLMK_CHECK_ARG(reinterpret_cast<uintptr_t>(logits.data) % alignof(float) == 0, fn, "logits", logits.describe(),
                 "data must be 4-byte aligned");
  const int64_t rows = logits.rows(), v = logits.cols();
  LLMK_CHECK_ARG(rows == 0 || params != nullptr, fn, "params", params, "must not be null");
  LLMK_CHECK_ARG(rows == 0 || tokens != nullptr, fn, "tokens", tokens, "must not be null");
  for (int64_t b = 0; b < rows; ++b) {
    validate(params[b], fn, sample_math::row_at(b));
    if (history) check_history(fn, history[b], b);
  }
  // tokens is the one output: it may not lie in anything still read.
  const int64_t tbytes = rows * int64_t(sizeof(int32_t));
  LLMK_CHECK_ARG(!views_overlap(TensorView::vector(tokens, DType::i32, rows), logits), fn, "tokens", tokens,
                 "must not overlap the logits " + logits.describe());
  LLMK_CHECK_ARG(!ranges_overlap(tokens, tbytes, params, rows * int64_t(sizeof(SamplingParams))), fn, "tokens", tokens,
                 "must not overlap the params");
  for (int64_t b = 0; history && b < rows; ++b)
    LLMK_CHECK_ARG(!ranges_overlap(tokens, tbytes, history[b].tokens, history[b].n * int64_t(sizeof(int32_t))), fn,
                   "tokens", tokens, "must not overlap the history of row " + std::to_string(b));
  // A row can still fail (undefined softmax, a history token outside [0, V)): the tokens are kept here until
  // every row has its own, so a failed call writes none.
  std::vector<int32_t> picked(static_cast<size_t>(rows));
  std::vector<float> scratch;
  for (int64_t b = 0; b < rows; ++b) {
    const float* row = logits.ptr<const float>() + b * logits.row_stride();
    try {
      picked[size_t(b)] = sample_row(row, v, params[b], history ? history[b] : TokenHistory{}, uniform01(seed, step, b),
                                     scratch);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(e.what()) + " (sample: row " + std::to_string(b) + ")");
    }
  }
  std::copy(picked.begin(), picked.end(), tokens);
}

SampleCudaPlan sample_cuda_plan(const SamplingParams* params, int64_t rows, int64_t v) {
  SampleCudaPlan plan;
  bool free_t = false;  // the last run holds only greedy rows so far: any temperature joins it
  for (int64_t b = 0; b < rows; ++b) {
    const SamplingParams& p = params[b];
    const sample_math::RowPlan rp = sample_math::plan_row(p, v);
    plan.penalties |= p.repetition_penalty != 1 || p.presence_penalty != 0;
    if (rp.mode == sample_math::kFull) {
      plan.full = true;
      continue;
    }
    plan.k = std::max<int64_t>(plan.k, rp.k);
    const bool greedy = rp.mode == sample_math::kGreedy;
    if (!plan.topk_runs.empty() && (greedy || free_t || plan.run_temperature.back() == p.temperature)) {
      plan.topk_runs.back().second = b + 1;  // full-row rows in between ride along (their outputs go unused)
      if (!greedy && free_t) plan.run_temperature.back() = p.temperature;
      free_t = free_t && greedy;
      continue;
    }
    plan.topk_runs.push_back({b, b + 1});
    plan.run_temperature.push_back(greedy ? 1.0f : p.temperature);
    free_t = greedy;
  }
  return plan;
}

#ifndef LLMK_HAVE_CUDA
void sample_cuda(const TensorView& logits, const SamplingParams*, const DeviceTokenHistory&, uint64_t, uint64_t,
                 int32_t*, Stream, const SampleCudaOptions&) {
  LLMK_CHECK_ARG(false, "sample_cuda", "logits", logits.describe(), "this llmk was built without CUDA");
}
void penalize_cuda(const TensorView& logits, const SamplingParams*, const DeviceTokenHistory&, const TensorView&,
                   int32_t*, Stream) {
  LLMK_CHECK_ARG(false, "penalize_cuda", "logits", logits.describe(), "this llmk was built without CUDA");
}
#endif

}  // namespace llmk
