// softmax_topk on the CPU against the double-precision oracle: the V x K grid
// on every SIMD level and several thread counts (B < threads splits rows into
// parts), ties, -inf, NaN / +inf / all -inf rows, f16 / bf16, row strides,
// temperature, sentinels after every output, bad arguments; and the naive
// baseline against the oracle.
#include "tests/topk/topk_check.hpp"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <limits>
#include <random>

#include "llmk/parallel.hpp"
#include "topk/topk_internal.hpp"

namespace llmk::test {
namespace {

struct ThreadScope {
  int prev = num_threads();
  explicit ThreadScope(int n) { set_num_threads(n); }
  ~ThreadScope() { set_num_threads(prev); }
};

// Runs the fused op into guarded outputs (misaligned by `mis` bytes) and checks the guards.
TopkResult run_fused(const TensorView& logits, int64_t k, float t, size_t mis = 0) {
  const int64_t b = logits.rows();
  Guarded<float> p(b * k, mis), mx(b, mis), lse(b, mis);
  Guarded<int32_t> idx(b * k, mis);
  softmax_topk(logits, k, t, {p.data(), idx.data(), mx.data(), lse.data()});
  EXPECT_TRUE(p.guard_intact() && idx.guard_intact() && mx.guard_intact() && lse.guard_intact())
      << "write past an output";
  TopkResult r;
  r.k = k;
  r.probs.assign(p.data(), p.data() + b * k);
  r.idx.assign(idx.data(), idx.data() + b * k);
  r.row_max.assign(mx.data(), mx.data() + b);
  r.lse.assign(lse.data(), lse.data() + b);
  return r;
}

const int64_t kVs[] = {1, 7, 8, 33, 1000, 1023, 1024, 1025, 32000, 50257, 128256, 151936, 256000};
const int64_t kKs[] = {1, 2, 8, 50, 256, 1024};

// Every (V, K <= V), every SIMD level, 1 / 2 / 3 threads. Rows: 3 (2 for V > 32k to keep it quick).
TEST(SoftmaxTopk, GridAllLevelsAndThreads) {
  for (int64_t v : kVs) {
    const int64_t rows = v > 32000 ? 2 : 3;
    auto x = random_logits<float>(rows, v, v, 1000 + v);
    const auto view = TensorView::matrix(x.data(), DType::f32, rows, v);
    const auto ref = run_ref(view, std::min<int64_t>(v, 1024), 1.0f);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int threads : {1, 2, 3}) {
        ThreadScope ts(threads);
        for (int64_t k : kKs) {
          if (k > v) continue;
          const std::string what = std::string(simd_name(lvl)) + " threads " + std::to_string(threads) + " V " +
                                   std::to_string(v) + " K " + std::to_string(k);
          EXPECT_TRUE(same_topk(run_fused(view, k, 1.0f), ref, rows, what));
        }
      }
    }
  }
}

// B = 1 with 4 threads: the row is split into 4 parts merged exactly; also B = 2 (2 parts each).
TEST(SoftmaxTopk, RowSplitAcrossThreads) {
  ThreadScope ts(4);
  for (int64_t rows : {1, 2, 3}) {
    const int64_t v = 128256;
    auto x = random_logits<float>(rows, v, v, 7 + rows);
    const auto view = TensorView::matrix(x.data(), DType::f32, rows, v);
    const auto ref = run_ref(view, 1024, 1.0f);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int64_t k : {1, 50, 1024})
        EXPECT_TRUE(same_topk(run_fused(view, k, 1.0f), ref, rows, "split B " + std::to_string(rows)));
    }
  }
}

// Many exact ties (including -0 == +0) and -inf: the tie rule decides the order.
TEST(SoftmaxTopk, TiesAndDuplicates) {
  for (int64_t v : {33, 1000, 50000}) {
    auto x = tied_logits<float>(3, v, v);
    const auto view = TensorView::matrix(x.data(), DType::f32, 3, v);
    const auto ref = run_ref(view, std::min<int64_t>(v, 1024), 1.0f);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int threads : {1, 3}) {
        ThreadScope ts(threads);
        for (int64_t k : {1, 8, 33, 1024})
          if (k <= v) EXPECT_TRUE(same_topk(run_fused(view, k, 1.0f), ref, 3, "ties V " + std::to_string(v)));
      }
    }
  }
  // +0 and -0 are equal logits: ties to the lower index, whichever sign it has
  // (K = 8: a comparison sort; K = 150: the radix sort of finish_row).
  std::vector<float> zeros(300, -1.0f);
  for (int j = 0; j < 200; ++j) zeros[size_t(j)] = j % 3 ? 0.0f : -0.0f;
  for (int64_t k : {8, 150}) {
    const auto z = run_fused(TensorView::matrix(zeros.data(), DType::f32, 1, 300), k, 1.0f);
    for (int j = 0; j < k; ++j) ASSERT_EQ(z.idx[size_t(j)], j) << "signed zeros, K " << k;
  }
  // All equal: indices 0..K-1, each probability 1/V.
  std::vector<float> eq(100, 3.0f);
  const auto r = run_fused(TensorView::matrix(eq.data(), DType::f32, 1, 100), 5, 1.0f);
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(r.idx[j], j);
    EXPECT_NEAR(r.probs[j], 0.01f, 1e-8);
  }
}

