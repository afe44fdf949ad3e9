// The f32 FMA peak of one core, written once over an ISA struct (simd.hpp) and
// instantiated per ISA in peak_flops_avx2.cpp / peak_flops_avx512.cpp; the
// scalar path uses simd::Scalar. kChains independent accumulators hide the FMA
// latency (4 cycles x 2 ports needs >= 8), and the values converge to a fixed
// point (acc = acc*a + b with a < 1), so nothing overflows or denormalizes.
#pragma once
#include <cstdint>

#include "core/simd.hpp"

namespace llmk::analyze::detail {

inline constexpr int kFmaChains = 12;

// Runs iters x kFmaChains vector FMAs; returns a value that depends on all of them.
template <class S>
float fma_chains(int64_t iters) {
  constexpr int kChains = kFmaChains;
  typename S::V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = S::set1(float(c));
  const typename S::V a = S::set1(0.999f), b = S::set1(0.001f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = S::fmadd(acc[c], a, b);
  float s = 0;
  for (int c = 0; c < kChains; ++c) s += S::hsum(acc[c]);
  return s;
}

float fma_chains_avx2(int64_t iters);    // peak_flops_avx2.cpp
float fma_chains_avx512(int64_t iters);  // peak_flops_avx512.cpp

}  // namespace llmk::analyze::detail
