// LayerNorm / RMSNorm on the CPU: every SIMD path and several thread counts
// against the double reference (norm_harness.hpp), with sentinels after every
// output and between strided rows; special values; the large-mean stability
// case (a naive one-pass variance fails it, ours passes); determinism; and the
// error messages of bad arguments.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "llmk/norm.hpp"
#include "llmk/parallel.hpp"
#include "norm/norm_cpu.hpp"
#include "tests/norm/norm_harness.hpp"

namespace llmk::test {
namespace {

// Restores the thread count on scope exit.
struct ScopedThreads {
  int prev = num_threads();
  explicit ScopedThreads(int n) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(prev); }
};

// True when the padding between rows of a strided [N, stride] output still
// holds the sentinel.
template <class T>
bool padding_intact(const Guarded<T>& g, int64_t N, int64_t D, int64_t stride) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(g.data());
  for (int64_t n = 0; n + 1 < N; ++n)
    for (size_t b = size_t(n * stride + D) * sizeof(T); b < size_t((n + 1) * stride) * sizeof(T); ++b)
      if (p[b] != kSentinelByte) return false;
  return true;
}

// Runs forward and backward of a case through the public API on host memory
// or, with force_nt, through the CPU drivers with non-temporal stores (which
// the API picks only for tensors larger than the last-level cache).
template <class T>
NormOut run_cpu(const NormData<T>& d, const std::string& where, bool force_nt = false) {
  const NormCase& c = d.c;
  const int64_t N = c.N, D = c.D, S = c.stride();
  const DType t = dtype_of<T>();
  const size_t mis = size_t(c.misalign) * sizeof(T);
  Guarded<T> x(size_t(N * S), mis), dy(size_t(N * S), mis), y(size_t(N * S), mis), dx(size_t(N * S), mis);
  std::copy(d.x.begin(), d.x.end(), x.data());
  std::copy(d.dy.begin(), d.dy.end(), dy.data());
  Guarded<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)), dw(static_cast<size_t>(D)),
      db(static_cast<size_t>(D));
  const auto param = [&](const std::vector<float>& f, const std::vector<T>& tv, bool has) {
    if (!has) return TensorView{};
    return c.param_f32 ? TensorView::vector(f.data(), DType::f32, D) : TensorView::vector(tv.data(), t, D);
  };
  const TensorView w = param(d.wf, d.wt, c.has_w), b = param(d.bf, d.bt, c.has_b);
  const auto mat = [&](auto& g) { return TensorView::matrix(g.data(), t, N, D, S); };
  const auto vec = [](auto& g, int64_t n) { return TensorView::vector(g.data(), DType::f32, n); };
  if (force_nt) {
    const float* wf = c.has_w ? d.wf.data() : nullptr;
    const norm::FwdArgs fa{x.data(),    S,        wf, c.has_b && !c.rms ? d.bf.data() : nullptr,
                           c.eps,       y.data(), S,  c.rms ? nullptr : mean.data(),
                           rstd.data(), N,        D,  true};
    const norm::BwdArgs ba{dy.data(),   S,         x.data(), S, wf, c.rms ? nullptr : mean.data(),
                           rstd.data(), dx.data(), S,        N, D,  true};
    norm_cpu::forward(fa, t, c.rms);
    norm_cpu::backward(ba, t, c.rms, dw.data(), c.rms ? nullptr : db.data());
  } else if (c.rms) {
    rms_norm(mat(x), w, c.eps, mat(y), vec(rstd, N));
    rms_norm_backward(mat(dy), mat(x), w, vec(rstd, N), mat(dx), vec(dw, D));
  } else {
    layer_norm(mat(x), w, b, c.eps, mat(y), vec(mean, N), vec(rstd, N));
    layer_norm_backward(mat(dy), mat(x), w, vec(mean, N), vec(rstd, N), mat(dx), vec(dw, D), vec(db, D));
  }
  EXPECT_TRUE(y.guard_intact() && dx.guard_intact() && mean.guard_intact() && rstd.guard_intact() &&
              dw.guard_intact() && db.guard_intact())
      << where << ": write past the end of an output";
  EXPECT_TRUE(padding_intact(y, N, D, S) && padding_intact(dx, N, D, S)) << where << ": write into row padding";
  NormOut o{unstride(y.data(), N, D, S),  to_floats(mean.data(), size_t(N)), to_floats(rstd.data(), size_t(N)),
            unstride(dx.data(), N, D, S), to_floats(dw.data(), size_t(D)),   to_floats(db.data(), size_t(D))};
  return o;
}