// Rows with -inf: probability 0; fewer finite logits than K fill with the lowest -inf indices.
TEST(SoftmaxTopk, NegativeInfinity) {
  const int64_t v = 1025, rows = 3;
  auto x = random_logits<float>(rows, v, v, 5);
  for (int64_t j = 0; j < v; ++j)
    if (j % 7 != 3) x[j] = -INFINITY;  // row 0: every 7th finite (147 finite)
  for (int64_t j = 0; j < v; ++j)
    if (j != 1000 && j != 17) x[v + j] = -INFINITY;  // row 1: 2 finite
  const auto view = TensorView::matrix(x.data(), DType::f32, rows, v);
  const auto ref = run_ref(view, 1024, 1.0f);
  for (SimdLevel lvl : simd_levels()) {
    ScopedSimdLimit lim(lvl);
    for (int64_t k : {1, 2, 8, 256, 1024}) EXPECT_TRUE(same_topk(run_fused(view, k, 1.0f), ref, rows, "-inf"));
  }
  const auto r = run_fused(view, 8, 1.0f);
  EXPECT_EQ(r.idx[8 + 0], x[v + 17] >= x[v + 1000] ? 17 : 1000);
  for (int j = 2; j < 8; ++j) {
    EXPECT_EQ(r.probs[8 + j], 0.0f);
    EXPECT_EQ(r.idx[8 + j], j - 2);  // lowest -inf indices: 0, 1, 2, ...
  }
}

// NaN, +inf and all -inf rows next to normal rows: the documented outputs, and no mixing.
TEST(SoftmaxTopk, SpecialRows) {
  const int64_t v = 40000, rows = 6, k = 4;
  auto x = random_logits<float>(rows, v, v, 9);
  x[1 * v + 39999] = NAN;                                    // row 1: one NaN, at the very end
  x[2 * v + 5] = INFINITY;                                   // row 2: +inf
  for (int64_t j = 0; j < v; ++j) x[3 * v + j] = -INFINITY;  // row 3: all -inf
  x[4 * v + 3] = INFINITY;                                   // row 4: +inf and NaN
  x[4 * v + 30000] = NAN;
  for (int64_t j = 0; j < v; ++j) x[5 * v + j] = j == 9 ? NAN : -INFINITY;  // row 5: NaN among -inf
  const auto view = TensorView::matrix(x.data(), DType::f32, rows, v);
  const auto ref = run_ref(view, k, 1.0f);
  const float want_max[] = {0, NAN, INFINITY, -INFINITY, NAN, NAN};
  for (SimdLevel lvl : simd_levels()) {
    ScopedSimdLimit lim(lvl);
    for (int threads : {1, 4}) {
      ThreadScope ts(threads);
      const auto r = run_fused(view, k, 1.0f);
      EXPECT_TRUE(same_topk(r, ref, rows, "special rows"));
      for (int64_t b = 1; b < rows; ++b) {
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_TRUE(std::isnan(r.probs[b * k + j])) << "row " << b;
          EXPECT_EQ(r.idx[b * k + j], j) << "row " << b;
        }
        if (std::isnan(want_max[b])) EXPECT_TRUE(std::isnan(r.row_max[b]) && std::isnan(r.lse[b])) << "row " << b;
        else EXPECT_TRUE(r.row_max[b] == want_max[b] && r.lse[b] == want_max[b]) << "row " << b;
      }
      EXPECT_TRUE(std::isfinite(r.row_max[0]) && std::isfinite(r.probs[0]));
    }
  }
}

// Rows of V <= topk::kSmallV with K <= 16 (MoE routing) take their own path
// (small_row; on the vector ISAs small_rows, a vector of rows at a time, up to
// topk::kBatchV): V around the vector widths and around the paths' bounds (513
// takes the next path), rows of every kind in one batch (normal,
// ties with -0/+0 and -inf, mostly -inf, NaN, +inf, all -inf, NaN among -inf,
// repeated small integers) followed by random rows, 37 in all (several
// batches of 8 or 16 rows and a partial one), a row stride past V, f32/f16/
// bf16, every SIMD level, 1 and 3 threads, T = 1 and 0.7.
template <class T>
void check_small_rows(const std::vector<int64_t>& vs) {
  for (int64_t v : vs) {
    const int64_t rows = 37, ld = v + 3;
    auto xf = random_logits<float>(rows, v, ld, 300 + v);
    const auto tied = tied_logits<float>(1, v, 400 + v);
    for (int64_t j = 0; j < v; ++j) {
      xf[1 * ld + j] = tied[j];
      if (j % 3) xf[2 * ld + j] = -INFINITY;
      xf[5 * ld + j] = -INFINITY;
      xf[6 * ld + j] = j == v / 3 ? NAN : -INFINITY;
      xf[7 * ld + j] = float(j % 5);
    }
    xf[3 * ld + v / 2] = NAN;
    xf[4 * ld + v - 1] = INFINITY;
    std::vector<T> x(xf.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = from_f32<T>(xf[i]);
    const auto view = TensorView::matrix(x.data(), dtype_of<T>(), rows, v, ld);
    for (float temp : {1.0f, 0.7f}) {
      const auto ref = run_ref(view, std::min<int64_t>(v, 16), temp);
      for (SimdLevel lvl : simd_levels()) {
        ScopedSimdLimit lim(lvl);
        for (int threads : {1, 3}) {
          ThreadScope ts(threads);
          for (int64_t k : {1, 2, 3, 4, 8, 16})
            if (k <= v)
              EXPECT_TRUE(same_topk(run_fused(view, k, temp), ref, rows,
                                    std::string(dtype_name(dtype_of<T>())) + " " + simd_name(lvl) + " V " +
                                        std::to_string(v) + " K " + std::to_string(k)));
        }
      }
    }
  }
}
TEST(SoftmaxTopk, SmallRowsPath) {
  static_assert(topk::kSmallV == 512 && topk::kBatchV == 512, "the V list straddles the small-row bounds");
  check_small_rows<float>(
      {1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511, 512, 513});
  check_small_rows<f16>({1, 8, 17, 256, 512});
  check_small_rows<bf16>({1, 8, 17, 256, 512});
}

template <class T>
void check_half_type() {
  for (int64_t v : {7, 1025, 50257}) {
    auto x = random_logits<T>(3, v, v, 11 + v);
    const auto view = TensorView::matrix(x.data(), dtype_of<T>(), 3, v);
    const auto ref = run_ref(view, std::min<int64_t>(v, 256), 1.0f);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int64_t k : {1, 8, 256})
        if (k <= v)
          EXPECT_TRUE(same_topk(run_fused(view, k, 1.0f), ref, 3,
                                std::string(dtype_name(dtype_of<T>())) + " V " + std::to_string(v)));
    }
  }
}
// f16 / bf16 logits have many exact duplicates: the tie rule is exercised too.
TEST(SoftmaxTopk, HalfTypes) {
  check_half_type<f16>();
  check_half_type<bf16>();
}

