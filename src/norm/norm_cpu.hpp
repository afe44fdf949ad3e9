// The CPU fast path of LayerNorm / RMSNorm, internal interface: the per-ISA
// kernel tables (norm_cpu.cpp = scalar, norm_avx2.cpp, norm_avx512.cpp, all
// instantiated from the one template in norm_kernels.hpp) and the threaded
// drivers that dispatch on llmk::simd_level().
#pragma once
#include <cstdint>

#include "llmk/dtype.hpp"
#include "norm/norm_args.hpp"

namespace llmk::norm_cpu {

using norm::BwdArgs;
using norm::FwdArgs;

// Rows [r0, r1) of one ISA, dtype and norm. The backward adds the rows'
// dy * x_hat and dy into dw[D] and db[D] when those are not null.
using FwdFn = void (*)(const FwdArgs&, int64_t r0, int64_t r1);
using BwdFn = void (*)(const BwdArgs&, int64_t r0, int64_t r1, float* dw, float* db);
struct Kernels {
  FwdFn fwd[3][2];  // [dtype: f32, f16, bf16][rms]
  BwdFn bwd[3][2];
};
const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();

// True when a call moving `bytes` (inputs + outputs) overflows the last-level
// cache: nothing of it survives to the next call, so outputs are better
// written with non-temporal stores (FwdArgs::nt, BwdArgs::nt).
bool stream_outputs(int64_t bytes);

// All rows on llmk::num_threads() threads (fewer for small inputs). The
// backward writes dw[D] and db[D] (each optional) from per-thread partials
// summed in thread order, so the result never depends on timing.
void forward(const FwdArgs& a, DType t, bool rms);
void backward(const BwdArgs& a, DType t, bool rms, float* dw, float* db);

}  // namespace llmk::norm_cpu
