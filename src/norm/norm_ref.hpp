// The reference LayerNorm and RMSNorm: plain loops in double, contiguous
// [N, D] rows, the oracle of every test. Same conventions as llmk/norm.hpp
// (biased variance; weight/bias may be null = 1/0; dweight/dbias written and
// optional), but nothing is validated and everything is double.
#pragma once
#include <cstdint>

namespace llmk::ref {

// x [N, D]; w, b [D] or null; y [N, D]; mean, rstd [N].
void layer_norm(const double* x, const double* w, const double* b, int64_t N, int64_t D, double eps, double* y,
                double* mean, double* rstd);
// dy, x [N, D]; w [D] or null; mean, rstd [N]; dx [N, D]; dw, db [D] or null.
void layer_norm_backward(const double* dy, const double* x, const double* w, const double* mean, const double* rstd,
                         int64_t N, int64_t D, double* dx, double* dw, double* db);
// x [N, D]; w [D] or null; y [N, D]; rstd [N].
void rms_norm(const double* x, const double* w, int64_t N, int64_t D, double eps, double* y, double* rstd);
// dy, x [N, D]; w [D] or null; rstd [N]; dx [N, D]; dw [D] or null.
void rms_norm_backward(const double* dy, const double* x, const double* w, const double* rstd, int64_t N, int64_t D,
                       double* dx, double* dw);

}  // namespace llmk::ref
