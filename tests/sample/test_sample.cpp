// The sampler: Philox known answers, greedy, penalties, exact frequencies
// under stratified u, chi-square over Philox draws against the exact
// renormalized distribution (computed here in double with a full sort: the
// oracle), the batch API, and bad arguments. Also the shared per-row
// arithmetic the GPU runs too (sample_math.hpp: select_sorted, full_pick, the
// 1024 cap) and the GPU launch plan (sample_cuda_plan), which are host code.
#include <algorithm>
#include <numeric>

#include "llmk/parallel.hpp"
#include "llmk/sample.hpp"
#include "sample/sample_math.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {
namespace {

// The oracle: the distribution sample_row draws from, in double.
std::vector<double> exact_distribution(const std::vector<float>& logits, const SamplingParams& p,
                                       const std::vector<int32_t>& hist) {
  const int64_t v = int64_t(logits.size());
  std::vector<double> z(logits.begin(), logits.end()), q(v, 0.0);
  std::vector<int32_t> seen = hist;
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) {
    z[t] = float(z[t] > 0 ? float(z[t]) / p.repetition_penalty : float(z[t]) * p.repetition_penalty);
    z[t] = float(z[t]) - p.presence_penalty;
  }
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  if (p.temperature == 0 || p.top_k == 1) {
    q[order[0]] = 1;
    return q;
  }
  const double scale = double(1.0f / p.temperature);
  std::vector<double> e(v);
  double s = 0;
  for (int64_t j = 0; j < v; ++j) s += e[j] = std::exp((z[order[j]] - z[order[0]]) * scale);
  // top-k is on for 0 < top_k < V; with it off, top-p / min-p see the 1024 most probable (the cap).
  const bool top_k_on = p.top_k > 0 && p.top_k < v;
  int64_t n = top_k_on ? p.top_k : (p.top_p < 1 || p.min_p > 0) ? std::min<int64_t>(kSampleTopkCap, v) : v;
  double mass = 0;
  for (int64_t j = 0; j < n; ++j) mass += e[j];
  if (!top_k_on) mass = s;
  if (p.top_p < 1) {
    double c = 0;
    for (int64_t j = 0; j < n; ++j)
      if ((c += e[j] / mass) >= p.top_p) {
        n = j + 1;
        break;
      }
  }
  while (n > 1 && e[n - 1] < p.min_p * e[0]) --n;
  double total = 0;
  for (int64_t j = 0; j < n; ++j) total += e[j];
  for (int64_t j = 0; j < n; ++j) q[order[j]] = e[j] / total;
  return q;
}

struct ThreadScope {
  int prev = num_threads();
  explicit ThreadScope(int n) { set_num_threads(n); }
  ~ThreadScope() { set_num_threads(prev); }
};

std::vector<float> some_logits(int64_t v, uint64_t seed, double stddev = 1.5) {
  std::vector<float> x(v);
  fill_normal(x.data(), v, seed, 0.0, stddev);
  return x;
}

// Random123's known-answer vectors for philox4x32_10.
TEST(Sample, PhiloxKnownAnswers) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint32_t o[4];
    philox4x32_10(k.ctr, k.key, o);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(o[i], k.out[i]) << i;
  }
  const double u = uniform01(1, 2, 3);
  EXPECT_TRUE(u >= 0 && u < 1);
  EXPECT_EQ(u, uniform01(1, 2, 3));
  EXPECT_NE(u, uniform01(1, 2, 4));
  EXPECT_NE(u, uniform01(1, 3, 3));
  EXPECT_NE(u, uniform01(2, 2, 3));
}

