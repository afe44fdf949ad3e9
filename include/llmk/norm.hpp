// LayerNorm and RMSNorm, forward and backward, on the CPU and on CUDA.
//
//   layer_norm:  y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps)
//   rms_norm:    y = x * rstd * weight,                  rstd = 1 / sqrt(mean(x^2) + eps)
//
// Conventions:
//  - x, dy, y, dx are [N, D] views (TensorView::matrix) of one dtype (f32, f16
//    or bf16), last dimension contiguous (stride[1] = 1; any when D = 1), any
//    row stride >= D. All arithmetic is f32; var is the biased (1/D)
//    variance, as in torch.
//  - weight and bias are [D] vectors, f32 or the dtype of x; either may be
//    absent (an empty TensorView: weight = 1, bias = 0). Every vector
//    argument (weight, bias, mean, rstd, dweight, dbias) may have any shape of
//    that many elements whose strides make them consecutive ([D], [1, D], ...).
//  - The saved statistics mean[N] and rstd[N] are f32; the backward uses only
//    them (x_hat is recomputed from x), so nothing of size N*D is saved.
//  - Every output is WRITTEN, never accumulated: y, mean, rstd, dx, and the
//    weight gradients dweight[D], dbias[D] (f32), which are sums over the N
//    rows (zero when N = 0). A caller that accumulates adds them itself.
//    dweight and dbias are optional outputs (empty view: not computed); they
//    are the gradients with respect to the weight and bias at the given
//    weight, or at weight = 1 when it is absent.
//  - All views are on one device. Host pointers (Device::cpu) run the SIMD
//    path picked by llmk::simd_level() on llmk::num_threads() threads; CUDA
//    pointers (Device::cuda) run on `stream` (nullptr: the legacy default
//    stream) and the call returns without synchronizing.
//  - Results are deterministic (no atomics; every sum in a fixed order): a CPU
//    run depends only on the inputs, the SIMD level and the thread count; a
//    CUDA run on the inputs, their alignment and row strides (16-byte vector
//    or scalar chunks) and, for dweight / dbias, the device's SM count and
//    occupancy (the number of row groups summed): repeated on one GPU with
//    the same layout, it gives the same bits.
//  - Special values: NaN and Inf propagate as in torch (a row holding one gives
//    NaN y and dx in that row). eps = 0 on a constant row gives rstd = +inf and
//    y = NaN (0 * inf), again as torch does; with eps > 0 a constant row gives
//    x_hat = 0 exactly (the mean is computed relative to the row's first
//    element, so it is exact for a constant row) and y = bias.
// Bad arguments throw llmk::InvalidArgument naming the function, the argument
// and its value; so does an output that shares memory with an input or with
// another output (no in-place y = x: the input is kept); CUDA failures throw
// llmk::RuntimeError.
#pragma once
#include "llmk/cuda.hpp"
#include "llmk/tensor.hpp"

namespace llmk {

// x [N, D]; weight, bias [D] (optional); y [N, D]; mean, rstd [N] f32.
void layer_norm(const TensorView& x, const TensorView& weight, const TensorView& bias, float eps, const TensorView& y,
                const TensorView& mean, const TensorView& rstd, Stream stream = nullptr);

// dy, x [N, D]; weight [D] (optional); mean, rstd [N] f32 from layer_norm;
// dx [N, D]; dweight, dbias [D] f32 (optional).
void layer_norm_backward(const TensorView& dy, const TensorView& x, const TensorView& weight, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dx, const TensorView& dweight,
                         const TensorView& dbias, Stream stream = nullptr);

// x [N, D]; weight [D] (optional); y [N, D]; rstd [N] f32.
void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y, const TensorView& rstd,
              Stream stream = nullptr);

// dy, x [N, D]; weight [D] (optional); rstd [N] f32 from rms_norm; dx [N, D];
// dweight [D] f32 (optional).
void rms_norm_backward(const TensorView& dy, const TensorView& x, const TensorView& weight, const TensorView& rstd,
                       const TensorView& dx, const TensorView& dweight, Stream stream = nullptr);

}  // namespace llmk