// A row stride > V and a logits pointer that is not vector-aligned.
TEST(SoftmaxTopk, RowStrideAndMisalignment) {
  const int64_t v = 1025, ld = 1100, rows = 4;
  Guarded<float> x(rows * ld, 4);
  fill_normal(x.data(), rows * ld, 77);
  const auto view = TensorView::matrix(x.data(), DType::f32, rows, v, ld);
  const auto ref = run_ref(view, 50, 1.0f);
  for (SimdLevel lvl : simd_levels()) {
    ScopedSimdLimit lim(lvl);
    EXPECT_TRUE(same_topk(run_fused(view, 50, 1.0f, 4), ref, rows, "stride"));
  }
}

TEST(SoftmaxTopk, Temperature) {
  const int64_t v = 50257;
  auto x = random_logits<float>(2, v, v, 3);
  const auto view = TensorView::matrix(x.data(), DType::f32, 2, v);
  for (float t : {0.5f, 0.7f, 2.0f, 10.0f}) {
    const auto ref = run_ref(view, 50, t);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      EXPECT_TRUE(same_topk(run_fused(view, 50, t), ref, 2, "T " + std::to_string(t)));
    }
  }
  // A tiny T concentrates all mass on the max (others underflow to exactly 0).
  const auto r = run_fused(view, 2, 1e-3f);
  EXPECT_EQ(r.probs[0], 1.0f);
  EXPECT_EQ(r.probs[1], 0.0f);
  // Huge T with logits of the same order: log2(e)/T around 2^-100, where the
  // vector scan stops folding the scale into the exp (its clamp -127 / s
  // would overflow), on both sides; -inf logits must still get 0.
  auto big = x;
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = i % 97 == 5 ? -std::numeric_limits<float>::infinity() : big[i] * 1e30f;
  const auto bview = TensorView::matrix(big.data(), DType::f32, 2, v);
  for (float t : {1e30f, 1.8e30f, 1.9e30f, 4e31f, 1e37f, std::numeric_limits<float>::max()}) {
    for (int64_t k : {8, 50}) {
      const auto ref = run_ref(bview, k, t);
      for (SimdLevel lvl : simd_levels()) {
        ScopedSimdLimit lim(lvl);
        EXPECT_TRUE(same_topk(run_fused(bview, k, t), ref, 2, "huge T " + std::to_string(t)));
      }
    }
  }
}

// The fused scan sums 2^((x - m) s2) relative to the running max m and
// rescales the sum when m rises: an ascending row raises it in every block, a
// late spike once after thousands of terms, a descending row never; a 1e6
// offset (ulp 0.0625, many exact ties) checks that the reference arithmetic
// keeps its precision far from 0 (also -1e6, and a 2e5 spike mid-row). With 8 threads the 6 rows of 40000 are split
// in 2 parts each, whose states are merged. Small K, where candidates are
// inserted in order, and large K, where they are appended and flushed.
TEST(SoftmaxTopk, RunningMaxRises) {
  const int64_t v = 40000, rows = 6;
  std::vector<float> x(rows * v);
  for (int64_t j = 0; j < v; ++j) {
    x[j] = 0.0005f * float(j);
    x[v + j] = -0.0005f * float(j);
    x[2 * v + j] = j == v - 3 ? 30.0f : std::sin(float(j));
    x[3 * v + j] = 1.0e6f + 0.25f * float(j % 97);
    x[4 * v + j] = j == v / 2 ? 2.0e5f : std::sin(float(j));  // a huge max after thousands of terms
    x[5 * v + j] = -1.0e6f + 0.25f * float(j % 97);           // far below 0
  }
  const auto view = TensorView::matrix(x.data(), DType::f32, rows, v);
  for (float t : {0.5f, 1.0f, 3.0f}) {
    const auto ref = run_ref(view, 256, t);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int threads : {1, 8}) {
        ThreadScope ts(threads);
        for (int64_t k : {1, 8, 256})
          EXPECT_TRUE(same_topk(run_fused(view, k, t), ref, rows,
                                std::string(simd_name(lvl)) + " running max, T " + std::to_string(t) + " threads " +
                                    std::to_string(threads) + " K " + std::to_string(k)));
      }
    }
  }
}