TEST(Sample, GreedyAndTies) {
  std::vector<float> x = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  std::vector<float> scratch;
  SamplingParams g;
  g.temperature = 0;
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(sample_row(x.data(), 5, g, {}, u, scratch), 1);  // tie 1 vs 3
  SamplingParams k1;
  k1.top_k = 1;
  EXPECT_EQ(sample_row(x.data(), 5, k1, {}, 0.9, scratch), 1);
  // Penalties move the argmax: token 1 seen twice counts once.
  SamplingParams pen = g;
  pen.repetition_penalty = 2.0f;  // 3 -> 1.5
  const int32_t h[] = {1, 1};
  EXPECT_EQ(sample_row(x.data(), 5, pen, {h, 2}, 0.0, scratch), 3);
  pen.repetition_penalty = 1.0f;
  pen.presence_penalty = 0.75f;  // token 1: 3 - 0.75 = 2.25, below token 3's 3
  EXPECT_EQ(sample_row(x.data(), 5, pen, {h, 2}, 0.0, scratch), 3);
}

const SamplingParams kCases[] = {
    {1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f},    // full distribution
    {0.7f, 5, 1.0f, 0.0f, 1.0f, 0.0f},    // temperature + top-k
    {1.0f, 0, 0.8f, 0.0f, 1.0f, 0.0f},    // top-p
    {1.2f, 0, 1.0f, 0.1f, 1.0f, 0.0f},    // min-p
    {1.0f, 10, 0.9f, 0.05f, 1.3f, 0.4f},  // everything, with penalties
};

// Stratified u_i = (i + 0.5) / N: inverse-CDF sampling hits token t exactly
// floor/ceil of N * q_t times (each CDF interval of length q_t holds N q_t +- 1
// of the u_i). V = 49152, the engine's vocabulary; the oracle sorts it fully.
TEST(Sample, StratifiedFrequenciesExact) {
  const int64_t v = 49152, n = 1000;
  ThreadScope one(1);  // many tiny calls: keep them off the thread pool (tests/topk covers threads)
  const auto x = some_logits(v, 42, 3.0);
  std::vector<int32_t> hist = {5, 17, 17, 40000};
  hist.push_back(int32_t(std::max_element(x.begin(), x.end()) - x.begin()));
  std::vector<float> scratch;
  for (const SamplingParams& p : kCases) {
    const auto q = exact_distribution(x, p, hist);
    std::vector<int64_t> count(v, 0);
    for (int64_t i = 0; i < n; ++i)
      ++count[sample_row(x.data(), v, p, {hist.data(), int64_t(hist.size())}, (i + 0.5) / n, scratch)];
    for (int64_t t = 0; t < v; ++t) {
      if (q[t] == 0) {
        ASSERT_EQ(count[t], 0) << "token " << t << " outside the kept set, T " << p.temperature;
        continue;
      }
      // +-1 for the interval, +1 for f32 probabilities moving a boundary past one u_i.
      ASSERT_LE(std::fabs(count[t] - n * q[t]), 2.0) << "token " << t << " q " << q[t] << " T " << p.temperature;
    }
  }
}

// Chi-square over Philox draws. Critical value for df degrees of freedom at
// false-alarm probability 1e-6 by Wilson-Hilferty:
// chi2 ~= df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3 with z = 4.753 (the
// standard normal's 1 - 1e-6 quantile). Seeds are fixed, so this is a
// deterministic test that a wrong distribution cannot pass.
TEST(Sample, ChiSquareAgainstExactDistribution) {
  const int64_t v = 40, draws = 40000;
  ThreadScope one(1);
  const auto x = some_logits(v, 7);
  const std::vector<int32_t> hist = {3, 3, 9};
  std::vector<float> scratch;
  int c = 0;
  for (const SamplingParams& p : kCases) {
    const auto q = exact_distribution(x, p, hist);
    std::vector<int64_t> count(v, 0);
    for (int64_t i = 0; i < draws; ++i)
      ++count[sample_row(x.data(), v, p, {hist.data(), 3}, uniform01(1234 + c, uint64_t(i), 0), scratch)];
    ++c;
    // Tokens expected fewer than 5 times share one bin (the chi-square approximation needs e >= 5).
    double chi2 = 0, rest_e = 0, rest_n = 0;
    int bins = 0;
    for (int64_t t = 0; t < v; ++t) {
      if (q[t] == 0) {
        EXPECT_EQ(count[t], 0) << t;
        continue;
      }
      const double e = draws * q[t];
      if (e < 5) {
        rest_e += e;
        rest_n += count[t];
        continue;
      }
      chi2 += (count[t] - e) * (count[t] - e) / e;
      ++bins;
    }
    if (rest_e > 0) {
      chi2 += (rest_n - rest_e) * (rest_n - rest_e) / rest_e;
      ++bins;
    }
    if (bins < 2) continue;
    const double df = bins - 1, z = 4.753;
    const double crit = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
    EXPECT_LT(chi2, crit) << "bins " << bins << " T " << p.temperature << " top_k " << p.top_k;
  }
}