std::string path_name(SimdLevel l, int threads) {
  return std::string(simd_name(l)) + " threads=" + std::to_string(threads);
}

TEST(Norm, EveryPathMatchesReference) {
  for (const NormCase& c : standard_cases())
    for (DType t : {DType::f32, DType::f16, DType::bf16})
      with_dtype(t, [&]<class T>() {
        const NormData<T> d(c);
        for (SimdLevel l : simd_levels()) {
          ScopedSimdLimit lim(l);
          for (int threads : {1, 2, 3}) {
            ScopedThreads th(threads);
            const std::string where = c.name() + " " + dtype_name(t) + " " + path_name(l, threads);
            check_outputs(d, run_cpu(d, where), where);
          }
        }
      });
}

TEST(Norm, NonTemporalStoresMatchReference) {
  for (NormCase c : standard_cases()) {
    if (!c.param_f32) continue;  // the drivers take f32 parameters
    for (DType t : {DType::f32, DType::bf16})
      with_dtype(t, [&]<class T>() {
        const NormData<T> d(c);
        for (SimdLevel l : simd_levels()) {
          ScopedSimdLimit lim(l);
          for (int threads : {1, 2}) {
            ScopedThreads th(threads);
            const std::string where = c.name() + " " + dtype_name(t) + " nt " + path_name(l, threads);
            check_outputs(d, run_cpu(d, where, true), where);
          }
        }
      });
  }
}

TEST(Norm, LongRowsAndManyRows) {
  // D = 65536 and rows split over threads with partials (N * D >= 3 * 64K elements).
  for (NormCase c : {NormCase{.N = 4, .D = 65536}, NormCase{.N = 96, .D = 4097, .rms = true},
                     NormCase{.N = 1, .D = 576, .rms = true, .has_b = false}})
    with_dtype(DType::f32, [&]<class T>() {
      const NormData<T> d(c);
      for (SimdLevel l : simd_levels()) {
        ScopedSimdLimit lim(l);
        for (int threads : {1, 2, 4}) {
          ScopedThreads th(threads);
          const std::string where = c.name() + " " + path_name(l, threads);
          check_outputs(d, run_cpu(d, where), where);
        }
      }
    });
}

TEST(Norm, EmptyBatchWritesZeroGradients) {
  float x = 0, dy = 0, dx = 0, y = 0, mean = 0, rstd = 0;
  std::vector<float> dw(5, 7.0f), db(5, 7.0f);
  const auto m = [](float* p) { return TensorView::matrix(p, DType::f32, 0, 5); };
  const auto v0 = [](float* p) { return TensorView::vector(p, DType::f32, 0); };
  layer_norm(m(&x), {}, {}, 1e-5f, m(&y), v0(&mean), v0(&rstd));
  layer_norm_backward(m(&dy), m(&x), {}, v0(&mean), v0(&rstd), m(&dx), TensorView::vector(dw.data(), DType::f32, 5),
                      TensorView::vector(db.data(), DType::f32, 5));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dw[i], 0.0f) << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(db[i], 0.0f) << i;
}

