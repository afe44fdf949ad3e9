// The differential harness of LayerNorm / RMSNorm, shared by the CPU tests
// (test_norm.cpp) and the CUDA tests (test_norm_cuda.cu): builds the inputs of
// a case (strided, misaligned, in f32/f16/bf16), runs the double reference on
// exactly those values, and checks an implementation's outputs against it.
//
// Tolerances. Inputs are exact in T and the reference is double, so every
// error comes from f32 arithmetic and the final rounding to T:
//  - a length-n f32 sum is off by at most ~ lambda * sqrt(n) * u32 * sum|terms|
//    (the probabilistic rounding-error bound, Higham & Mary 2019; lambda = 8
//    here, and the inputs are random), plus 16 u32 for the few roundings
//    around it: acc_tol(n);
//  - an output stored in T is further off by half an ulp: rtol = eps_T.
// Each output's atol is acc_tol of the sums it depends on, times the magnitude
// of their terms, measured on the reference (scales below).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "llmk/dtype.hpp"
#include "norm/norm_ref.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {

inline double acc_tol(int64_t n) { return (8.0 * std::sqrt(double(std::max<int64_t>(n, 1))) + 16.0) * eps_of<float>(); }

struct NormCase {
  int64_t N = 1, D = 1;
  bool rms = false;
  bool has_w = true, has_b = true;
  bool param_f32 = true;  // weight/bias in f32 (else in the dtype of x)
  int64_t pad = 0;        // row stride = D + pad
  int misalign = 0;       // elements the data starts past a 64-byte boundary
  float eps = 1e-5f;
  uint64_t seed = 1;
  double center = 0.0, spread = 1.0;  // x ~ N(center, spread)
  int64_t front = 0;                  // the first `front` elements of a row shifted by front_shift
  double front_shift = 0.0;
  bool sorted = false;  // each row sorted ascending
  std::string name() const {
    return std::string(rms ? "rms" : "ln") + " N=" + std::to_string(N) + " D=" + std::to_string(D) +
           " pad=" + std::to_string(pad) + " misalign=" + std::to_string(misalign) + (has_w ? " w" : "") +
           (has_b ? " b" : "") + (param_f32 ? " f32-params" : " T-params");
  }
  int64_t stride() const { return D + pad; }
};

// Host inputs of a case in T and their exact values in double, with the
// reference outputs.
template <class T>
struct NormData {
  NormCase c;
  std::vector<T> x, dy;                           // [N, stride]
  std::vector<float> wf, bf;                      // [D] (f32 parameters)
  std::vector<T> wt, bt;                          // [D] (T parameters)
  std::vector<double> xd, dyd, wd, bd;            // exact values, contiguous
  std::vector<double> y, mean, rstd, dx, dw, db;  // reference

  explicit NormData(const NormCase& cs) : c(cs) {
    const int64_t N = c.N, D = c.D, S = c.stride();
    x.assign(size_t(N * S), from_f32<T>(0.0f));
    dy = x;
    std::vector<T> row(static_cast<size_t>(D));
    for (int64_t n = 0; n < N; ++n) {
      fill_normal(row.data(), size_t(D), c.seed * 1000003 + uint64_t(n), c.center, c.spread);
      for (int64_t i = 0; i < std::min(c.front, D); ++i)
        row[size_t(i)] = from_f32<T>(float(to_f32(row[size_t(i)]) + c.front_shift));
      if (c.sorted) std::sort(row.begin(), row.end(), [](T a, T b) { return to_f32(a) < to_f32(b); });
      std::copy(row.begin(), row.end(), x.begin() + n * S);
      fill_normal(row.data(), size_t(D), c.seed * 7919 + uint64_t(n) + 77, 0.0, 1.0);
      std::copy(row.begin(), row.end(), dy.begin() + n * S);
    }
    std::vector<T> p(static_cast<size_t>(D));
    fill_normal(p.data(), size_t(D), c.seed + 11, 1.0, 0.5);
    wt = p;
    fill_normal(p.data(), size_t(D), c.seed + 12, 0.0, 0.5);
    bt = p;
    wf = to_floats(wt.data(), size_t(D));  // same values: T -> f32 is exact
    bf = to_floats(bt.data(), size_t(D));
    xd.resize(static_cast<size_t>(N * D));
    dyd.resize(static_cast<size_t>(N * D));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < D; ++i) {
        xd[size_t(n * D + i)] = to_f32(x[size_t(n * S + i)]);
        dyd[size_t(n * D + i)] = to_f32(dy[size_t(n * S + i)]);
      }
    wd.assign(wf.begin(), wf.end());
    bd.assign(bf.begin(), bf.end());
    y.resize(static_cast<size_t>(N * D));
    dx.resize(static_cast<size_t>(N * D));
    mean.resize(static_cast<size_t>(N));
    rstd.resize(static_cast<size_t>(N));
    dw.resize(static_cast<size_t>(D));
    db.resize(static_cast<size_t>(D));
    const double* w = c.has_w ? wd.data() : nullptr;
    if (c.rms) {
      ref::rms_norm(xd.data(), w, N, D, c.eps, y.data(), rstd.data());
      ref::rms_norm_backward(dyd.data(), xd.data(), w, rstd.data(), N, D, dx.data(), dw.data());
    } else {
      ref::layer_norm(xd.data(), w, c.has_b ? bd.data() : nullptr, N, D, c.eps, y.data(), mean.data(), rstd.data());
      ref::layer_norm_backward(dyd.data(), xd.data(), w, mean.data(), rstd.data(), N, D, dx.data(), dw.data(),
                               db.data());
    }
  }
};

