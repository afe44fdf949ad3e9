// CUDA LayerNorm / RMSNorm forward: one row per warp (small D) or per block
// (large D), 16-byte loads where rows allow, two-pass statistics on chip:
//   pass 1 (global -> registers, and to shared memory with `cache`):
//          dm = sum(x - x0) / D, mean = x0 + dm        (x0 = the row's first element)
//   pass 2 (from the cache, or again from global/L2): var = sum(((x - x0) - dm)^2) / D
//   pass 3 y = ((x - x0) - dm) * rstd * w + b
// RMSNorm: x0 = dm = 0, no bias. The CPU path's formulas before its
// one-pass statistics (norm_kernels.hpp: there x0 is the mean of the first
// vector, the variance one-pass where that is near the mean); here the
// passes re-read the row from on-chip memory. A constant row gives x_hat = 0
// exactly on both. Also: the
// launch-configuration list, device info, and the weight conversion kernel.
#include <mutex>
#include <string>
#include <vector>

#include "norm/norm_cuda.cuh"

namespace llmk::norm_cuda {
namespace {

template <class T, bool kRms, bool kVec>
__global__ void __launch_bounds__(1024) fwd_kernel(FwdArgs a, bool warp_row, bool cache) {
  using C = Chunk<T, kVec>;
  LLMK_DYNAMIC_SMEM(unsigned char, smem);
  __shared__ float red[32];
  const Group grp{warp_row ? int(threadIdx.x & 31) : int(threadIdx.x), warp_row ? 32 : int(blockDim.x), warp_row, red};
  const int rpb = warp_row ? int(blockDim.x >> 5) : 1, gid = warp_row ? int(threadIdx.x >> 5) : 0;
  const int64_t D = a.D, chunks = D / C::kN;
  T* row_cache = cache ? reinterpret_cast<T*>(smem + size_t(gid) * round16(size_t(D) * sizeof(T))) : nullptr;
  for (int64_t n = int64_t(blockIdx.x) * rpb + gid; n < a.N; n += int64_t(gridDim.x) * rpb) {
    const T* x = static_cast<const T*>(a.x) + n * a.x_stride;  // [D]
    T* y = static_cast<T*>(a.y) + n * a.y_stride;              // [D]
    const float x0 = kRms ? 0.0f : to_f(x[0]);
    float dm = 0.0f;
    if constexpr (!kRms) {
      float s = 0.0f;
      for (int64_t c = grp.lane; c < chunks; c += grp.size) {
        C v;
        v.load(x, c, row_cache);
#pragma unroll
        for (int k = 0; k < C::kN; ++k) s += v.v[k] - x0;
      }
      dm = grp.sum(s) / float(D);
    }
    const T* src = (cache && !kRms) ? row_cache : x;
    float q = 0.0f;
    for (int64_t c = grp.lane; c < chunks; c += grp.size) {
      C v;
      if (kRms) v.load(x, c, row_cache);
      else v.load(src, c);
#pragma unroll
      for (int k = 0; k < C::kN; ++k) {
        const float d = (v.v[k] - x0) - dm;
        q += d * d;
      }
    }
    const float rs = 1.0f / sqrtf(grp.sum(q) / float(D) + a.eps);  // IEEE sqrt and division, like the CPU
    if (grp.lane == 0) {
      if (!kRms) a.mean[n] = x0 + dm;
      a.rstd[n] = rs;
    }
    const T* src3 = cache ? row_cache : x;
    for (int64_t c = grp.lane; c < chunks; c += grp.size) {
      C v;
      v.load(src3, c);
#pragma unroll
      for (int k = 0; k < C::kN; ++k) {
        const int64_t i = c * C::kN + k;
        const float xh = ((v.v[k] - x0) - dm) * rs;
        v.v[k] = xh * (a.w ? a.w[i] : 1.0f) + ((!kRms && a.b) ? a.b[i] : 0.0f);
      }
      v.store(y, c);
    }
  }
}

template <class T>
__global__ void to_f32_kernel(const T* src, float* dst, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = to_f(src[i]);
}

size_t fwd_smem(const LaunchConfig& c, int64_t D, size_t esize) {
  return c.cache ? size_t(rows_per_block(c)) * round16(size_t(D) * esize) : 0;
}

template <class T, bool kRms, bool kVec>
cudaError_t launch_fwd(const FwdArgs& a, const LaunchConfig& c, cudaStream_t s) {
  const auto kernel = fwd_kernel<T, kRms, kVec>;
  const size_t smem = fwd_smem(c, a.D, sizeof(T));
  LLMK_CUDA_RETURN_IF_ERROR(cuda::allow_dynamic_smem(kernel, smem));
  const int64_t rpb = rows_per_block(c);
  const int64_t blocks = std::min<int64_t>((a.N + rpb - 1) / rpb, int64_t(1) << 30);
  LLMK_LAUNCH(unsigned(blocks), unsigned(c.threads), smem, s, kernel)(a, c.warp_row, c.cache);
  return cudaGetLastError();
}

template <class T, bool kRms>
cudaError_t launch_fwd(const FwdArgs& a, const LaunchConfig& c, cudaStream_t s) {
  return c.vec ? launch_fwd<T, kRms, true>(a, c, s) : launch_fwd<T, kRms, false>(a, c, s);
}

template <class T>
cudaError_t launch_fwd(const FwdArgs& a, bool rms, const LaunchConfig& c, cudaStream_t s) {
  return rms ? launch_fwd<T, true>(a, c, s) : launch_fwd<T, false>(a, c, s);
}

}  // namespace

DevInfo dev_info() {
  static std::mutex mu;
  static std::vector<DevInfo> cache;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();  // not left for the launch's error check to find
    dev = 0;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (int(cache.size()) <= dev) cache.resize(size_t(dev) + 1, DevInfo{0, 0});
  DevInfo& d = cache[size_t(dev)];
  if (d.sm_count == 0) {
    int sms = 1, optin = 48 << 10;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
      cudaGetLastError();  // no device answer: the defaults (one SM, 48 KiB)
      sms = 1;
      optin = 48 << 10;
    }
    d.sm_count = sms > 0 ? sms : 1;
    d.smem_optin = size_t(optin) - 256;  // room for the static reduction scratch
  }
  return d;
}