// A constant row has x_hat = 0 exactly (the mean is taken relative to the
// first element): y = bias to the last bit, rstd = 1/sqrt(eps).
TEST(Norm, ConstantAndZeroRowsGiveBiasExactly) {
  for (SimdLevel l : simd_levels()) {
    ScopedSimdLimit lim(l);
    for (int64_t D : {1, 7, 1025})
      for (float value : {0.0f, 3.7f, -1e6f}) {
        const int64_t N = 3;
        std::vector<float> x(size_t(N * D), value), y(x.size()), b(static_cast<size_t>(D)), w(size_t(D), 2.0f), mean(N),
            rstd(N);
        fill_normal(b.data(), b.size(), 5);
        layer_norm(TensorView::matrix(x.data(), DType::f32, N, D), TensorView::vector(w.data(), DType::f32, D),
                   TensorView::vector(b.data(), DType::f32, D), 1e-5f, TensorView::matrix(y.data(), DType::f32, N, D),
                   TensorView::vector(mean.data(), DType::f32, N), TensorView::vector(rstd.data(), DType::f32, N));
        for (int64_t n = 0; n < N; ++n) {
          ASSERT_EQ(mean[n], value) << simd_name(l) << " D=" << D;
          ASSERT_EQ(rstd[n], 1.0f / std::sqrt(1e-5f));
          for (int64_t i = 0; i < D; ++i) ASSERT_EQ(y[n * D + i], b[i]) << simd_name(l) << " D=" << D << " i=" << i;
        }
        if (value != 0.0f) continue;
        rms_norm(TensorView::matrix(x.data(), DType::f32, N, D), {}, 1e-5f,
                 TensorView::matrix(y.data(), DType::f32, N, D), TensorView::vector(rstd.data(), DType::f32, N));
        for (int64_t i = 0; i < N * D; ++i) ASSERT_EQ(y[i], 0.0f);
      }
  }
}

// eps = 0 on a constant row: var = 0, rstd = +inf and y = 0 * inf = NaN, as
// torch gives; the backward then gives NaN dx in that row. Other rows are fine.
TEST(Norm, EpsZeroOnConstantRowIsInfRstdAndNanOutput) {
  const int64_t N = 2, D = 33;
  std::vector<float> x(size_t(N * D), 1.5f), dy(x.size(), 1.0f), y(x.size()), dx(x.size()), mean(N), rstd(N);
  fill_normal(x.data() + D, size_t(D), 9);  // row 1 is not constant
  for (SimdLevel l : simd_levels()) {
    ScopedSimdLimit lim(l);
    const auto m = [&](std::vector<float>& p) { return TensorView::matrix(p.data(), DType::f32, N, D); };
    const auto v = [&](std::vector<float>& p) { return TensorView::vector(p.data(), DType::f32, N); };
    layer_norm(m(x), {}, {}, 0.0f, m(y), v(mean), v(rstd));
    layer_norm_backward(m(dy), m(x), {}, v(mean), v(rstd), m(dx), {}, {});
    EXPECT_EQ(rstd[0], std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isfinite(rstd[1]));
    for (int64_t i = 0; i < D; ++i) {
      EXPECT_TRUE(std::isnan(y[i]) && std::isnan(dx[i])) << simd_name(l) << " i=" << i;
      EXPECT_TRUE(std::isfinite(y[D + i]) && std::isfinite(dx[D + i])) << simd_name(l) << " i=" << i;
    }
  }
}

// A NaN or an infinity makes its row NaN (LayerNorm: mean or var is NaN), as
// in torch, and leaves the other rows alone; the weight gradients, sums over
// all rows, become NaN.
TEST(Norm, NanAndInfPropagateToTheirRowOnly) {
  const int64_t N = 4, D = 19;
  const float inf = std::numeric_limits<float>::infinity();
  for (SimdLevel l : simd_levels()) {
    ScopedSimdLimit lim(l);
    std::vector<float> x(static_cast<size_t>(N * D)), dy(x.size()), y(x.size()), dx(x.size()), mean(N), rstd(N), dw(D),
        db(D);
    fill_normal(x.data(), x.size(), 3);
    fill_normal(dy.data(), dy.size(), 4);
    x[1 * D + 5] = std::nanf("");
    x[2 * D + 0] = inf;  // the shift element itself
    x[3 * D + 9] = -inf;
    const auto m = [&](std::vector<float>& p) { return TensorView::matrix(p.data(), DType::f32, N, D); };
    const auto v = [&](std::vector<float>& p, int64_t n) { return TensorView::vector(p.data(), DType::f32, n); };
    layer_norm(m(x), {}, {}, 1e-5f, m(y), v(mean, N), v(rstd, N));
    layer_norm_backward(m(dy), m(x), {}, v(mean, N), v(rstd, N), m(dx), v(dw, D), v(db, D));
    for (int64_t i = 0; i < D; ++i) {
      EXPECT_TRUE(std::isfinite(y[i]) && std::isfinite(dx[i])) << simd_name(l);
      for (int64_t n = 1; n < N; ++n)
        EXPECT_TRUE(std::isnan(y[n * D + i]) && std::isnan(dx[n * D + i])) << simd_name(l) << " row " << n;
      EXPECT_TRUE(std::isnan(dw[i])) << simd_name(l);
      EXPECT_TRUE(std::isfinite(db[i])) << simd_name(l);  // db = sum dy does not see x
    }
    // RMSNorm, as torch's x * rsqrt(mean(x^2) + eps): an infinity gives rstd = 0,
    // so y = 0 in its row except NaN (inf * 0) at the infinity; a NaN gives a NaN row.
    rms_norm(m(x), {}, 1e-5f, m(y), v(rstd, N));
    EXPECT_EQ(rstd[2], 0.0f);
    for (int64_t i = 0; i < D; ++i) {
      EXPECT_TRUE(std::isnan(y[1 * D + i]));
      EXPECT_TRUE(i == 0 ? std::isnan(y[2 * D + i]) : y[2 * D + i] == 0.0f) << i;
      EXPECT_TRUE(i == 9 ? std::isnan(y[3 * D + i]) : y[3 * D + i] == 0.0f) << i;
    }
  }
}

