// Shared by the CPU and CUDA tests of softmax + top-k: building logits (random,
// tied, with -inf / NaN / +inf rows), running the oracle, and comparing a
// result with it.
//
// Comparison: the op's order is total (logit descending, index ascending), so
// the index lists must be identical, element for element. Probabilities:
// relative 1e-6 (the bar). Why it holds: the fused path computes
// p = exp((x - m) s) / S with the numerator in double from the exact f32
// logit, so its error is S's plus the final f32 rounding (6e-8). S sums, in
// double, f32 terms 2^(x s log2 e - c) (c = m s log2 e rounded up to 1/8, m:
// the running max, the sum rescaled in double when it rises; simd::Exp2Scaled:
// x s log2 e - c exact, its reduction rounded once, within 1.9e-7 relative,
// tests/core/test_simd.cpp) in trees of 8 (3 f32 roundings): rel(S) <= 1.9e-7
// + 1.8e-7. Where |m s log2 e| > 2^18 the terms are 2^(d s log2 e), d = x - m
// rounded to f32, which adds 4.1e-8 * (softmax-weighted mean |d s log2 e|);
// d is exact where x and m are within a factor 2 (the terms that matter), so
// that mean stays small: < 6e-7 in all.
// row_max is computed exactly as the oracle does; lse = m s + log S carries
// S's error absolutely: 1e-6 abs + 1e-6 rel.
#pragma once
#include <cmath>
#include <vector>

#include "llmk/topk.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {

struct TopkResult {
  std::vector<float> probs, row_max, lse;  // [B, K], [B], [B]
  std::vector<int32_t> idx;                // [B, K]
  int64_t k = 0;
};

inline TopkResult run_ref(const TensorView& logits, int64_t k, float t) {
  TopkResult r;
  r.k = k;
  const int64_t b = logits.rows();
  r.probs.resize(b * k);
  r.idx.resize(b * k);
  r.row_max.resize(b);
  r.lse.resize(b);
  softmax_topk_ref(logits, k, t, {r.probs.data(), r.idx.data(), r.row_max.data(), r.lse.data()});
  return r;
}

// got has k columns; ref has ref.k >= k columns (its first k are the top k).
inline ::testing::AssertionResult same_topk(const TopkResult& got, const TopkResult& ref, int64_t rows,
                                            const std::string& what) {
  const int64_t k = got.k;
  std::vector<float> rp(rows * k);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t j = 0; j < k; ++j) {
      rp[b * k + j] = ref.probs[b * ref.k + j];
      if (got.idx[b * k + j] != ref.idx[b * ref.k + j])
        return ::testing::AssertionFailure() << what << ": row " << b << " slot " << j << " index "
                                             << got.idx[b * k + j] << " expected " << ref.idx[b * ref.k + j];
    }
  auto r = all_close(got.probs.data(), rp.data(), rp.size(), std::numeric_limits<float>::min(), 1e-6, what + " probs");
  if (!r) return r;
  r = all_close(got.row_max.data(), ref.row_max.data(), rows, 0.0, 2 * eps_of<float>(), what + " row_max");
  if (!r) return r;
  return all_close(got.lse.data(), ref.lse.data(), rows, 1e-6, 1e-6, what + " lse");
}

// N(0, 1) logits in T, rows of v with row stride ld.
template <class T>
std::vector<T> random_logits(int64_t rows, int64_t v, int64_t ld, uint64_t seed) {
  std::vector<T> x(rows * ld);
  fill_normal(x.data(), x.size(), seed);
  return x;
}

// Logits drawn from a handful of values (many exact ties, some -inf).
template <class T>
std::vector<T> tied_logits(int64_t rows, int64_t v, uint64_t seed) {
  std::mt19937_64 g(seed);
  const float vals[] = {-INFINITY, -1.0f, 0.0f, -0.0f, 0.5f, 2.0f};
  std::vector<T> x(rows * v);
  for (auto& e : x) e = from_f32<T>(vals[g() % 6]);
  return x;
}

}  // namespace llmk::test
