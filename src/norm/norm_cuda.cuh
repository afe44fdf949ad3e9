// Device helpers shared by norm_fwd.cu and norm_bwd.cu: storage types and
// conversions, 16-byte packs, the row group (a warp or a block) with its
// deterministic sum, the per-thread chunk walk, and the host-side helpers
// that size launches (device info, vector eligibility, shared memory).
//
// Chunk ownership: a group of G threads walks its row in chunks of kChunk
// elements (16 bytes with vec, else 1); thread `lane` owns chunks lane,
// lane + G, ... in every row. Anything a thread stages in shared memory (the
// row cache, the weight-gradient accumulators) lives at its own chunks'
// offsets, so only the group sums need barriers.
#pragma once
#include <vector>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.cuh"
#include "norm/norm_cuda.hpp"

namespace llmk::norm_cuda {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// kChunk elements of T, loaded and stored as one 16-byte access when kVec.
template <class T, bool kVec>
struct Chunk {
  static constexpr int kN = kVec ? int(16 / sizeof(T)) : 1;
  struct alignas(kVec ? 16 : alignof(T)) Raw {
    T v[kN];
  };
  float v[kN];
  __device__ __forceinline__ void load(const T* row, int64_t c) {
    const Raw r = reinterpret_cast<const Raw*>(row)[c];
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] = to_f(r.v[k]);
  }
  // Loads chunk c of `row` and copies its raw bytes to `cache` (when not null).
  __device__ __forceinline__ void load(const T* row, int64_t c, T* cache) {
    const Raw r = reinterpret_cast<const Raw*>(row)[c];
    if (cache) reinterpret_cast<Raw*>(cache)[c] = r;
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] = to_f(r.v[k]);
  }
  __device__ __forceinline__ void store(T* row, int64_t c) const {
    Raw r;
#pragma unroll
    for (int k = 0; k < kN; ++k) r.v[k] = from_f<T>(v[k]);
    reinterpret_cast<Raw*>(row)[c] = r;
  }
};

__device__ __forceinline__ float warp_sum(float v) {
  // Butterfly: every lane ends with the same bits (fp addition commutes).
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A row group: one warp (warp_row) or the whole block.
struct Group {
  int lane, size;
  bool warp;
  float* red;  // [32] shared scratch (block groups)
  // The group's sum of v, the same on every thread; a fixed tree, so deterministic.
  __device__ __forceinline__ float sum(float v) const {
    v = warp_sum(v);
    if (warp) return v;
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = 0.0f;
    for (int i = 0; i < (size >> 5); ++i) r += red[i];
    __syncthreads();  // red is reused by the next sum
    return r;
  }
};

// ---- host side ----

struct DevInfo {
  int sm_count = 1;
  size_t smem_optin = 48 << 10;  // max dynamic + static shared memory per block
};
DevInfo dev_info();  // of the current device (cached per device)

__host__ __device__ inline size_t round16(size_t b) { return (b + 15) / 16 * 16; }
inline int rows_per_block(const LaunchConfig& c) { return c.warp_row ? c.threads / 32 : 1; }
inline int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}
// Threads per block the launcher picks for a block-per-row layout: enough for
// about 8 chunks per thread, between 128 and 1024.
inline int block_threads(int64_t chunks) {
  const int64_t t = next_pow2((chunks + 7) / 8);
  return int(t < 128 ? 128 : t > 1024 ? 1024 : t);
}
inline bool aligned16(const void* p, int64_t stride, size_t esize) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (size_t(stride) * esize) % 16 == 0;
}
// The layout both launchers pick first for rows of D elements of esize bytes:
// 16-byte vectors when vec_ok, a warp per row while the row is at most 4 KiB,
// else a block of block_threads() threads. The caller then sets the cache and
// accumulator choices.
inline LaunchConfig layout_pick(bool vec_ok, int64_t D, size_t esize) {
  LaunchConfig c;
  c.vec = vec_ok;
  c.warp_row = int64_t(D * esize) <= 4096;
  c.threads = c.warp_row ? 128 : block_threads(vec_ok ? D / int64_t(16 / esize) : D);
  return c;
}

// The configuration a launch runs: `force` when the launcher's own list for
// the call holds it (else null: a vector layout on a misaligned row, or a
// shared-memory size past the device's, would read out of bounds or fail to
// launch), or the list's first entry, the launcher's pick.
inline const LaunchConfig* run_config(const std::vector<LaunchConfig>& cs, const LaunchConfig* force) {
  if (!force) return &cs.front();
  return std::find(cs.begin(), cs.end(), *force) != cs.end() ? force : nullptr;
}

// Every configuration a launcher could run: `pick` first, then each other
// (warp_row, threads, vec, cache[, smem_acc when vary_acc]) that the row's
// alignment allows (vec_ok) and whose shared memory `smem(c)` fits in `limit`.
template <class Smem>
std::vector<LaunchConfig> configs_around(const LaunchConfig& pick, bool vec_ok, bool vary_acc, size_t limit,
                                         Smem smem) {
  std::vector<LaunchConfig> v{pick};
  for (bool warp : {true, false})
    for (int threads : {128, 256, 512, 1024}) {
      if (warp && threads != 128) continue;
      for (bool vec : {true, false})
        for (bool cache : {true, false})
          for (bool acc : {true, false}) {
            if (acc && !vary_acc) continue;
            const LaunchConfig c{warp, threads, vec, cache, acc};
            if ((vec && !vec_ok) || smem(c) > limit) continue;
            if (c.warp_row == pick.warp_row && c.threads == pick.threads && c.vec == pick.vec &&
                c.cache == pick.cache && c.smem_acc == pick.smem_acc)
              continue;
            v.push_back(c);
          }
    }
  return v;
}

}  // namespace llmk::norm_cuda
