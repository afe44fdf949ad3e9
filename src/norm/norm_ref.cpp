// Reference LayerNorm / RMSNorm in double (see norm_ref.hpp). Written for
// clarity, straight from the formulas in docs/layernorm.md:
//   x_hat = (x - mean) * rstd,  g = dy * w,
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      (LayerNorm)
//   dx = rstd * (g - x_hat * mean(g * x_hat))                (RMSNorm, x_hat = x * rstd)
//   dw = sum over rows of dy * x_hat,  db = sum over rows of dy.
#include "norm/norm_ref.hpp"

#include <cmath>

namespace llmk::ref {

void layer_norm(const double* x, const double* w, const double* b, int64_t N, int64_t D, double eps, double* y,
                double* mean, double* rstd) {
  for (int64_t n = 0; n < N; ++n) {
    const double* xr = x + n * D;
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += xr[i];
    const double m = s / double(D);
    double v = 0;
    for (int64_t i = 0; i < D; ++i) v += (xr[i] - m) * (xr[i] - m);
    const double rs = 1.0 / std::sqrt(v / double(D) + eps);
    for (int64_t i = 0; i < D; ++i) y[n * D + i] = (xr[i] - m) * rs * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
    mean[n] = m;
    rstd[n] = rs;
  }
}

void layer_norm_backward(const double* dy, const double* x, const double* w, const double* mean, const double* rstd,
                         int64_t N, int64_t D, double* dx, double* dw, double* db) {
  for (int64_t i = 0; i < D; ++i) {
    if (dw) dw[i] = 0;
    if (db) db[i] = 0;
  }
  for (int64_t n = 0; n < N; ++n) {
    const double *xr = x + n * D, *dyr = dy + n * D;
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < D; ++i) {
      const double xh = (xr[i] - mean[n]) * rstd[n], g = dyr[i] * (w ? w[i] : 1.0);
      sg += g;
      sgx += g * xh;
      if (dw) dw[i] += dyr[i] * xh;
      if (db) db[i] += dyr[i];
    }
    for (int64_t i = 0; i < D; ++i) {
      const double xh = (xr[i] - mean[n]) * rstd[n], g = dyr[i] * (w ? w[i] : 1.0);
      dx[n * D + i] = rstd[n] * (g - sg / double(D) - xh * sgx / double(D));
    }
  }
}

void rms_norm(const double* x, const double* w, int64_t N, int64_t D, double eps, double* y, double* rstd) {
  for (int64_t n = 0; n < N; ++n) {
    const double* xr = x + n * D;
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += xr[i] * xr[i];
    const double rs = 1.0 / std::sqrt(s / double(D) + eps);
    for (int64_t i = 0; i < D; ++i) y[n * D + i] = xr[i] * rs * (w ? w[i] : 1.0);
    rstd[n] = rs;
  }
}

void rms_norm_backward(const double* dy, const double* x, const double* w, const double* rstd, int64_t N, int64_t D,
                       double* dx, double* dw) {
  for (int64_t i = 0; i < D; ++i)
    if (dw) dw[i] = 0;
  for (int64_t n = 0; n < N; ++n) {
    const double *xr = x + n * D, *dyr = dy + n * D;
    double sgx = 0;
    for (int64_t i = 0; i < D; ++i) {
      const double xh = xr[i] * rstd[n];
      sgx += dyr[i] * (w ? w[i] : 1.0) * xh;
      if (dw) dw[i] += dyr[i] * xh;
    }
    for (int64_t i = 0; i < D; ++i)
      dx[n * D + i] = rstd[n] * (dyr[i] * (w ? w[i] : 1.0) - xr[i] * rstd[n] * sgx / double(D));
  }
}

}  // namespace llmk::ref
