// AVX-512 instantiation of the FMA-peak loop (peak_flops.hpp).
// GCC 12 warns inside its own AVX-512 headers (_mm512_reduce_add_ps uses an
// intentionally undefined operand): not our code, so silenced here only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "analyze/peak_flops.hpp"
#include "core/simd.hpp"

namespace llmk::analyze::detail {
float fma_chains_avx512(int64_t iters) { return fma_chains<simd::Avx512>(iters); }
}  // namespace llmk::analyze::detail
