// Device helpers shared by the CUDA attention kernels (attention.cu: append,
// decode, Hadamard rows; prefill.cu: varlen prefill): element loads from a
// cache row of any KvType, warp reductions, and the query rotation for caches
// that store Hadamard-rotated K. Internal to src/attention.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "llmk/attention.hpp"

namespace llmk::attn {
namespace {

__device__ __forceinline__ float f16f(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ float bf16f(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_min(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fminf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// 2^x by the SFU (ex2.approx.ftz: within 2 ulp; results below 2^-126, weights
// that small against the row's largest, flush to 0; 2^-inf = 0). The CPU
// emulator computes exp2f.
__device__ __forceinline__ float exp2_fast(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// Element lane + 32 * i of a cache row of type T (the caller keeps it < D),
// rounded exactly as kv_dequantize_row (no contraction into an FMA). For int8
// and int4 lane j reads quant j of each 32-group: int4 low nibble of qs[j] for
// j < 16, high nibble of qs[j - 16] otherwise.
template <KvType T>
__device__ __forceinline__ float load_elem(const uint8_t* row, int i, int lane) {
  const int j = lane + 32 * i;
  if constexpr (T == KvType::f32) return reinterpret_cast<const float*>(row)[j];
  if constexpr (T == KvType::f16) return f16f(reinterpret_cast<const uint16_t*>(row)[j]);
  if constexpr (T == KvType::bf16) return bf16f(reinterpret_cast<const uint16_t*>(row)[j]);
  if constexpr (T == KvType::int8) {
    const BlockQ8* b = reinterpret_cast<const BlockQ8*>(row) + i;
    return __fmul_rn(float(b->qs[lane]), f16f(b->d));
  }
  if constexpr (T == KvType::int4) {
    const BlockQ4* b = reinterpret_cast<const BlockQ4*>(row) + i;
    const int q = (b->qs[lane & 15] >> ((lane >> 4) * 4)) & 15;  // no branch: lanes 0-15 low nibbles, 16-31 high
    return __fadd_rn(__fmul_rn(float(q), f16f(b->d)), f16f(b->m));
  }
  return 0.0f;
}

// The same with the type known only at run time (a warp-uniform branch).
__device__ __forceinline__ float load_elem(KvType t, const uint8_t* row, int i, int lane) {
  switch (t) {
    case KvType::f32: return load_elem<KvType::f32>(row, i, lane);
    case KvType::f16: return load_elem<KvType::f16>(row, i, lane);
    case KvType::bf16: return load_elem<KvType::bf16>(row, i, lane);
    case KvType::int8: return load_elem<KvType::int8>(row, i, lane);
    default: return load_elem<KvType::int4>(row, i, lane);
  }
}

}  // namespace

// Rotates rows x [rows, D] into y by the cache's Hadamard transform
// (kv_rotation_block(D) blocks), bitwise like the host's hadamard_transform.
cudaError_t hadamard_rows_cuda(const float* x, float* y, int64_t rows, int64_t D, cudaStream_t s);

// Queries q [rows, D] as attention must score them against kv: q itself when
// kv.k_rotated is false, else H q written to `scratch` (rows * D floats of the
// caller's launch scratch, rotated_queries_bytes). The caller's q is never written.
size_t rotated_queries_bytes(const KvLayerView& kv, int64_t rows);
const float* queries_for_cuda(const float* q, const KvLayerView& kv, int64_t rows, cudaStream_t s, float* scratch);

}  // namespace llmk::attn
