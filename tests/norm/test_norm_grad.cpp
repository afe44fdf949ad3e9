// The backward formulas themselves, in double, independently of any fast
// path: central finite differences of the reference forward for every
// gradient, the reference backward against an explicit Jacobian, and the
// invariants (LayerNorm dx rows sum to 0, dbias = sum of dy) on the
// reference and on the CPU fast path.
#include <cmath>
#include <vector>

#include "llmk/norm.hpp"
#include "tests/norm/norm_harness.hpp"

namespace llmk::test {
namespace {

struct Problem {
  int64_t N, D;
  bool rms, has_w, has_b;
  double eps = 1e-5;
  std::vector<double> x, w, b, g;  // g: the upstream gradient dy
  Problem(int64_t n, int64_t d, bool r, bool hw, bool hb, uint64_t seed) : N(n), D(d), rms(r), has_w(hw), has_b(hb) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    for (int64_t i = 0; i < N * D; ++i) x.push_back(0.3 + nd(gen)), g.push_back(nd(gen));
    for (int64_t i = 0; i < D; ++i) w.push_back(1.0 + 0.5 * nd(gen)), b.push_back(0.5 * nd(gen));
  }
  // L = sum(g * y): its gradients are what the backward computes for dy = g.
  double loss() const {
    std::vector<double> y(static_cast<size_t>(N * D)), m(static_cast<size_t>(N)), r(static_cast<size_t>(N));
    if (rms) ref::rms_norm(x.data(), has_w ? w.data() : nullptr, N, D, eps, y.data(), r.data());
    else
      ref::layer_norm(x.data(), has_w ? w.data() : nullptr, has_b ? b.data() : nullptr, N, D, eps, y.data(), m.data(),
                      r.data());
    double L = 0;
    for (size_t i = 0; i < y.size(); ++i) L += g[i] * y[i];
    return L;
  }
  void backward(std::vector<double>& dx, std::vector<double>& dw, std::vector<double>& db) const {
    std::vector<double> y(static_cast<size_t>(N * D)), m(static_cast<size_t>(N)), r(static_cast<size_t>(N));
    dx.assign(size_t(N * D), 0);
    dw.assign(size_t(D), 0);
    db.assign(size_t(D), 0);
    const double* wp = has_w ? w.data() : nullptr;
    if (rms) {
      ref::rms_norm(x.data(), wp, N, D, eps, y.data(), r.data());
      ref::rms_norm_backward(g.data(), x.data(), wp, r.data(), N, D, dx.data(), dw.data());
    } else {
      ref::layer_norm(x.data(), wp, has_b ? b.data() : nullptr, N, D, eps, y.data(), m.data(), r.data());
      ref::layer_norm_backward(g.data(), x.data(), wp, m.data(), r.data(), N, D, dx.data(), dw.data(), db.data());
    }
  }
};

// dL/dv[i] by central differences with step h. Truncation error is
// h^2/6 * |L'''| (~1e-10 here: the third derivatives are O(rstd^3) = O(1)) and
// rounding error ~ u64 * |L| / h (~1e-10 for |L| ~ 10), so a tolerance of
// 1e-6 (1 + |grad|) leaves four decades of margin yet catches any wrong term.
double central_difference(Problem& p, std::vector<double>& v, size_t i) {
  const double h = 1e-5, keep = v[i];
  v[i] = keep + h;
  const double up = p.loss();
  v[i] = keep - h;
  const double down = p.loss();
  v[i] = keep;
  return (up - down) / (2 * h);
}

TEST(NormGrad, FiniteDifferencesMatchEveryGradient) {
  const int64_t shapes[][2] = {{1, 1}, {2, 2}, {3, 5}, {2, 16}, {4, 33}, {1, 100}};
  uint64_t seed = 1;
  for (const auto& s : shapes)
    for (int rms = 0; rms < 2; ++rms)
      for (int hw = 0; hw < 2; ++hw) {
        Problem p(s[0], s[1], rms, hw, !rms, seed++);
        std::vector<double> dx, dw, db;
        p.backward(dx, dw, db);
        const std::string where = std::string(rms ? "rms" : "ln") + " N=" + std::to_string(p.N) +
                                  " D=" + std::to_string(p.D) + (hw ? " w" : "");
        for (size_t i = 0; i < p.x.size(); ++i)
          EXPECT_NEAR(dx[i], central_difference(p, p.x, i), 1e-6 * (1 + std::fabs(dx[i]))) << where << " dx " << i;
        for (size_t i = 0; i < p.w.size() && hw; ++i)
          EXPECT_NEAR(dw[i], central_difference(p, p.w, i), 1e-6 * (1 + std::fabs(dw[i]))) << where << " dw " << i;
        for (size_t i = 0; i < p.b.size() && !rms; ++i)
          EXPECT_NEAR(db[i], central_difference(p, p.b, i), 1e-6 * (1 + std::fabs(db[i]))) << where << " db " << i;
      }
}

// The explicit Jacobian, derived by hand:
//   LayerNorm: dy_i/dx_j = w_i rstd (delta_ij - 1/D - xh_i xh_j / D)
//   RMSNorm:   dy_i/dx_j = w_i rstd (delta_ij - xh_i xh_j / D)
// so dx_j = sum_i dy_i J_ij, formed in O(D^2) with no shared code with the
// reference's O(D) backward. They agree to rounding: below 1e-10.
TEST(NormGrad, BackwardEqualsExplicitJacobian) {
  uint64_t seed = 100;
  for (int64_t D : {1, 2, 3, 8, 17, 32})
    for (int rms = 0; rms < 2; ++rms) {
      Problem p(3, D, rms, true, false, seed++);
      std::vector<double> dx, dw, db, y(size_t(p.N * D)), m(size_t(p.N)), r(size_t(p.N));
      p.backward(dx, dw, db);
      if (rms) ref::rms_norm(p.x.data(), p.w.data(), p.N, D, p.eps, y.data(), r.data());
      else ref::layer_norm(p.x.data(), p.w.data(), nullptr, p.N, D, p.eps, y.data(), m.data(), r.data());
      for (int64_t n = 0; n < p.N; ++n) {
        std::vector<double> xh(static_cast<size_t>(D));
        for (int64_t i = 0; i < D; ++i) xh[i] = (p.x[n * D + i] - (rms ? 0.0 : m[n])) * r[n];
        for (int64_t j = 0; j < D; ++j) {
          double e = 0;
          for (int64_t i = 0; i < D; ++i) {
            const double J = p.w[i] * r[n] * ((i == j) - (rms ? 0.0 : 1.0 / D) - xh[i] * xh[j] / D);
            e += p.g[n * D + i] * J;
          }
          EXPECT_NEAR(dx[n * D + j], e, 1e-10) << (rms ? "rms" : "ln") << " D=" << D << " n=" << n << " j=" << j;
        }
      }
    }
}

// Rows of LayerNorm's dx sum to 0 (dx is orthogonal to the all-ones vector)
// and dbias = sum over rows of dy: in double on the reference (to 1e-12
// relative) and in f32 on the fast path (to acc_tol of the sums involved).
TEST(NormGrad, LayerNormInvariants) {
  for (int64_t D : {7, 1024, 4097}) {
    const NormCase c{.N = 8, .D = D, .seed = uint64_t(D)};
    const NormData<float> d(c);
    for (int64_t n = 0; n < c.N; ++n) {
      double s = 0, sabs = 0;
      for (int64_t i = 0; i < D; ++i) s += d.dx[n * D + i], sabs += std::fabs(d.dx[n * D + i]);
      EXPECT_LE(std::fabs(s), 1e-12 * sabs) << "reference row " << n << " D=" << D;
    }
    std::vector<float> y(size_t(c.N * D)), dx(y.size()), mean(c.N), rstd(c.N), dw(D), db(D);
    const auto m = [&](const void* p) { return TensorView::matrix(p, DType::f32, c.N, D); };
    const auto v = [&](std::vector<float>& p) { return TensorView::vector(p.data(), DType::f32, int64_t(p.size())); };
    layer_norm(m(d.x.data()), {}, {}, c.eps, m(y.data()), v(mean), v(rstd));
    layer_norm_backward(m(d.dy.data()), m(d.x.data()), {}, v(mean), v(rstd), m(dx.data()), v(dw), v(db));
    for (int64_t n = 0; n < c.N; ++n) {
      // sum_i dx_i = -rstd c2 sum_i x_hat_i: the rounding in x_hat (acc_tol(D)
      // relative) times |terms| is what is left.
      double s = 0, sabs = 0;
      for (int64_t i = 0; i < D; ++i) s += dx[n * D + i], sabs += std::fabs(dx[n * D + i]);
      EXPECT_LE(std::fabs(s), 4 * acc_tol(D) * sabs) << "fast path row " << n << " D=" << D;
    }
    for (int64_t i = 0; i < D; ++i) {
      double s = 0, sabs = 0;
      for (int64_t n = 0; n < c.N; ++n) s += d.dyd[n * D + i], sabs += std::fabs(d.dyd[n * D + i]);
      EXPECT_NEAR(d.db[i], s, 1e-12 * sabs);
      EXPECT_NEAR(db[i], s, acc_tol(c.N) * sabs) << "fast path column " << i;
    }
  }
}

}  // namespace
}  // namespace llmk::test
