// LayerNorm / RMSNorm CPU kernels for AVX-512 F/BW/VL/DQ (the template lives
// in norm_kernels.hpp; cmake compiles this file with the AVX-512 flags).
// GCC 12 warns inside its own AVX-512 headers (_mm512_cvtps_ph and
// _mm512_reduce_add_ps use an intentionally undefined operand): not our code,
// so silenced here only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "norm/norm_kernels.hpp"

namespace llmk::norm_cpu {
const Kernels& kernels_avx512() {
  static const Kernels k = make_kernels<simd::Avx512>();
  return k;
}
}  // namespace llmk::norm_cpu
