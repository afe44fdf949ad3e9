// AVX-512 VNNI instantiation of the matmul kernels (matmul_kernels.hpp): the
// AVX-512 kernels, with each 32-byte int8 dot of the quantized tile one
// vpdpbusd (simd::dot_u8s8) instead of maddubs + madd: the same sums, so the same bits.
// GCC 12's _mm512_reduce_add_ps (S::hsum) trips a false -Wmaybe-uninitialized
// inside its own header (an undefined-upper-half cast); silence it here only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "model/matmul_kernels.hpp"

namespace llmk::mm {
void rows_avx512vnni(const Args& a, int64_t n0, int64_t n1) { rows<simd::Avx512>(a, n0, n1); }
}  // namespace llmk::mm