// The vector scan folds x - m into its exp (simd::Exp2Scaled, offset c = m s2
// on the 1/8 grid, |c| <= 2^18) and rescans a part with the general terms
// where a max is beyond that or is -FLT_MAX: rows all -FLT_MAX (uniform), with
// -inf among them, -FLT_MAX then ordinary logits, a max just inside and just
// outside the range (m s2 = 2^18 -+ 16 at T = 1), and a jump out of it near
// the end of a row that started in range. Every K path, 1 and 3 threads (the
// split parts meet the jump at different places).
TEST(SoftmaxTopk, FoldRangeAndLowestLogits) {
  const int64_t v = 40000, rows = 6;
  auto x = random_logits<float>(rows, v, v, 61);
  const float lowest = std::numeric_limits<float>::lowest(), edge = 262144.0f / 1.44269504f;
  for (int64_t j = 0; j < v; ++j) {
    x[j] = lowest;
    x[v + j] = j % 3 ? lowest : -INFINITY;
    if (j < v / 2) x[2 * v + j] = lowest;
  }
  x[3 * v + 777] = edge - 11.0f;     // m s2 = 2^18 - 16: in range
  x[4 * v + 777] = edge + 11.0f;     // just beyond
  x[5 * v + v - 100] = 2.0f * edge;  // a jump out of range near the end
  const auto view = TensorView::matrix(x.data(), DType::f32, rows, v);
  const auto ref = run_ref(view, 256, 1.0f);
  for (SimdLevel lvl : simd_levels()) {
    ScopedSimdLimit lim(lvl);
    for (int threads : {1, 3}) {
      ThreadScope ts(threads);
      for (int64_t k : {1, 8, 50, 256}) {
        const auto r = run_fused(view, k, 1.0f);
        EXPECT_TRUE(same_topk(r, ref, rows,
                              std::string(simd_name(lvl)) + " fold range, threads " + std::to_string(threads) + " K " +
                                  std::to_string(k)));
        EXPECT_EQ(r.row_max[0], lowest);
        EXPECT_NEAR(r.probs[0], 1.0 / double(v), 1e-6 / double(v));  // uniform
      }
    }
  }
}

// The sampled starting threshold (topk_scan.hpp, sample_guess) where the
// guess is unsafe and the part must be rescanned: a row whose sample runs
// (topk_internal.hpp, sample_run) hold its largest logits, for the split into
// P parts that 1 / 3 / 4 threads make of one row of 128256 (kMinPart 16384 in
// topk.cpp); ties at the guess (a plateau with fewer than K logits above it);
// finite logits only in the sample; NaN, +inf and -inf in the sample; an
// ascending row. K = 17 .. 1024 (no guess where r > 64: K = 1024 in 3 or 4
// parts, 480 in 4), and K = V.
// Every row is run alone under every thread count, so each also meets the
// other splits, whose guesses may be safe.
TEST(SoftmaxTopk, SampledThresholdRescan) {
  const int64_t v = 128256;
  std::vector<std::vector<float>> rows;
  for (int64_t parts : {1, 3, 4}) {  // the sample holds the largest logits
    auto x = random_logits<float>(1, v, v, 40 + parts);
    for (int64_t p = 0; p < parts; ++p)
      for (int64_t i = 0; i < topk::kSampleRuns; ++i)
        for (int64_t j = 0; j < topk::kSampleRun; ++j)
          x[topk::sample_run(v * p / parts, v * (p + 1) / parts, i) + j] += 20.0f;
    rows.push_back(x);
  }
  {  // a plateau of 1.0 (ties at the guess), 10 logits above it, the rest below
    auto x = random_logits<float>(1, v, v, 50);
    for (int64_t j = 0; j < v; ++j) x[j] = j % 12800 == 77 ? 2.0f : j % 10 ? 1.0f : -std::fabs(x[j]);
    rows.push_back(x);
  }
  {  // finite logits only in the sample runs of one part
    auto x = random_logits<float>(1, v, v, 51);
    std::vector<float> y(v, -INFINITY);
    for (int64_t i = 0; i < topk::kSampleRuns; ++i)
      for (int64_t j = 0; j < topk::kSampleRun; ++j)
        y[topk::sample_run(0, v, i) + j] = x[topk::sample_run(0, v, i) + j];
    rows.push_back(y);
  }
  for (float special : {NAN, INFINITY, -INFINITY}) {  // in the first sample run, and -inf in all of them
    auto x = random_logits<float>(1, v, v, 52);
    x[3] = special;
    if (special == -INFINITY)
      for (int64_t i = 0; i < topk::kSampleRuns; ++i)
        std::fill_n(x.begin() + topk::sample_run(0, v, i), topk::kSampleRun, special);
    rows.push_back(x);
  }
  {
    std::vector<float> x(v);
    for (int64_t j = 0; j < v; ++j) x[j] = 1e-4f * float(j);  // ascending
    rows.push_back(x);
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto view = TensorView::matrix(rows[r].data(), DType::f32, 1, v);
    const auto ref = run_ref(view, 1024, 1.0f);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int threads : {1, 3, 4}) {
        ThreadScope ts(threads);
        for (int64_t k : {17, 50, 256, 480, 1024})
          EXPECT_TRUE(same_topk(run_fused(view, k, 1.0f), ref, 1,
                                std::string(simd_name(lvl)) + " sampled threshold, row " + std::to_string(r) +
                                    " threads " + std::to_string(threads) + " K " + std::to_string(k)));
      }
    }
  }
  // K = V, and a part just at the sampling minimum.
  for (int64_t n : {topk::kSampleMinPart, int64_t(20000)}) {
    auto x = random_logits<float>(1, n, n, 53);
    const auto view = TensorView::matrix(x.data(), DType::f32, 1, n);
    const auto ref = run_ref(view, n, 1.0f);
    for (SimdLevel lvl : simd_levels()) {
      ScopedSimdLimit lim(lvl);
      for (int64_t k : {int64_t(17), int64_t(50), n})
        EXPECT_TRUE(
            same_topk(run_fused(view, k, 1.0f), ref, 1, "K = " + std::to_string(k) + " of V " + std::to_string(n)));
    }
  }
}

