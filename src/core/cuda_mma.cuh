// Warp-level tensor-core MMA for the CUDA kernels: one
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80 and later), and on
// the CPU emulator (LLMK_CUDA=EMU) its emulation in core/cuda_emu.hpp, which
// states the fragment layout. CudaModel.MmaFragmentLayout checks both against
// a host product.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace llmk::cuda {

// d += A B for the warp's 16 x 16 f16 A (a), 16 x 8 f16 B (b) and 16 x 8 f32 d.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(LLMK_CUDA_EMU)
  llmk_emu_mma_m16n8k16(d, a, b, d);
#endif
}

}  // namespace llmk::cuda