std::string LaunchConfig::describe() const {
  return std::string(warp_row ? "warp_row" : "block_row") + " threads=" + std::to_string(threads) +
         (vec ? " vec" : " scalar") + (cache ? " cache" : " nocache") + (smem_acc ? " smem_acc" : " global_acc");
}

std::vector<LaunchConfig> fwd_configs(const FwdArgs& a, DType t) {
  const size_t es = dtype_size(t);
  const int64_t kVecN = int64_t(16 / es);
  const bool vec_ok = a.D % kVecN == 0 && aligned16(a.x, a.x_stride, es) && aligned16(a.y, a.y_stride, es);
  const size_t limit = dev_info().smem_optin;
  // The launcher's pick: layout_pick(), then the row cached in shared memory when it fits.
  LaunchConfig pick = layout_pick(vec_ok, a.D, es);
  pick.cache = true;
  pick.cache = fwd_smem(pick, a.D, es) <= limit;
  return configs_around(pick, vec_ok, false, limit, [&](const LaunchConfig& c) { return fwd_smem(c, a.D, es); });
}

cudaError_t forward(const FwdArgs& a, DType t, bool rms, cudaStream_t stream, const LaunchConfig* force) {
  if (a.N == 0) return cudaSuccess;
  const std::vector<LaunchConfig> cs = fwd_configs(a, t);
  const LaunchConfig* pc = run_config(cs, force);
  if (!pc) return cudaErrorInvalidConfiguration;
  const LaunchConfig c = *pc;
  switch (t) {
    case DType::f32: return launch_fwd<float>(a, rms, c, stream);
    case DType::f16: return launch_fwd<__half>(a, rms, c, stream);
    case DType::bf16: return launch_fwd<__nv_bfloat16>(a, rms, c, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t to_f32(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream) {
  const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 1024));
  switch (t) {
    case DType::f32: return cudaMemcpyAsync(dst, src, size_t(n) * 4, cudaMemcpyDeviceToDevice, stream);
    case DType::f16:
      LLMK_LAUNCH(blocks, 256, 0, stream, to_f32_kernel<__half>)(static_cast<const __half*>(src), dst, n);
      break;
    case DType::bf16:
      LLMK_LAUNCH(blocks, 256, 0, stream, to_f32_kernel<__nv_bfloat16>)(static_cast<const __nv_bfloat16*>(src), dst, n);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace llmk::norm_cuda
