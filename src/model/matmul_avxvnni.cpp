// The matmul kernels (matmul_kernels.hpp) at the avxvnni level, VEX-encoded
// (AVX-VNNI: Alder Lake, Zen 5): AVX2's, with each 32-byte int8 dot of the
// quantized tile one vpdpbusd (simd::dot_u8s8_at) instead of maddubs + madd:
// the same sums, so the AVX2 bits.
#define LLMK_VNNI256_VEX 1
#include "model/matmul_kernels.hpp"

namespace llmk::mm {
void rows_avxvnni(const Args& a, int64_t n0, int64_t n1) { rows<simd::AvxVnni>(a, n0, n1); }
}  // namespace llmk::mm