// Random cases against the oracle, drawn to reach the scan's range limits
// together: V log-uniform in [1, 70000] (row parts, samples, chunk tails), K
// log-uniform up to 1100, T from 1e-3 to 1e3, logits N(0, 1) scaled by 1e-2 ..
// 1e5 around an offset up to +-1e6 (so |m| / T crosses the fold's 1.8e5 both
// ways, and x - m is far from exact), rows of ties, ascending and descending
// rows, -inf runs, -FLT_MAX, and rarely a NaN or +inf; f32 / f16 / bf16
// (large values round to +-inf in f16: special rows then), row strides > V,
// 1-4 threads, every SIMD level. A fixed seed: a failure prints its case.
// random_case draws all of that but V, B and K, and runs the case.
void random_case(std::mt19937_64& g, const std::string& name, int64_t v, int64_t rows, int64_t k,
                 const std::vector<SimdLevel>& levels) {
  const auto uni = [&](double a, double b) { return a + (b - a) * double(g() >> 11) * 0x1p-53; };
  const int64_t ld = v + (g() % 3 == 0 ? int64_t(g() % 17) : 0);
  const float t = float(std::pow(10.0, uni(-3, 3)));
  const double scale = std::pow(10.0, uni(-2, 5)), offset = g() % 2 ? 0.0 : uni(-1, 1) * std::pow(10.0, uni(0, 6));
  std::vector<float> xf(rows * ld, 0.0f);
  fill_normal(xf.data(), xf.size(), g());
  std::string kinds;
  for (int64_t b = 0; b < rows; ++b) {
    float* x = xf.data() + b * ld;
    const int kind = int(g() % 8);
    kinds += char('0' + kind);
    for (int64_t j = 0; j < v; ++j) {
      double y = offset + scale * x[j];
      if (kind == 1) y = offset + scale * double(int(x[j] * 2));  // ties
      if (kind == 2) y = offset + scale * double(j) / double(v);  // ascending
      if (kind == 3) y = offset - scale * double(j) / double(v);  // descending
      if (kind == 4 && j % 5 != 0) y = -INFINITY;                 // mostly -inf
      if (kind == 5 && j % 3 == 0) y = std::numeric_limits<float>::lowest();
      x[j] = float(y);
    }
    if (kind == 6 && g() % 4 == 0) x[g() % v] = g() % 2 ? NAN : INFINITY;
    if (kind == 7) std::fill(x, x + v, g() % 2 ? -INFINITY : std::numeric_limits<float>::lowest());
  }
  const int dt = int(g() % 5);  // f32 3 times in 5
  const int threads = 1 + int(g() % 4);
  const SimdLevel lvl = levels[g() % levels.size()];
  const std::string what = name + ": B " + std::to_string(rows) + " V " + std::to_string(v) + " ld " +
                           std::to_string(ld) + " K " + std::to_string(k) + " T " + std::to_string(t) + " scale " +
                           std::to_string(scale) + " offset " + std::to_string(offset) + " rows " + kinds + " dtype " +
                           std::to_string(dt) + " threads " + std::to_string(threads) + " " + simd_name(lvl);
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> x(xf.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = from_f32<T>(xf[i]);
    const auto view = TensorView::matrix(x.data(), dtype_of<T>(), rows, v, ld);
    const auto ref = run_ref(view, k, t);
    ScopedSimdLimit lim(lvl);
    ThreadScope ts(threads);
    EXPECT_TRUE(same_topk(run_fused(view, k, t), ref, rows, what));
  };
  if (dt == 3) run(f16{});
  else if (dt == 4) run(bf16{});
  else run(float{});
}

TEST(SoftmaxTopk, RandomizedAgainstReference) {
  std::mt19937_64 g(20261201);
  const auto uni = [&](double a, double b) { return a + (b - a) * double(g() >> 11) * 0x1p-53; };
  const auto log_int = [&](double a, double b) { return int64_t(std::exp(uni(std::log(a), std::log(b + 1)))); };
  const std::vector<SimdLevel> levels = simd_levels();
  for (int it = 0; it < 150; ++it) {
    const int64_t v = std::max<int64_t>(1, log_int(1, 70000)), rows = 1 + int64_t(g() % 4);
    const int64_t k = std::clamp<int64_t>(log_int(1, 1100), 1, v);
    random_case(g, "case " + std::to_string(it), v, rows, k, levels);
  }
}