TEST(Sample, BatchApiMatchesRows) {
  const int64_t rows = 3, v = 1000, ld = 1024;
  std::vector<float> x(rows * ld);
  fill_normal(x.data(), x.size(), 3);
  const SamplingParams params[rows] = {kCases[0], kCases[2], kCases[4]};
  const int32_t h1[] = {1, 2, 3};
  const TokenHistory hist[rows] = {{}, {h1, 3}, {h1, 2}};
  int32_t tok[rows], again[rows];
  const auto view = TensorView::matrix(x.data(), DType::f32, rows, v, ld);
  sample(view, params, hist, 99, 7, tok);
  sample(view, params, hist, 99, 7, again);
  std::vector<float> scratch;
  for (int64_t b = 0; b < rows; ++b) {
    EXPECT_EQ(tok[b], again[b]);
    EXPECT_EQ(tok[b], sample_row(x.data() + b * ld, v, params[b], hist[b], uniform01(99, 7, b), scratch));
  }
}

TEST(Sample, BadArguments) {
  std::vector<float> x = {1, 2, 3};
  std::vector<float> scratch;
  auto msg = [&](SamplingParams p, const TokenHistory& h = {}) -> std::string {
    try {
      sample_row(x.data(), 3, p, h, 0.5, scratch);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(msg(p).find("temperature"), std::string::npos);
  p.temperature = 3e-39f;  // 1/T is finite, log2(e)/T is not
  EXPECT_NE(msg(p).find("log2(e)/T"), std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_NE(msg(p).find("top_p"), std::string::npos);
  p = {};
  p.min_p = 1;
  EXPECT_NE(msg(p).find("min_p"), std::string::npos);
  p = {};
  p.top_k = -2;
  EXPECT_NE(msg(p).find("top_k"), std::string::npos);
  p = {};
  p.repetition_penalty = 0;
  EXPECT_NE(msg(p).find("repetition_penalty"), std::string::npos);
  const int32_t bad[] = {3};
  EXPECT_NE(msg({}, {bad, 1}).find("history token"), std::string::npos);
  x[1] = NAN;
  EXPECT_NE(msg({}).find("softmax of the row"), std::string::npos);
  int32_t tok[1];
  const SamplingParams one[1] = {};
  EXPECT_THROW(sample(TensorView::matrix(x.data(), DType::f32, 1, 3), one, nullptr, 0, 0, tok), InvalidArgument);
  EXPECT_THROW(sample(TensorView::matrix(x.data(), DType::f16, 1, 3), one, nullptr, 0, 0, tok), InvalidArgument);
}

// validate() is the check sample(), sample_cuda() and Engine::submit run on each
// SamplingParams: the error names the function, the field with its suffix, and the value.
TEST(Sample, ValidateNamesFieldAndValue) {
  auto msg = [](const SamplingParams& p, const char* fn, const std::string& at) -> std::string {
    try {
      validate(p, fn, at);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(msg({}, "f", " (row 3)"), "no error");
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(msg(p, "f", " (row 3)"), "llmk::f: argument 'top_p (row 3)' = 1.5: must be in (0, 1]");
  p = {};
  p.presence_penalty = INFINITY;
  EXPECT_EQ(msg(p, "Engine::submit", ""),
            "llmk::Engine::submit: argument 'presence_penalty' = inf: must be finite (0 = off)");
  p = {};
  p.min_p = -0.5f;
  EXPECT_THROW(validate(p), InvalidArgument);
}

// softmax_defined() is sample()'s condition on a row (after penalties): no NaN, no +inf, not all -inf.
TEST(Sample, SoftmaxDefined) {
  std::vector<float> x = {-INFINITY, 1, 2};
  EXPECT_TRUE(softmax_defined(x.data(), 3));
  EXPECT_TRUE(softmax_defined(x.data() + 1, 1));
  EXPECT_FALSE(softmax_defined(x.data(), 1));  // every logit -inf
  EXPECT_FALSE(softmax_defined(x.data(), 0));
  x[2] = INFINITY;
  EXPECT_FALSE(softmax_defined(x.data(), 3));
  x[2] = NAN;
  EXPECT_FALSE(softmax_defined(x.data(), 3));
  std::vector<float> scratch;
  EXPECT_THROW(sample_row(x.data(), 3, {}, {}, 0.5, scratch), InvalidArgument);
  EXPECT_THROW(softmax_defined(x.data(), -1), InvalidArgument);
  EXPECT_THROW(softmax_defined(nullptr, 2), InvalidArgument);
  EXPECT_FALSE(softmax_defined(nullptr, 0));
}

// sample() reads row b at data + b * row_stride, elements contiguous: every
// view that breaks that is named as 'logits' before any row is read (a
// negative row stride would read far outside the buffer; negative rows or null
// data must not return without a token or be reported under another name).
TEST(Sample, LogitsViewIsChecked) {
  std::vector<float> x = {0, 9, 1, 9, 2, 9, 3, 9};
  const SamplingParams greedy[2] = {{0.0f}, {0.0f}};
  int32_t tok[2] = {-7, -7};
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  auto expect = [&](const TensorView& v, std::initializer_list<const char*> pieces) {
    const std::string m = msg([&] { sample(v, greedy, nullptr, 0, 0, tok); });
    for (const char* piece : pieces) EXPECT_NE(m.find(piece), std::string::npos) << m << " lacks " << piece;
    EXPECT_EQ(tok[0], -7) << m;
  };
  TensorView strided = TensorView::matrix(x.data(), DType::f32, 1, 4);
  strided.stride[1] = 2;  // greedy on the elements 0, 1, 2, 3 is token 3; read as contiguous it was 1
  expect(strided, {"llmk::sample", "'logits'", "stride[1] 2", "contiguous"});
  TensorView negative_stride = TensorView::matrix(x.data(), DType::f32, 2, 4);
  negative_stride.stride[0] = -100;
  expect(negative_stride, {"'logits'", "row_stride -100", "row stride must be >= V"});
  TensorView negative_rows = TensorView::matrix(x.data(), DType::f32, 1, 4);
  negative_rows.shape[0] = -3;
  expect(negative_rows, {"'logits'", "f32[-3, 4]"});
  expect(TensorView::matrix(nullptr, DType::f32, 2, 4), {"'logits'", "data is null"});
  expect(TensorView::matrix(reinterpret_cast<char*>(x.data()) + 1, DType::f32, 1, 4), {"'logits'", "aligned"});
  // One column: its stride is never used.
  TensorView col = TensorView::matrix(x.data(), DType::f32, 2, 1, 4);
  col.stride[1] = 3;
  sample(col, greedy, nullptr, 0, 0, tok);
  EXPECT_EQ(tok[0], 0);
  EXPECT_EQ(tok[1], 0);
  // sample_row names a null row as 'logits', a bad V as 'v'.
  std::vector<float> scratch;
  EXPECT_NE(msg([&] { sample_row(nullptr, 8, {}, {}, 0.5, scratch); }).find("'logits'"), std::string::npos);
  EXPECT_NE(msg([&] { sample_row(x.data(), 0, {}, {}, 0.5, scratch); }).find("'v' = 0"), std::string::npos);
}

// tokens is written row by row while later rows (and their histories and
// params) are still read: tokens inside them is named, and nothing is written.
TEST(Sample, TokensMustNotOverlapInputs) {
  std::vector<float> x(8, 0.0f);
  x[1] = 1;  // row 0's greedy token is 1: written over x[4], a nonzero denormal
  x[6] = 1;  // row 1's greedy token is 2
  const SamplingParams greedy[2] = {{0.0f}, {0.0f}};
  const auto view = TensorView::matrix(x.data(), DType::f32, 2, 4);
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  int32_t* in_row1 = reinterpret_cast<int32_t*>(x.data() + 4);
  const std::string m = msg([&] { sample(view, greedy, nullptr, 0, 0, in_row1); });
  EXPECT_NE(m.find("'tokens'"), std::string::npos) << m;
  EXPECT_NE(m.find("must not overlap the logits"), std::string::npos) << m;
  EXPECT_EQ(x[4], 0.0f) << "a rejected call wrote a token into the logits";
  std::vector<int32_t> hist = {1, 1, 1, 1};
  const TokenHistory h[2] = {{hist.data(), 2}, {hist.data() + 2, 2}};
  EXPECT_NE(msg([&] { sample(view, greedy, h, 0, 0, hist.data() + 1); }).find("must not overlap the history of row 0"),
            std::string::npos);
  EXPECT_EQ(hist[1], 1);
  SamplingParams params[3] = {{0.0f}, {0.0f}, {0.0f}};
  EXPECT_NE(msg([&] {
              sample(view, params, nullptr, 0, 0, reinterpret_cast<int32_t*>(&params[1]));
            }).find("must not overlap the params"),
            std::string::npos);
  int32_t tok[2];
  sample(view, greedy, h, 0, 0, tok);  // separate buffers: fine
  EXPECT_EQ(tok[1], 2);
}

// A history's n and tokens are checked where a TokenHistory enters the API:
// a null tokens with n > 0 would read address 0, and n < 0 is not ignored.
TEST(Sample, HistoryMustBeWellFormed) {
  std::vector<float> x = {1, 2, 3};
  std::vector<float> scratch;
  const int32_t t[1] = {0};
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  const std::string null_tokens = msg([&] { sample_row(x.data(), 3, {}, {nullptr, 3}, 0.5, scratch); });
  EXPECT_NE(null_tokens.find("'history.tokens (row 0)'"), std::string::npos) << null_tokens;
  const std::string negative = msg([&] { sample_row(x.data(), 3, {}, {t, -1}, 0.5, scratch); });
  EXPECT_NE(negative.find("'history.n (row 0)' = -1"), std::string::npos) << negative;
  const SamplingParams one[2] = {};
  const TokenHistory h[2] = {{t, 1}, {t, -2}};
  int32_t tok[2] = {-7, -7};
  const std::string batch = msg([&] { sample(TensorView::matrix(x.data(), DType::f32, 2, 1), one, h, 0, 0, tok); });
  EXPECT_NE(batch.find("'history.n (row 1)' = -2"), std::string::npos) << batch;
  EXPECT_EQ(tok[0], -7);
  EXPECT_EQ(sample_row(x.data(), 3, {0.0f}, {nullptr, 0}, 0.5, scratch), 2);  // no history: fine
}

// A row that fails after earlier rows were sampled (NaN logits, a history
// token outside [0, V)) leaves every token as it was: a failed call writes nothing.
TEST(Sample, FailedBatchWritesNoToken) {
  std::vector<float> x = {1, 2, 3, NAN, 0, 0};
  const SamplingParams params[2] = {};
  int32_t tok[2] = {-7, -7};
  EXPECT_THROW(sample(TensorView::matrix(x.data(), DType::f32, 2, 3), params, nullptr, 0, 0, tok), InvalidArgument);
  EXPECT_EQ(tok[0], -7);
  x[3] = 0;
  const int32_t bad[1] = {5};
  const TokenHistory h[2] = {{}, {bad, 1}};
  EXPECT_THROW(sample(TensorView::matrix(x.data(), DType::f32, 2, 3), params, h, 0, 0, tok), InvalidArgument);
  EXPECT_EQ(tok[0], -7);
}

// No rows: no tokens, and no params or tokens buffer needed (an empty batch's
// vectors may hand over null; that was "'params' = 0: must not be null").
TEST(Sample, EmptyBatchNeedsNoBuffers) {
  const float x[4] = {};
  EXPECT_NO_THROW(sample(TensorView::matrix(x, DType::f32, 0, 4), nullptr, nullptr, 0, 0, nullptr));
  EXPECT_THROW(sample(TensorView::matrix(x, DType::f32, 1, 4), nullptr, nullptr, 0, 0, nullptr), InvalidArgument);
}

// select_sorted on hand-made candidates: each rule's cut, renormalization and
// the inverse CDF, checked against values worked out here.
TEST(SampleMath, SelectSortedRules) {
  const float q[] = {0.5f, 0.25f, 0.125f, 0.125f};
  const int32_t id[] = {40, 10, 30, 20};
  using sample_math::select_sorted;
  // No cut: target = u * 1; cumulative 0.5, 0.75, 0.875, 1.
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.0f, 0.0), 40);
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.0f, 0.49), 40);
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.0f, 0.5), 10);  // c > target is strict
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.0f, 0.8), 30);
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.0f, 0.9), 20);
  // top-p 0.75: the prefix {0.5, 0.25} reaches it; renormalized to {2/3, 1/3}.
  EXPECT_EQ(select_sorted(q, id, 4, false, 0.75f, 0.0f, 0.66), 40);
  EXPECT_EQ(select_sorted(q, id, 4, false, 0.75f, 0.0f, 0.67), 10);
  EXPECT_EQ(select_sorted(q, id, 4, false, 0.75f, 0.0f, 0.99), 10);
  // top-k on over the first 2 (mass 0.75): top-p 0.6 keeps 1 since 0.5 / 0.75 >= 0.6.
  EXPECT_EQ(select_sorted(q, id, 2, true, 0.6f, 0.0f, 0.99), 40);
  EXPECT_EQ(select_sorted(q, id, 2, false, 0.6f, 0.0f, 0.99), 10);  // top-k off: 0.5 < 0.6, 0.75 >= 0.6
  // min-p 0.3: floor 0.15 keeps {0.5, 0.25}; min-p 0.2: floor 0.1 keeps all.
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.3f, 0.99), 10);
  EXPECT_EQ(select_sorted(q, id, 4, false, 1.0f, 0.2f, 0.99), 20);
  // Greedy is k = 1.
  EXPECT_EQ(select_sorted(q, id, 1, true, 1.0f, 0.0f, 0.999), 40);
  // Zero-probability tail (fewer finite logits than K): never drawn, even at the largest u.
  const float z[] = {0.75f, 0.25f, 0.0f, 0.0f};
  EXPECT_EQ(select_sorted(z, id, 4, true, 1.0f, 0.0f, 1.0 - 0x1p-53), 10);
}

