// The CUDA path of LayerNorm / RMSNorm, host-side interface (no device code,
// so norm.cpp and the tests can include it): launch configurations, the
// launchers (norm_fwd.cu, norm_bwd.cu) and the list of every configuration a
// launcher may pick, so tests can force each one.
//
// A row group is one warp (warp_row: 4 rows per 128-thread block) or one block
// of `threads` (block_row). A group owns 16-byte chunks (vec) or single
// elements of its row round-robin; with `cache` the row is staged in shared
// memory so the later passes never touch global memory again. The backward
// keeps each group's dweight/dbias partial in shared memory (smem_acc) or in
// its own slice of the global partial buffer, then a finalize kernel sums the
// group partials in group order: deterministic, no atomics.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "llmk/dtype.hpp"
#include "norm/norm_args.hpp"

namespace llmk::norm_cuda {

using norm::BwdArgs;
using norm::FwdArgs;

struct LaunchConfig {
  bool warp_row = false;  // one warp per row (else one block per row)
  int threads = 128;      // threads per block
  bool vec = false;       // 16-byte loads and stores (rows aligned, D a multiple of the vector)
  bool cache = false;     // row staged in shared memory
  bool smem_acc = false;  // backward: weight-gradient partials in shared memory
  std::string describe() const;
  bool operator==(const LaunchConfig&) const = default;
};

// Every configuration the launcher may pick for this call (the first one is
// the one it picks by itself); the forward ignores smem_acc.
std::vector<LaunchConfig> fwd_configs(const FwdArgs& a, DType t);
std::vector<LaunchConfig> bwd_configs(const BwdArgs& a, DType t);

// Launch on `stream` with the given configuration (null: the launcher's own
// pick). The backward writes dw[D] and db[D] (each optional) and takes its
// partial buffer from the stream-ordered allocator. Returns the first error.
cudaError_t forward(const FwdArgs& a, DType t, bool rms, cudaStream_t stream, const LaunchConfig* force = nullptr);
cudaError_t backward(const BwdArgs& a, DType t, bool rms, float* dw, float* db, cudaStream_t stream,
                     const LaunchConfig* force = nullptr);

// dst[n] (f32) = src[n] (f32, f16 or bf16), on the device.
cudaError_t to_f32(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream);

}  // namespace llmk::norm_cuda