// The same cases for MoE routing shapes, where many rows go through the
// vector-of-rows path (topk::batch_rows) and the one-row path together: 1..40
// rows of 1..600 logits (half of them up to 96), K 1..16.
TEST(SoftmaxTopk, SmallRowsRandomized) {
  std::mt19937_64 g(20261202);
  const std::vector<SimdLevel> levels = simd_levels();
  for (int it = 0; it < 200; ++it) {
    const int64_t v = 1 + int64_t(g() % (it % 2 ? 96 : 600)), rows = 1 + int64_t(g() % 40);
    const int64_t k = 1 + int64_t(g() % uint64_t(std::min<int64_t>(v, 16)));
    random_case(g, "small case " + std::to_string(it), v, rows, k, levels);
  }
}

TEST(SoftmaxTopk, BadArguments) {
  std::vector<float> x(20, 0.0f);
  std::vector<float> p(20), m(2), l(2);
  std::vector<int32_t> i(20);
  const SoftmaxTopkOut out{p.data(), i.data(), m.data(), l.data()};
  const auto view = TensorView::matrix(x.data(), DType::f32, 2, 10);
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  EXPECT_NE(msg([&] { softmax_topk(view, 0, 1.0f, out); }).find("'k' = 0"), std::string::npos);
  EXPECT_NE(msg([&] { softmax_topk(view, 11, 1.0f, out); }).find("'k' = 11"), std::string::npos);
  EXPECT_NE(msg([&] { softmax_topk(view, -3, 1.0f, out); }).find("'k' = -3"), std::string::npos);
  for (float t : {0.0f, -1.0f, float(NAN), float(INFINITY), 1e-45f, 3e-39f})  // 3e-39: 1/T finite, log2(e)/T not
    EXPECT_NE(msg([&] { softmax_topk(view, 2, t, out); }).find("'temperature'"), std::string::npos) << t;
  EXPECT_NE(msg([&] {
              softmax_topk(TensorView::matrix(x.data(), DType::i32, 2, 10), 2, 1.0f, out);
            }).find("dtype must be"),
            std::string::npos);
  EXPECT_NE(msg([&] { softmax_topk(TensorView::vector(x.data(), DType::f32, 10), 2, 1.0f, out); }).find("2-d"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              softmax_topk(view, 2, 1.0f, {nullptr, i.data(), nullptr, nullptr});
            }).find("out.probs"),
            std::string::npos);
  EXPECT_NE(msg([&] { softmax_topk_ref(view, 0, 1.0f, out); }).find("softmax_topk_ref"), std::string::npos);
  EXPECT_NE(msg([&] { softmax_topk_naive(view, 2, -1.0f, out); }).find("softmax_topk_naive"), std::string::npos);
  // Outputs may not share memory with the logits or with each other.
  EXPECT_NE(msg([&] {
              softmax_topk(view, 2, 1.0f, {x.data() + 16, i.data(), nullptr, nullptr});
            }).find("'out.probs'"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              softmax_topk(view, 2, 1.0f, {p.data(), i.data(), p.data() + 3, nullptr});
            }).find("must not overlap out.row_max"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              softmax_topk(view, 2, 1.0f, {p.data(), i.data(), m.data(), m.data() + 1});
            }).find("'out.row_max'"),
            std::string::npos);
  softmax_topk(view, 2, 1.0f, {p.data(), i.data(), p.data() + 4, nullptr});  // adjacent: fine
  // Null row_max / lse are allowed.
  softmax_topk(view, 2, 1.0f, {p.data(), i.data(), nullptr, nullptr});
  EXPECT_EQ(i[0], 0);
}

// The scans read a row as contiguous: a view with stride[1] != 1 would give
// the top-k of the wrong elements (top-1 index 1 here, where the answer is 3).
// It is named, by the op, the oracle and the baseline, and nothing is written.
// A single column's stride is never used: any value is fine.
TEST(SoftmaxTopk, NonUnitLastStrideIsAnError) {
  float buf[8] = {0, 9, 1, 9, 2, 9, 3, 9};
  TensorView x = TensorView::matrix(buf, DType::f32, 1, 4);
  x.stride[1] = 2;  // elements 0, 1, 2, 3 at buf[0], buf[2], buf[4], buf[6]
  float p = -7;
  int32_t i = -7;
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  const std::string m = msg([&] { softmax_topk(x, 1, 1.0f, {&p, &i, nullptr, nullptr}); });
  for (const char* piece : {"llmk::softmax_topk", "'logits'", "stride[1] 2", "contiguous"})
    EXPECT_NE(m.find(piece), std::string::npos) << m << " lacks " << piece;
  EXPECT_EQ(p, -7.0f);
  EXPECT_EQ(i, -7);
  EXPECT_NE(msg([&] {
              softmax_topk_ref(x, 1, 1.0f, {&p, &i, nullptr, nullptr});
            }).find("stride[1] 2"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              softmax_topk_naive(x, 1, 1.0f, {&p, &i, nullptr, nullptr});
            }).find("stride[1] 2"),
            std::string::npos);
  TensorView col = TensorView::matrix(buf, DType::f32, 2, 1, 4);
  col.stride[1] = 3;
  float probs[2];
  int32_t idx[2] = {-1, -1};
  softmax_topk(col, 1, 1.0f, {probs, idx, nullptr, nullptr});
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(idx[1], 0);
  EXPECT_EQ(probs[0], 1.0f);
}