// What an implementation produced, as floats, rows contiguous.
struct NormOut {
  std::vector<float> y, mean, rstd, dx, dw, db;
};

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

// Checks every output of `o` against the reference in `d`.
template <class T>
void check_outputs(const NormData<T>& d, const NormOut& o, const std::string& where) {
  const NormCase& c = d.c;
  const int64_t N = c.N, D = c.D;
  const double uT = eps_of<T>(), u32 = eps_of<float>();
  // Magnitudes of the terms behind each output, from the reference.
  double x_dev = 0, xh_dev = 0, dx_terms = 0;
  std::vector<double> dw_terms(size_t(D), 0.0), db_terms(size_t(D), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const double m = c.rms ? 0.0 : d.mean[size_t(n)], rs = d.rstd[size_t(n)];
    double c1 = 0, c2 = 0, gmax = 0, xhmax = 0, row_dev = 0;
    for (int64_t i = 0; i < D; ++i) {
      const double xv = d.xd[size_t(n * D + i)], dyv = d.dyd[size_t(n * D + i)];
      const double xh = (xv - m) * rs, g = dyv * (c.has_w ? d.wd[size_t(i)] : 1.0);
      row_dev = std::max(row_dev, std::fabs(c.rms ? xv : xv - d.xd[size_t(n * D)]));
      c1 += std::fabs(g) / double(D);
      c2 += std::fabs(g * xh) / double(D);
      gmax = std::max(gmax, std::fabs(g));
      xhmax = std::max(xhmax, std::fabs(xh));
      dw_terms[size_t(i)] += std::fabs(dyv * xh);
      db_terms[size_t(i)] += std::fabs(dyv);
    }
    dx_terms = std::max(dx_terms, rs * (gmax + c1 + xhmax * c2));
    x_dev = std::max(x_dev, row_dev);
    xh_dev = std::max(xh_dev, row_dev * rs);  // bounds |x - x0| * rstd: the error of x_hat scales with it
  }
  // y = x_hat * w + b: x_hat carries the mean and rstd errors, b one rounding.
  const double y_terms = xh_dev * (c.has_w ? max_abs(d.wd) : 1.0) + (c.has_b && !c.rms ? max_abs(d.bd) : 0.0);
  EXPECT_TRUE(all_close(o.y.data(), d.y.data(), d.y.size(), 2 * acc_tol(D) * y_terms, uT, where + " y"));
  if (!c.rms) EXPECT_TRUE(all_close(o.mean.data(), d.mean.data(), size_t(N), acc_tol(D) * x_dev, u32, where + " mean"));
  EXPECT_TRUE(all_close(o.rstd.data(), d.rstd.data(), size_t(N), 0.0, acc_tol(D), where + " rstd"));
  EXPECT_TRUE(all_close(o.dx.data(), d.dx.data(), d.dx.size(), 3 * acc_tol(D) * dx_terms, uT, where + " dx"));
  const double dw_scale = *std::max_element(dw_terms.begin(), dw_terms.end());
  const double db_scale = *std::max_element(db_terms.begin(), db_terms.end());
  EXPECT_TRUE(all_close(o.dw.data(), d.dw.data(), size_t(D), (acc_tol(N) + 2 * acc_tol(D)) * dw_scale, u32,
                        where + " dweight"));
  if (!c.rms) EXPECT_TRUE(all_close(o.db.data(), d.db.data(), size_t(D), acc_tol(N) * db_scale, u32, where + " dbias"));
}

// Calls f.template operator()<T>() with T the storage type of t.
template <class F>
void with_dtype(DType t, F&& f) {
  if (t == DType::f32) f.template operator()<float>();
  if (t == DType::f16) f.template operator()<f16>();
  if (t == DType::bf16) f.template operator()<bf16>();
}

// Rows of a strided [N, stride] array as contiguous floats.
template <class T>
std::vector<float> unstride(const T* p, int64_t N, int64_t D, int64_t stride) {
  std::vector<float> v(static_cast<size_t>(N * D));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < D; ++i) v[size_t(n * D + i)] = to_f32(p[n * stride + i]);
  return v;
}

// The shapes every implementation runs: powers of two and their neighbours,
// D = 1, tiny and long rows, one row and many.
inline std::vector<NormCase> standard_cases() {
  std::vector<NormCase> v;
  const int64_t shapes[][2] = {{1, 1},    {3, 1},    {2, 7},    {5, 31},   {4, 64},   {3, 255},    {6, 576},
                               {5, 1023}, {4, 1024}, {6, 1025}, {3, 4096}, {2, 4097}, {300, 1025}, {1, 65536}};
  uint64_t seed = 1;
  for (const auto& s : shapes)
    for (int rms = 0; rms < 2; ++rms) {
      NormCase c;
      c.N = s[0];
      c.D = s[1];
      c.rms = rms;
      c.seed = seed++;
      switch (seed % 4) {  // cycle through parameter kinds, strides and alignments
        case 0: break;
        case 1:
          c.param_f32 = false;
          c.pad = 3;
          c.misalign = 1;
          break;
        case 2:
          c.has_w = false;
          c.has_b = false;
          c.pad = 8;
          break;
        case 3:
          c.has_b = false;
          c.misalign = 3;
          c.pad = 1;
          break;
      }
      v.push_back(c);
    }
  return v;
}

}  // namespace llmk::test
