// AVX2+FMA+F16C instantiation of the matmul kernels (matmul_kernels.hpp).
#include "model/matmul_kernels.hpp"

namespace llmk::mm {
void rows_avx2(const Args& a, int64_t n0, int64_t n1) { rows<simd::Avx2>(a, n0, n1); }
}  // namespace llmk::mm
