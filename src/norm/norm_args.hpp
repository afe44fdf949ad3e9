// The argument blocks every LayerNorm / RMSNorm kernel takes, CPU and CUDA
// alike: raw pointers and 64-bit strides, already validated by norm.cpp, with
// the weight and bias converted to f32. Pointers are host or device pointers
// according to the path that receives them.
#pragma once
#include <cstdint>

namespace llmk::norm {

struct FwdArgs {
  const void* x;  // [N, x_stride] of T
  int64_t x_stride;
  const float* w;  // [D] or null (= 1)
  const float* b;  // [D] or null (= 0); LayerNorm only
  float eps;
  void* y;  // [N, y_stride] of T
  int64_t y_stride;
  float* mean;  // [N]; LayerNorm only
  float* rstd;  // [N]
  int64_t N, D;
  bool nt;  // CPU: stream y past the caches (non-temporal stores)
};

struct BwdArgs {
  const void* dy;  // [N, dy_stride] of T
  int64_t dy_stride;
  const void* x;  // [N, x_stride] of T
  int64_t x_stride;
  const float* w;     // [D] or null (= 1)
  const float* mean;  // [N]; LayerNorm only
  const float* rstd;  // [N]
  void* dx;           // [N, dx_stride] of T
  int64_t dx_stride;
  int64_t N, D;
  bool nt;  // CPU: stream dx past the caches
};

}  // namespace llmk::norm