// The textbook one-pass variance E[x^2] - E[x]^2 in f32 (eight lanes, as a
// SIMD kernel would do it): what the two-pass statistics avoid.
double naive_one_pass_var(const float* x, int64_t D) {
  float s[8] = {}, q[8] = {};
  for (int64_t i = 0; i < D; ++i) {
    s[i % 8] += x[i];
    q[i % 8] += x[i] * x[i];
  }
  float S = 0, Q = 0;
  for (int k = 0; k < 8; ++k) S += s[k], Q += q[k];
  const float m = S / float(D);
  return double(Q / float(D) - m * m);
}

// Rows with |mean| from 1e4 to 1e8 and unit spread (8 ulps of the mean where a
// unit is below f32 resolution, 1e8: ulp = 8). The naive variance is off by
// more than 50% (0, negative, or far too large); ours stays within the
// harness tolerances, forward and backward.
TEST(Norm, LargeMeanRowsDefeatOnePassVarianceButNotOurs) {
  std::printf("  |mean|   spread  naive one-pass var rel. error   llmk var rel. error (%s)\n", simd_name(simd_level()));
  for (double center : {1e4, 1e5, 1e6, 1e7, 1e8}) {
    const float fc = float(center);
    const double spread = std::max(1.0, 8.0 * double(std::nextafter(fc, INFINITY) - fc));
    const NormCase c{.N = 4, .D = 4096, .seed = 42, .center = center, .spread = spread};
    const NormData<float> d(c);
    const NormOut ours = run_cpu(d, "demo");
    double worst_naive = 0, worst_ours = 0;
    for (int64_t n = 0; n < c.N; ++n) {
      const double var_ref = 1.0 / (d.rstd[n] * d.rstd[n]) - c.eps;
      const double naive = naive_one_pass_var(d.x.data() + n * c.D, c.D);
      const double mine = 1.0 / (double(ours.rstd[n]) * ours.rstd[n]) - c.eps;
      worst_naive = std::max(worst_naive, std::fabs(naive - var_ref) / var_ref);
      worst_ours = std::max(worst_ours, std::fabs(mine - var_ref) / var_ref);
      EXPECT_GT(std::fabs(naive - var_ref) / var_ref, 0.5)
          << "center " << center << ": naive " << naive << " vs " << var_ref << " (expected it to fail)";
    }
    std::printf("  %6.0e  %6.0f  %28.3g   %20.2g\n", center, spread, worst_naive, worst_ours);
    for (SimdLevel l : simd_levels()) {
      ScopedSimdLimit lim(l);
      const std::string where = "center " + std::to_string(center) + " " + simd_name(l);
      check_outputs(d, run_cpu(d, where), where);
    }
  }
}

