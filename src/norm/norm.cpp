// The public LayerNorm / RMSNorm entry points (llmk/norm.hpp): validate every
// argument, convert a half-precision weight/bias to f32, and hand raw
// pointers to the CPU drivers (norm_cpu.cpp) or the CUDA launchers
// (norm_fwd.cu, norm_bwd.cu). Nothing below this layer validates.
#include "llmk/norm.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "llmk/error.hpp"
#include "norm/norm_cpu.hpp"
#ifdef LLMK_HAVE_CUDA
#include "core/cuda_check.cuh"
#include "norm/norm_cuda.hpp"
#endif

namespace llmk {
namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

bool elem_aligned(const TensorView& v) { return reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype) == 0; }

// The [N, D] input every call normalizes.
void check_x(const char* fn, const TensorView& x) {
  LLMK_CHECK_ARG(x.ndim == 2, fn, "x", x.describe(), "must be a 2-d [N, D] view");
  LLMK_CHECK_ARG(is_float(x.dtype), fn, "x", x.describe(), "dtype must be f32, f16 or bf16");
  LLMK_CHECK_ARG(x.rows() >= 0 && x.cols() >= 1, fn, "x", x.describe(), "needs N >= 0 and D >= 1");
  LLMK_CHECK_ARG(x.rows() <= 1 || x.row_stride() >= x.cols(), fn, "x", x.describe(), "row stride must be >= D");
  check_last_contiguous(fn, "x", x);  // the kernels take a row stride only
  LLMK_CHECK_ARG(x.rows() == 0 || !x.empty(), fn, "x", x.describe(), "data must not be null");
  LLMK_CHECK_ARG(elem_aligned(x), fn, "x", x.data, "must be aligned to its element size");
  LLMK_CHECK_ARG(x.device == Device::cpu || cuda_compiled(), fn, "x", x.describe(),
                 "is on CUDA but this llmk was built without CUDA");
}

// Another [N, D] view of x's dtype and device (y, dy, dx).
void check_like_x(const char* fn, const char* arg, const TensorView& v, const TensorView& x) {
  LLMK_CHECK_ARG(v.ndim == 2 && v.rows() == x.rows() && v.cols() == x.cols(), fn, arg, v.describe(),
                 "must have the shape of x, " + x.describe());
  LLMK_CHECK_ARG(v.dtype == x.dtype, fn, arg, v.describe(), std::string("must have x's dtype ") + dtype_name(x.dtype));
  LLMK_CHECK_ARG(v.device == x.device, fn, arg, v.describe(),
                 std::string("must be on x's device ") + device_name(x.device));
  LLMK_CHECK_ARG(v.rows() <= 1 || v.row_stride() >= v.cols(), fn, arg, v.describe(), "row stride must be >= D");
  check_last_contiguous(fn, arg, v);
  LLMK_CHECK_ARG(v.rows() == 0 || !v.empty(), fn, arg, v.describe(), "data must not be null");
  LLMK_CHECK_ARG(elem_aligned(v), fn, arg, v.data, "must be aligned to its element size");
}

// True when v's elements are dense in row-major order (a dimension of one element may have any stride; a
// negative extent is never dense, so two of them cannot pass for a positive element count).
bool dense(const TensorView& v) {
  int64_t expected = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    if (v.shape[i] < 0 || (v.shape[i] > 1 && v.stride[i] != expected)) return false;
    expected *= v.shape[i];
  }
  return true;
}

// describe() and every stride (describe() shows the row and last strides only).
std::string with_strides(const TensorView& v) {
  std::string s = v.describe() + ", strides [";
  for (int i = 0; i < v.ndim; ++i) s += (i ? ", " : "") + std::to_string(v.stride[i]);
  return s + "]";
}

// A contiguous vector of n elements on x's device (dtype checked by the caller): any shape of n elements
// ([n], [1, n], [n, 1], ...) that is dense, since the kernels read it as n consecutive values.
void check_vector(const char* fn, const char* arg, const TensorView& v, int64_t n, const TensorView& x) {
  const std::string need = "must be a contiguous vector of " + std::to_string(n) + " elements";
  LLMK_CHECK_ARG(v.numel() == n, fn, arg, v.describe(), need);
  LLMK_CHECK_ARG(dense(v), fn, arg, with_strides(v), need);
  LLMK_CHECK_ARG(v.device == x.device, fn, arg, v.describe(),
                 std::string("must be on x's device ") + device_name(x.device));
  LLMK_CHECK_ARG(n == 0 || !v.empty(), fn, arg, v.describe(), "data must not be null");
  LLMK_CHECK_ARG(elem_aligned(v), fn, arg, v.data, "must be aligned to its element size");
}

