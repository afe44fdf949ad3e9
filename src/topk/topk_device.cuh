// Device building blocks of the CUDA softmax + top-k (topk.cu):
//  - 64-bit keys that order (logit, index) exactly like the CPU's `better`:
//    high word = the f32 bits mapped to an unsigned order (-0 folded into +0),
//    low word = ~index, so a larger key is a larger logit or, on a tie, a
//    lower index. Every real key is > 0 (-inf maps to 0x007fffff), so 0 pads;
//  - the online (max, sum) state and its exact merge (as topk_internal.hpp);
//  - bitonic sort of keys in shared memory by a warp or a block;
//  - 16-byte words of f32 / f16 / bf16 unpacked to f32.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "llmk/dtype.hpp"

namespace llmk::topk::dev {

constexpr float kInf = __builtin_huge_valf();
constexpr unsigned kFlagNan = 1, kFlagPosInf = 2;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(f16 v) { return __half2float(__ushort_as_half(v.bits)); }
__device__ __forceinline__ float to_float(bf16 v) { return __uint_as_float(uint32_t(v.bits) << 16); }

// The E = 16 / sizeof(T) elements of one 16-byte word (loaded from an aligned
// address as a uint4), as f32.
template <class T>
__device__ __forceinline__ void unpack16(const uint4 u, float* out) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if constexpr (sizeof(T) == 4) {
      out[q] = __uint_as_float(w[q]);
    } else {
      out[2 * q] = to_float(T{uint16_t(w[q] & 0xffffu)});
      out[2 * q + 1] = to_float(T{uint16_t(w[q] >> 16)});
    }
  }
}

__device__ __forceinline__ uint64_t make_key(float x, int64_t i) {
  uint32_t u = __float_as_uint(x + 0.0f);  // -0 + 0 = +0 (round to nearest)
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (uint64_t(u) << 32) | uint64_t(~uint32_t(i));
}
__device__ __forceinline__ float key_value(uint64_t k) {
  const uint32_t u = uint32_t(k >> 32);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
__device__ __forceinline__ int32_t key_index(uint64_t k) { return int32_t(~uint32_t(k)); }

// m = max finite logit (raw), s = sum exp((x - m) * scale) over the finite
// ones, flags = NaN / +inf seen. -inf contributes nothing.
// (A plain aggregate, so it can live in __shared__.)
struct RowState {
  float m;
  double s;
  unsigned flags;
};
__device__ __forceinline__ RowState empty_state() { return RowState{-kInf, 0.0, 0u}; }

__device__ __forceinline__ void state_add(RowState& st, float x, float scale) {
  if (x != x) {
    st.flags |= kFlagNan;
  } else if (x == kInf) {
    st.flags |= kFlagPosInf;
  } else if (x > st.m) {  // first finite x: s = 0 * exp(-inf) + 1 = 1
    st.s = st.s * double(expf((st.m - x) * scale)) + 1.0;
    st.m = x;
  } else if (x != -kInf) {
    st.s += double(expf((x - st.m) * scale));
  }
}

// Exact merge; an empty side (m = -inf) is the identity. Symmetric in its
// arguments bit for bit, so a butterfly leaves every lane with the same state.
__device__ __forceinline__ void state_merge(RowState& a, const RowState& b, float scale) {
  a.flags |= b.flags;
  if (b.m == -kInf) return;
  if (a.m == -kInf) {
    a.m = b.m;
    a.s = b.s;
    return;
  }
  if (b.m > a.m) {
    a.s = a.s * exp((double(a.m) - double(b.m)) * scale) + b.s;
    a.m = b.m;
  } else {
    a.s = b.s * exp((double(b.m) - double(a.m)) * scale) + a.s;
  }
}

__device__ __forceinline__ void warp_merge(RowState& st, float scale) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    RowState other;
    other.m = __shfl_xor_sync(0xffffffffu, st.m, o);
    other.s = __shfl_xor_sync(0xffffffffu, st.s, o);
    other.flags = __shfl_xor_sync(0xffffffffu, st.flags, o);
    state_merge(st, other, scale);
  }
}

// One compare-exchange stage of a descending bitonic sort over keys[0, n2),
// executed by `nthreads` threads starting at `t0`.
__device__ __forceinline__ void bitonic_stage(uint64_t* keys, int n2, int size, int stride, int t0, int nthreads) {
  for (int t = t0; t < n2 / 2; t += nthreads) {
    const int lo = 2 * stride * (t / stride) + (t % stride), hi = lo + stride;
    const bool desc = (lo & size) == 0;
    const uint64_t a = keys[lo], b = keys[hi];
    if ((a < b) == desc) {
      keys[lo] = b;
      keys[hi] = a;
    }
  }
}

// Sorts keys[0, n2) (n2 a power of two) descending: by one warp (lane) ...
__device__ __forceinline__ void warp_bitonic_sort(uint64_t* keys, int n2, int lane) {
  for (int size = 2; size <= n2; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      bitonic_stage(keys, n2, size, stride, lane, 32);
      __syncwarp();
    }
}
// ... or by the whole block (every thread must call it).
__device__ __forceinline__ void block_bitonic_sort(uint64_t* keys, int n2) {
  for (int size = 2; size <= n2; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      bitonic_stage(keys, n2, size, stride, threadIdx.x, blockDim.x);
      __syncthreads();
    }
}

// The outputs of one row from its merged state and its sorted top keys
// (threads t0, t0 + nthreads, ... write slots j < k).
__device__ __forceinline__ void write_row(const RowState& st, const uint64_t* top, int k, float scale, int64_t row,
                                          float* probs, int32_t* indices, float* row_max, float* lse, int t0,
                                          int nthreads) {
  const bool special = st.flags != 0 || st.m == -kInf;
  const float qnan = __int_as_float(0x7fc00000);
  for (int j = t0; j < k; j += nthreads) {
    float p = qnan;
    int32_t i = j;
    if (!special) {
      i = key_index(top[j]);
      p = float(exp((double(key_value(top[j])) - double(st.m)) * scale) / st.s);
    }
    probs[row * k + j] = p;
    indices[row * k + j] = i;
  }
  if (t0 == 0) {
    const float m = (st.flags & kFlagNan) ? qnan : (st.flags & kFlagPosInf) ? kInf : st.m == -kInf ? -kInf : 0.0f;
    if (row_max) row_max[row] = special ? m : float(double(st.m) * scale);
    if (lse) lse[row] = special ? m : float(double(st.m) * scale + log(st.s));
  }
}

}  // namespace llmk::topk::dev