// The AVX2 and AVX-512 versions of a function, those this process may run
// (detected_simd_level(): the CPU's, capped by LLMK_SIMD).
template <class Fn>
std::vector<std::pair<const char*, Fn>> isa_fns(Fn avx2, Fn avx512) {
  std::vector<std::pair<const char*, Fn>> fns;
  if (detected_simd_level() >= SimdLevel::avx2) fns.push_back({"avx2", avx2});
  if (detected_simd_level() >= SimdLevel::avx512) fns.push_back({"avx512", avx512});
  return fns;
}

// Where the vector exps are checked: -110 .. 0, densest around the flush
// (-104) and the f32 subnormal boundary (-103.28), near 0, and 0 and -inf.
template <class T>
std::vector<T> exp_test_points() {
  std::vector<T> xs;
  for (int i = 0; i <= 2200; ++i) xs.push_back(T(-110) + T(0.05) * T(i));
  for (int i = 0; i <= 400; ++i) xs.push_back(T(-104.5) + T(0.005) * T(i));
  for (int i = 0; i < 300; ++i) xs.push_back(-std::ldexp(T(1), -i / 10));
  xs.push_back(T(0));
  xs.push_back(-std::numeric_limits<T>::infinity());
  return xs;
}

// The vector ISAs' probabilities (topk::probs_avx2 / probs_avx512: exp on
// doubles, a Taylor polynomial) against exp(d) / s in double: each f32 result
// must be that quotient correctly rounded, up to 1e-12 relative of slack for
// the polynomial (so a rounding flip is allowed only within 1e-12 of a
// boundary), and exactly 0 below d = -104 (where the quotient is under
// 2^-150); d from -110 to 0, densest around the flush and the f32 subnormal
// boundary (-103.28), ties at 0, -inf logits, k = 1 .. 19 (every tail).
TEST(SoftmaxTopk, VectorProbabilitiesAgainstDoubleExp) {
  const auto fns = isa_fns(topk::probs_avx2, topk::probs_avx512);
  if (fns.empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  const std::vector<float> xs = exp_test_points<float>();
  for (const auto& [name, fn] : fns) {
    int checked = 0;  // per function, so the count does not depend on which ISAs the CPU has
    for (double s : {1.0, 1.7, 3.0e4})
      for (double scale : {1.0, 0.37})
        for (int64_t k = 1; k <= 19; ++k)
          for (size_t j0 = 0; j0 + size_t(k) <= xs.size(); j0 += size_t(k) * 7) {
            std::vector<topk::Cand> c(static_cast<size_t>(k));
            for (int64_t j = 0; j < k; ++j) c[size_t(j)] = topk::Cand{float(xs[j0 + size_t(j)] / scale), int32_t(j)};
            std::vector<float> out(size_t(k) + 1, 7.0f);  // + a sentinel
            fn(c.data(), k, 0.0, scale, s, out.data());
            ASSERT_EQ(out[size_t(k)], 7.0f) << name << " wrote past k = " << k;
            for (int64_t j = 0; j < k; ++j) {
              const double d = double(c[size_t(j)].x) * scale, want = std::exp(d) / s;
              const float got = out[size_t(j)];
              if (d < -104) {
                ASSERT_EQ(got, 0.0f) << name << " d " << d;
                continue;
              }
              const float lo = float(want * (1 - 1e-12)), hi = float(want * (1 + 1e-12));  // the roundings allowed
              ASSERT_TRUE(got == lo || got == hi) << name << " d " << d << " s " << s << ": " << got << " vs " << want;
              ++checked;
            }
          }
    EXPECT_GT(checked, 40000) << name;
  }
}

// The batched rows' probabilities (topk::exp_div_avx2 / exp_div_avx512: the
// same exp as probs_pd, d and s per element): each f32 result must be exp(d)
// / s correctly rounded up to 1e-12 relative, exactly 0 below d = -104; d
// from -110 to 0 (the flush and subnormal boundaries densest), s from 1 to
// 3e4 varying element by element, n = 1 .. 40 (every tail), with a sentinel.
TEST(SoftmaxTopk, BatchProbabilitiesAgainstDoubleExp) {
  const auto fns = isa_fns(topk::exp_div_avx2, topk::exp_div_avx512);
  if (fns.empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  const std::vector<double> ds = exp_test_points<double>();
  for (const auto& [name, fn] : fns) {
    int checked = 0;  // per function, as above
    for (int64_t n = 1; n <= 40; ++n)
      for (size_t j0 = 0; j0 + size_t(n) <= ds.size(); j0 += size_t(n) * 5) {
        std::vector<double> s(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) s[size_t(j)] = 1.0 + double((j0 + size_t(j) * 7919) % 30011);
        std::vector<float> out(size_t(n) + 1, 7.0f);  // + a sentinel
        fn(ds.data() + j0, s.data(), n, out.data());
        ASSERT_EQ(out[size_t(n)], 7.0f) << name << " wrote past n = " << n;
        for (int64_t j = 0; j < n; ++j) {
          const double d = ds[j0 + size_t(j)], want = std::exp(d) / s[size_t(j)];
          const float got = out[size_t(j)];
          if (d < -104) {
            ASSERT_EQ(got, 0.0f) << name << " d " << d;
            continue;
          }
          const float lo = float(want * (1 - 1e-12)), hi = float(want * (1 + 1e-12));
          ASSERT_TRUE(got == lo || got == hi) << name << " d " << d << " s " << s[size_t(j)] << ": " << got;
          ++checked;
        }
      }
    EXPECT_GT(checked, 20000) << name;
  }
}

// finish_row's ordering of its candidates (topk::best_first) against
// std::sort by the op's order, on every path it can take: n around
// kBucketMin, kRadixSelect and kBucketMax; want below, at and above n;
// candidates in index order (by_index) and shuffled; logits spread (the bucket
// pass), clustered with a far outlier and many equal (its buckets too uneven:
// it must decline and leave c untouched), with signed zeros, both signs,
// subnormals and +-FLT_MAX. Only the best min(want, n) are checked, with a
// sentinel candidate after c[n) that must stay.
TEST(SoftmaxTopk, CandidateOrderingPaths) {
  std::mt19937 rng(5);
  const int64_t ns[] = {
      1,    2,   31, 32, 33, 100, 127, 128, 129, 300, topk::kBucketMax - 1, topk::kBucketMax, topk::kBucketMax + 1,
      1500, 5000};
  int bucketed = 0, declined = 0;
  for (int kind = 0; kind < 5; ++kind)
    for (int64_t n : ns)
      for (int64_t want : {int64_t(1), std::max<int64_t>(1, n / 2), n, n + 5})
        for (bool by_index : {true, false}) {
          std::vector<topk::Cand> c(size_t(n) + 1);
          for (int64_t j = 0; j < n; ++j) {
            float x = 0;
            std::uniform_real_distribution<float> u(-1.0f, 1.0f);
            switch (kind) {
              case 0: x = 3.9f + 0.1f * u(rng); break;                        // spread: the bucket pass
              case 1: x = j == n / 2 ? 1e30f : 2.0f + 1e-6f * u(rng); break;  // cluster + outlier
              case 2: x = float(rng() % 3); break;                            // many equal
              case 3: x = (rng() % 2 ? 0.0f : -0.0f) + (rng() % 4 == 0 ? u(rng) : 0.0f); break;  // signed zeros
              default: {
                const float pick[] = {FLT_MAX, -FLT_MAX, 1e-40f, -1e-40f, 1e-45f, 0.0f, -0.0f, 1.0f};
                x = rng() % 2 ? pick[rng() % 8] : u(rng) * std::ldexp(1.0f, int(rng() % 200) - 100);
              }
            }
            c[size_t(j)] = topk::Cand{x, int32_t(3 * j + int(rng() % 3))};  // increasing indices
          }
          if (!by_index) std::shuffle(c.begin(), c.begin() + n, rng);
          c[size_t(n)] = topk::Cand{-7.0f, -7};  // sentinel
          auto want_sorted = c;
          std::sort(want_sorted.begin(), want_sorted.begin() + n, topk::better);
          const std::string what = "kind " + std::to_string(kind) + " n " + std::to_string(n) + " want " +
                                   std::to_string(want) + (by_index ? " by index" : " shuffled");
          auto b = c;
          const bool took = topk::bucket_best(b.data(), n, want);
          bucketed += took;
          declined += !took;
          if (!took)
            for (int64_t j = 0; j <= n; ++j)
              ASSERT_TRUE(b[size_t(j)].i == c[size_t(j)].i && std::memcmp(&b[size_t(j)].x, &c[size_t(j)].x, 4) == 0)
                  << what << ": bucket_best declined but changed c[" << j << "]";
          topk::best_first(c.data(), n, want, by_index);
          for (const auto* got : {&b, &c}) {
            for (int64_t j = 0; (got == &c || took) && j < std::min(want, n); ++j) {
              ASSERT_EQ((*got)[size_t(j)].i, want_sorted[size_t(j)].i) << what << " at " << j;
              ASSERT_EQ((*got)[size_t(j)].x, want_sorted[size_t(j)].x) << what << " at " << j;
            }
            ASSERT_EQ((*got)[size_t(n)].i, -7) << what << ": the sentinel after c[n) was overwritten";
          }
        }
  EXPECT_GT(bucketed, 100) << "the bucket pass never ran";
  EXPECT_GT(declined, 100) << "the fallbacks never ran";
}

// The naive baseline selects on rounded probabilities, so its order may differ
// from the oracle only between equal f32 probabilities: check values, and that
// each returned index really has the returned probability.
TEST(SoftmaxTopkNaive, MatchesReference) {
  for (int64_t v : {8, 1025, 128256}) {
    auto x = random_logits<float>(2, v, v, 21);
    const auto view = TensorView::matrix(x.data(), DType::f32, 2, v);
    const auto ref = run_ref(view, std::min<int64_t>(v, 256), 1.0f);
    for (int64_t k : {1, 8, 256}) {
      if (k > v) continue;
      TopkResult r;
      r.k = k;
      r.probs.resize(2 * k);
      r.idx.resize(2 * k);
      r.row_max.resize(2);
      r.lse.resize(2);
      softmax_topk_naive(view, k, 1.0f, {r.probs.data(), r.idx.data(), r.row_max.data(), r.lse.data()});
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t j = 0; j < k; ++j) {
          const double want = ref.probs[b * ref.k + j];
          EXPECT_NEAR(r.probs[b * k + j], want, 1e-6 * want) << "V " << v << " K " << k;
          const double xi = x[b * v + r.idx[b * k + j]];
          const double pi = std::exp(xi - double(ref.row_max[b])) * std::exp(double(ref.row_max[b]) - ref.lse[b]);
          // pi carries the f32 rounding of lse (|lse| < 16: 1e-6 abs) on top of the 1e-6 of the op.
          EXPECT_NEAR(r.probs[b * k + j], pi, 2e-6 * pi);
        }
    }
  }
}

}  // namespace
}  // namespace llmk::test