void check_f32_vector(const char* fn, const char* arg, const TensorView& v, int64_t n, const TensorView& x) {
  LLMK_CHECK_ARG(v.dtype == DType::f32, fn, arg, v.describe(), "dtype must be f32");
  check_vector(fn, arg, v, n, x);
}

// weight or bias: absent, or [D] of f32 or x's dtype.
void check_param(const char* fn, const char* arg, const TensorView& v, const TensorView& x) {
  if (v.empty()) return;
  LLMK_CHECK_ARG(v.dtype == DType::f32 || v.dtype == x.dtype, fn, arg, v.describe(),
                 std::string("dtype must be f32 or x's dtype ") + dtype_name(x.dtype));
  check_vector(fn, arg, v, x.cols(), x);
}

// Every output against every input and the other outputs: an output that
// shares memory with an input would overwrite it while it is still read.
using Named = std::pair<const char*, const TensorView*>;
void check_no_overlap(const char* fn, std::initializer_list<Named> outs, std::initializer_list<Named> ins) {
  for (auto o = outs.begin(); o != outs.end(); ++o) {
    for (const Named& i : ins)
      LLMK_CHECK_ARG(!views_overlap(*o->second, *i.second), fn, o->first, o->second->describe(),
                     std::string("must not overlap the input '") + i.first + "'");
    for (auto p = o + 1; p != outs.end(); ++p)
      LLMK_CHECK_ARG(!views_overlap(*o->second, *p->second), fn, o->first, o->second->describe(),
                     std::string("must not overlap the output '") + p->first + "'");
  }
}

void check_eps(const char* fn, float eps) {
  LLMK_CHECK_ARG(std::isfinite(eps) && eps >= 0.0f, fn, "eps", eps, "must be finite and >= 0");
}

// weight / bias as f32: the caller's pointer when it already is, else a
// converted copy held by this object (host or device memory).
class F32Param {
 public:
  F32Param(const TensorView& v, Stream stream) {
#ifdef LLMK_HAVE_CUDA
    stream_ = stream;
#endif
    if (v.empty()) return;
    if (v.dtype == DType::f32) {
      p_ = static_cast<const float*>(v.data);
      return;
    }
    const int64_t n = v.numel();
    if (v.device == Device::cpu) {
      host_.resize(size_t(n));
      convert(v.data, v.dtype, host_.data(), DType::f32, size_t(n));
      p_ = host_.data();
      return;
    }
#ifdef LLMK_HAVE_CUDA
    LLMK_CUDA_CHECK(cudaMallocAsync(&dev_, size_t(n) * sizeof(float), stream));
    p_ = dev_;
    const cudaError_t e = norm_cuda::to_f32(v.data, v.dtype, dev_, n, stream);
    if (e != cudaSuccess) cudaFreeAsync(dev_, stream);  // the destructor does not run: the constructor throws
    LLMK_CUDA_CHECK(e);
#endif
  }
  ~F32Param() {
#ifdef LLMK_HAVE_CUDA
    if (dev_) cudaFreeAsync(dev_, stream_);
#endif
  }
  F32Param(const F32Param&) = delete;
  F32Param& operator=(const F32Param&) = delete;
  const float* get() const { return p_; }

 private:
  const float* p_ = nullptr;
  std::vector<float> host_;
#ifdef LLMK_HAVE_CUDA  // a device copy of a non-f32 parameter
  float* dev_ = nullptr;
  Stream stream_ = nullptr;
#endif
};

void run_forward(norm::FwdArgs a, DType t, bool rms, Device dev, Stream stream) {
  a.nt = norm_cpu::stream_outputs(2 * a.N * a.D * int64_t(dtype_size(t)));  // reads x, writes y
  if (dev == Device::cpu) return norm_cpu::forward(a, t, rms);
#ifdef LLMK_HAVE_CUDA
  LLMK_CUDA_CHECK(norm_cuda::forward(a, t, rms, reinterpret_cast<cudaStream_t>(stream)));
#endif
}

void run_backward(norm::BwdArgs a, DType t, bool rms, float* dw, float* db, Device dev, Stream stream) {
  a.nt = norm_cpu::stream_outputs(3 * a.N * a.D * int64_t(dtype_size(t)));  // reads x, dy, writes dx
  if (dev == Device::cpu) return norm_cpu::backward(a, t, rms, dw, db);
#ifdef LLMK_HAVE_CUDA
  LLMK_CUDA_CHECK(norm_cuda::backward(a, t, rms, dw, db, reinterpret_cast<cudaStream_t>(stream)));
#endif
}

}  // namespace