// full_pick against the exact distribution by stratified u, on rows with
// empty chunks (V < 256), -inf logits and sizes straddling 1024.
TEST(SampleMath, FullPickStratifiedFrequencies) {
  for (int64_t v : {1, 7, 255, 256, 1023, 1024, 1025}) {
    auto x = some_logits(v, uint64_t(v), 1.0);
    if (v > 3) x[2] = -INFINITY;
    const float m = *std::max_element(x.begin(), x.end()), scale = 1.0f / 0.9f;
    std::vector<double> sums(kSampleFullChunks), w(v);
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += w[j] = std::exp(double(x[j] - m) * scale);
    for (int c = 0; c < kSampleFullChunks; ++c)
      sums[c] = sample_math::full_chunk_sum(x.data(), sample_math::full_chunk_begin(v, c),
                                            sample_math::full_chunk_begin(v, c + 1), m, scale);
    const int64_t n = 20000;
    std::vector<int64_t> count(v, 0);
    for (int64_t i = 0; i < n; ++i) ++count[sample_math::full_pick(x.data(), v, sums.data(), m, scale, (i + 0.5) / n)];
    ++count[sample_math::full_pick(x.data(), v, sums.data(), m, scale, 1.0 - 0x1p-53)];  // the largest u
    for (int64_t j = 0; j < v; ++j) {
      if (w[j] == 0) {
        ASSERT_EQ(count[j], 0) << "V " << v << " token " << j;
        continue;
      }
      // +-1 for the interval, +1 for f32 weights moving a boundary past one u_i, +1 for the largest u.
      ASSERT_LE(std::fabs(count[j] - n * w[j] / s), 3.0) << "V " << v << " token " << j;
    }
  }
}

