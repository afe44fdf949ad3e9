// The sampler: Philox known answers, greedy, penalties, exact frequencies
// under stratified u, chi-square over Philox draws against the exact
// renormalized distribution (computed here in double with a full sort: the
// oracle), the batch API, and bad arguments.
#include <algorithm>
#include <numeric>

#include "llmk/parallel.hpp"
#include "llmk/sample.hpp"
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
  int64_t n = p.top_k > 0 ? std::min<int64_t>(p.top_k, v) : v;
  double mass = 0;
  for (int64_t j = 0; j < n; ++j) mass += e[j];
  if (p.top_k == 0) mass = s;
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

}  // namespace
}  // namespace llmk::test
