// AVX-512 instantiation of the FMA-peak loop (peak_flops.hpp).
#include "analyze/peak_flops.hpp"
#include "core/simd.hpp"

namespace llmk::analyze::detail {
float fma_chains_avx512(int64_t iters) { return fma_chains<simd::Avx512>(iters); }
}  // namespace llmk::analyze::detail