// The cap: with top-k off, top-p sees the 1024 most probable tokens. On a flat
// row of 4096 (ties: lower index first) top_p = 0.9 needs 3687 tokens, so the
// kept set is tokens 0..1023, each drawn equally often.
TEST(Sample, TopPCapOf1024) {
  const int64_t v = 4096, n = 4096;
  ThreadScope one(1);
  std::vector<float> x(v, 0.5f), scratch;
  SamplingParams p;
  p.top_p = 0.9f;
  const auto q = exact_distribution(x, p, {});
  std::vector<int64_t> count(v, 0);
  for (int64_t i = 0; i < n; ++i) ++count[sample_row(x.data(), v, p, {}, (i + 0.5) / n, scratch)];
  for (int64_t t = 0; t < v; ++t) {
    ASSERT_EQ(q[t], t < kSampleTopkCap ? 1.0 / kSampleTopkCap : 0.0) << t;
    ASSERT_LE(std::fabs(count[t] - n * q[t]), 2.0) << t;
  }
  // top_k >= V is off: the same draw as top_k = 0 (here the full-row path).
  SamplingParams all, big;
  big.top_k = int32_t(v);
  for (double u : {0.1, 0.5, 0.9})
    EXPECT_EQ(sample_row(x.data(), v, all, {}, u, scratch), sample_row(x.data(), v, big, {}, u, scratch));
}

