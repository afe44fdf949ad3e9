// CUDA LayerNorm / RMSNorm backward, fused: one kernel reads x and dy once
// from global memory and writes dx, keeping each row group's dweight/dbias
// partial (f32) in shared memory or in its own slice of a global buffer; a
// finalize kernel then sums the partials in group order. No atomics, so the
// result is the same bits on every run.
// Per row (the same formulas as the CPU path, norm_kernels.hpp):
//   pass A  xc = x - mean, g = dy * w; group sums of xc, g and g * xc
//           (x, dy staged in shared memory with `cache`)
//   pass B  mu = mean(xc), x_hat = (xc - mu) * rstd,
//           dx = rstd * (g - mean(g) - x_hat * mean(g x_hat)),
//           partial dw += dy * x_hat, db += dy (each thread its own columns)
// RMSNorm: mean = mu = 0 and no dbias.
#include <algorithm>
#include <vector>

#include "norm/norm_cuda.cuh"

namespace llmk::norm_cuda {
namespace {

template <class T, bool kRms, bool kVec>
__global__ void __launch_bounds__(1024)
    bwd_kernel(BwdArgs a, float* part /* [groups][2][D] */, bool warp_row, bool cache, bool smem_acc) {
  using C = Chunk<T, kVec>;
  LLMK_DYNAMIC_SMEM(unsigned char, smem);
  __shared__ float red[32];
  const Group grp{warp_row ? int(threadIdx.x & 31) : int(threadIdx.x), warp_row ? 32 : int(blockDim.x), warp_row, red};
  const int rpb = warp_row ? int(blockDim.x >> 5) : 1, gid = warp_row ? int(threadIdx.x >> 5) : 0;
  const int64_t D = a.D, chunks = D / C::kN;
  const size_t row_bytes = round16(size_t(D) * sizeof(T));
  // Per group: [x cache][dy cache] when cache, then [dw acc][db acc] when smem_acc.
  unsigned char* mine = smem + size_t(gid) * ((cache ? 2 * row_bytes : 0) + (smem_acc ? round16(8 * size_t(D)) : 0));
  T* xc_cache = cache ? reinterpret_cast<T*>(mine) : nullptr;
  T* dy_cache = cache ? reinterpret_cast<T*>(mine + row_bytes) : nullptr;
  const int64_t g_index = int64_t(blockIdx.x) * rpb + gid, groups = int64_t(gridDim.x) * rpb;
  float* gpart = part ? part + g_index * 2 * D : nullptr;
  float* acc = smem_acc ? reinterpret_cast<float*>(mine + (cache ? 2 * row_bytes : 0)) : gpart;  // [2][D]
  if (acc)
    for (int64_t c = grp.lane; c < chunks; c += grp.size)
#pragma unroll
      for (int k = 0; k < C::kN; ++k) acc[c * C::kN + k] = acc[D + c * C::kN + k] = 0.0f;
  for (int64_t n = g_index; n < a.N; n += groups) {
    const T* x = static_cast<const T*>(a.x) + n * a.x_stride;     // [D]
    const T* dy = static_cast<const T*>(a.dy) + n * a.dy_stride;  // [D]
    T* dx = static_cast<T*>(a.dx) + n * a.dx_stride;              // [D]
    const float m = kRms ? 0.0f : a.mean[n], rs = a.rstd[n];
    float sx = 0.0f, sg = 0.0f, sgx = 0.0f;
    for (int64_t c = grp.lane; c < chunks; c += grp.size) {
      C xv, dv;
      xv.load(x, c, xc_cache);
      dv.load(dy, c, dy_cache);
#pragma unroll
      for (int k = 0; k < C::kN; ++k) {
        const float xc = xv.v[k] - m, g = dv.v[k] * (a.w ? a.w[c * C::kN + k] : 1.0f);
        sx += xc;
        sg += g;
        sgx += g * xc;
      }
    }
    const float mu = kRms ? 0.0f : grp.sum(sx) / float(D);
    const float tg = kRms ? 0.0f : grp.sum(sg), c1 = tg / float(D);
    const float c2 = rs * (grp.sum(sgx) - mu * tg) / float(D);  // mean(g x_hat)
    const float k1 = rs * c1, k2 = rs * c2;
    const T* xs = cache ? xc_cache : x;
    const T* ds = cache ? dy_cache : dy;
    for (int64_t c = grp.lane; c < chunks; c += grp.size) {
      C xv, dv;
      xv.load(xs, c);
      dv.load(ds, c);
#pragma unroll
      for (int k = 0; k < C::kN; ++k) {
        const int64_t i = c * C::kN + k;
        const float xh = ((xv.v[k] - m) - mu) * rs, dyf = dv.v[k], g = dyf * (a.w ? a.w[i] : 1.0f);
        xv.v[k] = g * rs - k1 - xh * k2;
        if (acc) {
          acc[i] += dyf * xh;
          acc[D + i] += dyf;
        }
      }
      xv.store(dx, c);
    }
  }
  if (smem_acc && gpart)
    for (int64_t c = grp.lane; c < chunks; c += grp.size)
#pragma unroll
      for (int k = 0; k < C::kN; ++k) {
        gpart[c * C::kN + k] = acc[c * C::kN + k];
        gpart[D + c * C::kN + k] = acc[D + c * C::kN + k];
      }
}

// dw[j] = sum over groups of part[g][0][j], db[j] likewise, in a fixed order:
// a block takes kFinCols columns; its kFinSlices thread rows each sum the
// groups g = slice, slice + kFinSlices, ... in order (a warp reads 32
// consecutive columns of one group: 128 coalesced bytes), then slice 0 adds
// the slices' sums in slice order. One thread a column (the first version)
// left most of the GPU idle on a sum over thousands of groups (N = 65536).
constexpr int kFinCols = 32, kFinSlices = 8;
__global__ void finalize_kernel(const float* part /* [groups][2][D] */, int64_t groups, int64_t D, float* dw,
                                float* db) {
  __shared__ float red[2][kFinSlices][kFinCols];
  const int tx = int(threadIdx.x) % kFinCols, ty = int(threadIdx.x) / kFinCols;
  const int64_t j = int64_t(blockIdx.x) * kFinCols + tx;
  float sw = 0.0f, sb = 0.0f;
  if (j < D)
    for (int64_t g = ty; g < groups; g += kFinSlices) {
      sw += part[g * 2 * D + j];
      sb += part[g * 2 * D + D + j];
    }
  red[0][ty][tx] = sw;
  red[1][ty][tx] = sb;
  __syncthreads();
  if (ty != 0 || j >= D) return;
  sw = red[0][0][tx], sb = red[1][0][tx];
  for (int y = 1; y < kFinSlices; ++y) sw += red[0][y][tx], sb += red[1][y][tx];
  if (dw) dw[j] = sw;
  if (db) db[j] = sb;
}

size_t bwd_smem(const LaunchConfig& c, int64_t D, size_t esize) {
  return size_t(rows_per_block(c)) *
         ((c.cache ? 2 * round16(size_t(D) * esize) : 0) + (c.smem_acc ? round16(2 * size_t(D) * sizeof(float)) : 0));
}

// Row groups: as many as can be resident, but at least kMinRows rows each, so
// the partials (2 D floats per group) stay small next to the 3 N D elements.
constexpr int64_t kMinRows = 8;

template <class T, bool kRms, bool kVec>
cudaError_t launch_bwd(const BwdArgs& a, float* dw, float* db, const LaunchConfig& c, cudaStream_t s) {
  const auto kernel = bwd_kernel<T, kRms, kVec>;
  const size_t smem = bwd_smem(c, a.D, sizeof(T));
  LLMK_CUDA_RETURN_IF_ERROR(cuda::allow_dynamic_smem(kernel, smem));
  int per_sm = 0;
  LLMK_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, c.threads, smem));
  const int64_t rpb = rows_per_block(c);
  const int64_t by_rows = (a.N + rpb * kMinRows - 1) / (rpb * kMinRows);
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(by_rows,
                                                                int64_t(dev_info().sm_count) * std::max(per_sm, 1)));
  const int64_t groups = blocks * rpb;
  float* part = nullptr;
  const bool want = dw || db;
  if (want) LLMK_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&part, size_t(groups) * 2 * size_t(a.D) * sizeof(float), s));
  LLMK_LAUNCH(unsigned(blocks), unsigned(c.threads), smem, s, kernel)(a, part, c.warp_row, c.cache, c.smem_acc && want);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && want) {
    LLMK_LAUNCH(unsigned((a.D + kFinCols - 1) / kFinCols), kFinCols * kFinSlices, 0, s, finalize_kernel)
    (part, groups, a.D, dw, db);
    err = cudaGetLastError();
  }
  if (part) {
    const cudaError_t f = cudaFreeAsync(part, s);
    if (err == cudaSuccess) err = f;
  }
  return err;
}

