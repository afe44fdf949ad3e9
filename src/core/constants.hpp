// Numeric constants shared by the CPU kernels, the CUDA kernels and the API
// layer (plain C++: nvcc includes it too).
#pragma once

namespace llmk {

// log2(e) in f32: the kernels compute exp(x / T) as 2^(x * (1 / T) * kLog2e),
// and the API layer checks that (1 / T) * kLog2e is finite.
inline constexpr float kLog2e = 1.44269504088896341f;

}  // namespace llmk