// The GPU launch plan: K, the temperature runs (greedy and full rows join any
// run), the full-row and penalty flags.
TEST(Sample, CudaPlan) {
  const SamplingParams greedy{0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f}, full{0.8f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
      top50{0.7f, 50, 1.0f, 0.0f, 1.0f, 0.0f}, topp{0.7f, 0, 0.9f, 0.0f, 1.2f, 0.0f},
      hot{1.3f, 8, 1.0f, 0.0f, 1.0f, 0.0f};
  {
    const SamplingParams p[] = {greedy, top50, full, topp, greedy};
    const auto plan = sample_cuda_plan(p, 5, 32000);
    EXPECT_EQ(plan.k, kSampleTopkCap);
    ASSERT_EQ(plan.topk_runs.size(), 1u);
    EXPECT_EQ(plan.topk_runs[0], (std::pair<int64_t, int64_t>{0, 5}));
    EXPECT_EQ(plan.run_temperature[0], 0.7f);
    EXPECT_TRUE(plan.full && plan.penalties);
  }
  {
    const SamplingParams p[] = {top50, hot, greedy, top50};
    const auto plan = sample_cuda_plan(p, 4, 1000);
    EXPECT_EQ(plan.k, 50);
    ASSERT_EQ(plan.topk_runs.size(), 3u);
    EXPECT_EQ(plan.topk_runs[1], (std::pair<int64_t, int64_t>{1, 3}));
    EXPECT_EQ(plan.run_temperature[1], 1.3f);
    EXPECT_FALSE(plan.full || plan.penalties);
  }
  {
    const SamplingParams p[] = {full, full};
    const auto plan = sample_cuda_plan(p, 2, 10);
    EXPECT_EQ(plan.k, 0);
    EXPECT_TRUE(plan.topk_runs.empty() && plan.full);
  }
  {
    const SamplingParams p[] = {greedy, greedy};
    const auto plan = sample_cuda_plan(p, 2, 10);
    EXPECT_EQ(plan.k, 1);
    ASSERT_EQ(plan.topk_runs.size(), 1u);
    EXPECT_EQ(plan.run_temperature[0], 1.0f);
  }
#ifndef LLMK_HAVE_CUDA
  std::vector<float> x(4, 0.0f);
  int32_t tok = 0;
  EXPECT_THROW(sample_cuda(TensorView::matrix(x.data(), DType::f32, 1, 4), &greedy, {}, 0, 0, &tok), InvalidArgument);
#endif
}

}  // namespace
}  // namespace llmk::test