// The forward sums x - x0 and its square in one pass around x0, the mean of
// the row's first vector, and takes the two-pass variance where x0 is not
// within sd / 2 of the mean (the one-pass one loses (dm / sd)^2 of the sum's
// relative rounding, up to D / W). Rows whose first vector misleads: 8
// outliers in front (x0 up to sqrt(D / 8) sd from the mean) and sorted rows
// (x0 at the bottom), around centers 0, 1e4 and 1e6, D up to 65536. With the
// second pass disabled the outlier rows fail the harness's rstd tolerance.
TEST(Norm, RowsWhoseFirstVectorMisleadsTakeTheTwoPassPath) {
  for (double center : {0.0, 1e4, 1e6})
    for (int64_t D : {int64_t(4096), int64_t(65536)})
      for (int kind = 0; kind < 2; ++kind) {
        NormCase c{.N = 3, .D = D, .seed = 7, .center = center, .spread = 1.0};
        if (kind == 0) c.front = 8, c.front_shift = 1e4;
        else c.sorted = true;
        const NormData<float> d(c);
        for (SimdLevel l : simd_levels()) {
          ScopedSimdLimit lim(l);
          const std::string where = "center " + std::to_string(center) + " D " + std::to_string(D) +
                                    (kind == 0 ? " outliers in front " : " sorted ") + simd_name(l);
          check_outputs(d, run_cpu(d, where), where);
        }
      }
}

// The weight gradients come from per-thread partials summed in thread order:
// two runs give the same bits.
TEST(Norm, BackwardIsBitwiseRepeatable) {
  ScopedThreads th(2);
  const NormCase c{.N = 256, .D = 1000};
  const NormData<float> d(c);
  const NormOut a = run_cpu(d, "run 1"), b = run_cpu(d, "run 2");
  EXPECT_EQ(0, std::memcmp(a.dw.data(), b.dw.data(), a.dw.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.db.data(), b.db.data(), a.db.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dx.data(), b.dx.data(), a.dx.size() * 4));
}

// Expects InvalidArgument whose message contains every piece.
template <class F>
void expect_invalid(F&& f, std::initializer_list<const char*> pieces) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << *pieces.begin();
  } catch (const InvalidArgument& e) {
    for (const char* p : pieces)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(Norm, BadArgumentsNameTheArgumentAndValue) {
  const int64_t N = 2, D = 8;
  std::vector<float> x(32), y(32), mean(4), rstd(4), w(8), dw(8);
  std::vector<uint16_t> h(32);
  const auto X = TensorView::matrix(x.data(), DType::f32, N, D), Y = TensorView::matrix(y.data(), DType::f32, N, D);
  const auto M = TensorView::vector(mean.data(), DType::f32, N), R = TensorView::vector(rstd.data(), DType::f32, N);
  const auto W = TensorView::vector(w.data(), DType::f32, D);
  expect_invalid([&] { layer_norm(X, W, {}, -1.0f, Y, M, R); }, {"llmk::layer_norm", "'eps' = -1", "finite and >= 0"});
  expect_invalid([&] { rms_norm(X, W, NAN, Y, R); }, {"llmk::rms_norm", "'eps' = nan"});
  expect_invalid([&] { layer_norm(TensorView::matrix(x.data(), DType::i32, N, D), W, {}, 1e-5f, Y, M, R); },
                 {"'x'", "i32[2, 8]", "f32, f16 or bf16"});
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, TensorView::matrix(y.data(), DType::f32, N, D - 1), M, R); },
                 {"'y'", "f32[2, 7]", "shape of x"});
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, TensorView::matrix(h.data(), DType::f16, N, D), M, R); },
                 {"'y'", "x's dtype f32"});
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, Y, TensorView::vector(mean.data(), DType::f32, 3), R); },
                 {"'mean'", "f32[3]", "2 elements"});
  expect_invalid([&] { layer_norm(X, TensorView::vector(w.data(), DType::f32, 7), {}, 1e-5f, Y, M, R); },
                 {"'weight'", "f32[7]", "8 elements"});
  expect_invalid([&] { layer_norm(X, {}, TensorView::vector(h.data(), DType::bf16, D), 1e-5f, Y, M, R); },
                 {"'bias'", "bf16[8]", "f32 or x's dtype f32"});
  TensorView overlapping = X;
  overlapping.stride[0] = 4;
  expect_invalid([&] { layer_norm(overlapping, W, {}, 1e-5f, Y, M, R); },
                 {"'x'", "stride 4", "row stride must be >= D"});
  expect_invalid(
      [&] {
        const auto odd = TensorView::matrix(reinterpret_cast<char*>(x.data()) + 1, DType::f32, 1, D);
        layer_norm(odd, W, {}, 1e-5f, TensorView::matrix(y.data(), DType::f32, 1, D), M, R);
      },
      {"'x'", "aligned to its element size"});
  expect_invalid([&] { rms_norm_backward(X, X, W, R, Y, TensorView::vector(h.data(), DType::f16, D)); },
                 {"llmk::rms_norm_backward", "'dweight'", "f16[8]", "must be f32"});
  expect_invalid(
      [&] { layer_norm_backward(TensorView::matrix(y.data(), DType::f32, N + 1, D), X, W, M, R, Y, {}, {}); },
      {"llmk::layer_norm_backward", "'dy'", "f32[3, 8]"});
  if (!cuda_compiled())
    expect_invalid(
        [&] { layer_norm(TensorView::matrix(x.data(), DType::f32, N, D, D, Device::cuda), {}, {}, 1e-5f, Y, M, R); },
        {"'x'", "built without CUDA"});
}

