// LayerNorm / RMSNorm CPU kernels for AVX2+FMA+F16C (the template lives in
// norm_kernels.hpp; cmake compiles this file with the AVX2 flags).
#include "norm/norm_kernels.hpp"

namespace llmk::norm_cpu {
const Kernels& kernels_avx2() {
  static const Kernels k = make_kernels<simd::Avx2>();
  return k;
}
}  // namespace llmk::norm_cpu