template <class T, bool kRms>
cudaError_t launch_bwd(const BwdArgs& a, float* dw, float* db, const LaunchConfig& c, cudaStream_t s) {
  return c.vec ? launch_bwd<T, kRms, true>(a, dw, db, c, s) : launch_bwd<T, kRms, false>(a, dw, db, c, s);
}

template <class T>
cudaError_t launch_bwd(const BwdArgs& a, bool rms, float* dw, float* db, const LaunchConfig& c, cudaStream_t s) {
  return rms ? launch_bwd<T, true>(a, dw, db, c, s) : launch_bwd<T, false>(a, dw, db, c, s);
}

}  // namespace

std::vector<LaunchConfig> bwd_configs(const BwdArgs& a, DType t) {
  const size_t es = dtype_size(t);
  const int64_t kVecN = int64_t(16 / es);
  const bool vec_ok = a.D % kVecN == 0 && aligned16(a.x, a.x_stride, es) && aligned16(a.dy, a.dy_stride, es) &&
                      aligned16(a.dx, a.dx_stride, es);
  const size_t limit = dev_info().smem_optin;
  // The launcher's pick: the forward's layout (layout_pick), then shared memory
  // for the accumulators first (they save global read-modify-writes), then the cache.
  LaunchConfig pick = layout_pick(vec_ok, a.D, es);
  pick.smem_acc = true;
  pick.smem_acc = bwd_smem(pick, a.D, es) <= limit;
  pick.cache = true;
  pick.cache = bwd_smem(pick, a.D, es) <= limit;
  return configs_around(pick, vec_ok, true, limit, [&](const LaunchConfig& c) { return bwd_smem(c, a.D, es); });
}

cudaError_t backward(const BwdArgs& a, DType t, bool rms, float* dw, float* db, cudaStream_t stream,
                     const LaunchConfig* force) {
  if (a.N == 0) {
    if (dw) LLMK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dw, 0, size_t(a.D) * 4, stream));
    if (db) LLMK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(db, 0, size_t(a.D) * 4, stream));
    return cudaSuccess;
  }
  const std::vector<LaunchConfig> cs = bwd_configs(a, t);
  const LaunchConfig* pc = run_config(cs, force);
  if (!pc) return cudaErrorInvalidConfiguration;
  const LaunchConfig c = *pc;
  switch (t) {
    case DType::f32: return launch_bwd<float>(a, rms, dw, db, c, stream);
    case DType::f16: return launch_bwd<__half>(a, rms, dw, db, c, stream);
    case DType::bf16: return launch_bwd<__nv_bfloat16>(a, rms, dw, db, c, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace llmk::norm_cuda