// The kernels take only a row stride: a view whose last dimension is not
// contiguous (stride[1] != 1), or a vector with stride[0] != 1, would be read
// as if it were (wrong rstd, no error). Such views are named, and a failed
// call writes nothing. A dimension of one element may have any stride.
TEST(Norm, NonUnitElementStrideIsAnError) {
  const int64_t D = 4;
  float buf[8] = {0, 9, 1, 9, 2, 9, 3, 9}, y[8], rstd[2] = {-7, -7}, w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::fill(y, y + 8, -7.0f);
  TensorView x = TensorView::matrix(buf, DType::f32, 1, D);
  x.stride[1] = 2;  // elements 0, 1, 2, 3 at buf[0], buf[2], buf[4], buf[6]
  const auto Y = TensorView::matrix(y, DType::f32, 1, D), R = TensorView::vector(rstd, DType::f32, 1);
  expect_invalid([&] { rms_norm(x, {}, 1e-5f, Y, R); }, {"llmk::rms_norm", "'x'", "stride[1] 2", "contiguous"});
  EXPECT_EQ(rstd[0], -7.0f) << "a rejected call wrote rstd";
  EXPECT_EQ(y[0], -7.0f) << "a rejected call wrote y";
  const auto X = TensorView::matrix(buf, DType::f32, 1, D);
  TensorView strided_y = Y;
  strided_y.stride[1] = 2;
  expect_invalid([&] { rms_norm(X, {}, 1e-5f, strided_y, R); }, {"'y'", "stride[1] 2", "contiguous"});
  expect_invalid([&] { rms_norm_backward(x, X, {}, R, Y, {}); }, {"llmk::rms_norm_backward", "'dy'", "stride[1] 2"});
  TensorView strided_w = TensorView::vector(w, DType::f32, D);
  strided_w.stride[0] = 2;
  expect_invalid([&] { rms_norm(X, strided_w, 1e-5f, Y, R); }, {"'weight'", "strides [2]", "contiguous vector"});
  float mean[4];
  TensorView strided_mean = TensorView::vector(mean, DType::f32, 2);
  strided_mean.stride[0] = 2;
  const auto X2 = TensorView::matrix(buf, DType::f32, 2, D), Y2 = TensorView::matrix(y, DType::f32, 2, D);
  expect_invalid([&] { layer_norm(X2, {}, {}, 1e-5f, Y2, strided_mean, TensorView::vector(rstd, DType::f32, 2)); },
                 {"'mean'", "strides [2]", "contiguous vector"});
  // A 3-d [2, 1, 4] "vector" of 8 elements whose leading stride leaves a gap.
  TensorView gapped = TensorView::vector(w, DType::f32, D);
  gapped.ndim = 3;
  gapped.shape[0] = 2, gapped.shape[1] = 1, gapped.shape[2] = 2;
  gapped.stride[0] = 3, gapped.stride[1] = 2, gapped.stride[2] = 1;
  expect_invalid([&] { rms_norm(X, gapped, 1e-5f, Y, R); }, {"'weight'", "strides [3, 2, 1]"});
  TensorView negative = TensorView::matrix(w, DType::f32, 1, D);  // [-1, -4]: 4 elements by the product
  negative.shape[0] = -1, negative.shape[1] = -D;
  expect_invalid([&] { rms_norm(X, negative, 1e-5f, Y, R); }, {"'weight'", "f32[-1, -4]"});
  // One column: its stride is never used, any value is fine.
  float one[2] = {2, -4}, out[2], r1[2], ref_out[2], ref_r[2];
  TensorView col = TensorView::matrix(one, DType::f32, 2, 1);
  col.stride[1] = 5;
  rms_norm(col, {}, 1e-5f, TensorView::matrix(out, DType::f32, 2, 1), TensorView::vector(r1, DType::f32, 2));
  rms_norm(TensorView::matrix(one, DType::f32, 2, 1), {}, 1e-5f, TensorView::matrix(ref_out, DType::f32, 2, 1),
           TensorView::vector(ref_r, DType::f32, 2));
  EXPECT_EQ(0, std::memcmp(out, ref_out, sizeof out));
  EXPECT_EQ(0, std::memcmp(r1, ref_r, sizeof r1));
}