void layer_norm(const TensorView& x, const TensorView& weight, const TensorView& bias, float eps, const TensorView& y,
                const TensorView& mean, const TensorView& rstd, Stream stream) {
  const char* fn = "llmk::layer_norm";
  check_x(fn, x);
  check_param(fn, "weight", weight, x);
  check_param(fn, "bias", bias, x);
  check_eps(fn, eps);
  check_like_x(fn, "y", y, x);
  check_f32_vector(fn, "mean", mean, x.rows(), x);
  check_f32_vector(fn, "rstd", rstd, x.rows(), x);
  check_no_overlap(fn, {{"y", &y}, {"mean", &mean}, {"rstd", &rstd}},
                   {{"x", &x}, {"weight", &weight}, {"bias", &bias}});
  if (x.rows() == 0) return;
  const F32Param w(weight, stream), b(bias, stream);
  const norm::FwdArgs a{x.data,         x.row_stride(),    w.get(),           b.get(),  eps,      y.data,
                        y.row_stride(), mean.ptr<float>(), rstd.ptr<float>(), x.rows(), x.cols(), false};
  run_forward(a, x.dtype, false, x.device, stream);
}

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y, const TensorView& rstd,
              Stream stream) {
  const char* fn = "llmk::rms_norm";
  check_x(fn, x);
  check_param(fn, "weight", weight, x);
  check_eps(fn, eps);
  check_like_x(fn, "y", y, x);
  check_f32_vector(fn, "rstd", rstd, x.rows(), x);
  check_no_overlap(fn, {{"y", &y}, {"rstd", &rstd}}, {{"x", &x}, {"weight", &weight}});
  if (x.rows() == 0) return;
  const F32Param w(weight, stream);
  const norm::FwdArgs a{x.data,         x.row_stride(), w.get(),           nullptr,  eps,      y.data,
                        y.row_stride(), nullptr,        rstd.ptr<float>(), x.rows(), x.cols(), false};
  run_forward(a, x.dtype, true, x.device, stream);
}

namespace {
void backward_common(const char* fn, bool rms, const TensorView& dy, const TensorView& x, const TensorView& weight,
                     const TensorView& mean, const TensorView& rstd, const TensorView& dx, const TensorView& dweight,
                     const TensorView& dbias, Stream stream) {
  check_x(fn, x);
  check_like_x(fn, "dy", dy, x);
  check_param(fn, "weight", weight, x);
  if (!rms) check_f32_vector(fn, "mean", mean, x.rows(), x);
  check_f32_vector(fn, "rstd", rstd, x.rows(), x);
  check_like_x(fn, "dx", dx, x);
  if (!dweight.empty()) check_f32_vector(fn, "dweight", dweight, x.cols(), x);
  if (!dbias.empty()) check_f32_vector(fn, "dbias", dbias, x.cols(), x);
  check_no_overlap(fn, {{"dx", &dx}, {"dweight", &dweight}, {"dbias", &dbias}},
                   {{"dy", &dy}, {"x", &x}, {"weight", &weight}, {"mean", &mean}, {"rstd", &rstd}});
  const F32Param w(weight, stream);
  const norm::BwdArgs a{dy.data,           dy.row_stride(), x.data,
                        x.row_stride(),    w.get(),         rms ? nullptr : mean.ptr<float>(),
                        rstd.ptr<float>(), dx.data,         dx.row_stride(),
                        x.rows(),          x.cols(),        false};
  run_backward(a, x.dtype, rms, dweight.ptr<float>(), dbias.ptr<float>(), x.device, stream);
}
}  // namespace

void layer_norm_backward(const TensorView& dy, const TensorView& x, const TensorView& weight, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dx, const TensorView& dweight,
                         const TensorView& dbias, Stream stream) {
  backward_common("llmk::layer_norm_backward", false, dy, x, weight, mean, rstd, dx, dweight, dbias, stream);
}

void rms_norm_backward(const TensorView& dy, const TensorView& x, const TensorView& weight, const TensorView& rstd,
                       const TensorView& dx, const TensorView& dweight, Stream stream) {
  backward_common("llmk::rms_norm_backward", true, dy, x, weight, TensorView{}, rstd, dx, dweight, TensorView{},
                  stream);
}

}  // namespace llmk