// An output may not share memory with an input (it would overwrite a row
// still being read) nor with another output; adjacent ranges are fine.
TEST(Norm, OutputsMustNotOverlapInputsOrEachOther) {
  const int64_t N = 2, D = 8;
  std::vector<float> x(64), y(32), mean(4), rstd(8), w(8), dw(8), db(8);
  test::fill_normal(x.data(), x.size(), 3);
  const auto X = TensorView::matrix(x.data(), DType::f32, N, D), Y = TensorView::matrix(y.data(), DType::f32, N, D);
  const auto M = TensorView::vector(mean.data(), DType::f32, N), R = TensorView::vector(rstd.data(), DType::f32, N);
  const auto W = TensorView::vector(w.data(), DType::f32, D);
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, X, M, R); },
                 {"llmk::layer_norm", "'y'", "must not overlap the input 'x'"});
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, TensorView::matrix(x.data() + 9, DType::f32, N, D), M, R); },
                 {"'y'", "must not overlap the input 'x'"});
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, Y, M, M); }, {"'mean'", "must not overlap the output 'rstd'"});
  expect_invalid([&] { layer_norm(X, W, {}, 1e-5f, Y, M, TensorView::vector(w.data() + 6, DType::f32, N)); },
                 {"'rstd'", "must not overlap the input 'weight'"});
  expect_invalid([&] { rms_norm(X, W, 1e-5f, Y, TensorView::vector(x.data() + 15, DType::f32, N)); },
                 {"llmk::rms_norm", "'rstd'", "must not overlap the input 'x'"});
  layer_norm(X, W, {}, 1e-5f, Y, M, R);
  expect_invalid([&] { layer_norm_backward(Y, X, W, M, R, Y, {}, {}); }, {"'dx'", "must not overlap the input 'dy'"});
  expect_invalid(
      [&] {
        layer_norm_backward(Y, X, W, M, R, TensorView::matrix(x.data() + 32, DType::f32, N, D),
                            TensorView::vector(dw.data(), DType::f32, D), TensorView::vector(dw.data(), DType::f32, D));
      },
      {"'dweight'", "must not overlap the output 'dbias'"});
  expect_invalid(
      [&] {
        rms_norm_backward(Y, X, W, R, TensorView::matrix(x.data() + 32, DType::f32, N, D),
                          TensorView::vector(rstd.data(), DType::f32, D));
      },
      {"'dweight'", "must not overlap the input 'rstd'"});
  // Adjacent, not overlapping: y right after x's last element.
  layer_norm(X, W, {}, 1e-5f, TensorView::matrix(x.data() + 16, DType::f32, N, D), M, R);
  layer_norm_backward(Y, X, W, M, R, TensorView::matrix(x.data() + 32, DType::f32, N, D),
                      TensorView::vector(dw.data(), DType::f32, D), TensorView::vector(db.data(), DType::f32, D));
}

}  // namespace
}  // namespace llmk::test
