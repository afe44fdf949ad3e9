// The int8 activation block the quantized matmul dots against, next to ggml's
// weight blocks (include/llmk/ggml_quants.hpp).
#pragma once
#include <cstdint>

#include "llmk/dtype.hpp"
#include "llmk/ggml_quants.hpp"

namespace llmk {

inline constexpr int kQBlock = kQuantBlock;

// One block of an activation row quantized for the int8 dots:
// x[j] ~= qs[j] * d, with d = f16(amax / 127), and s = f16(amax / 127 * sum(qs))
// (for Q4_0/Q4_1); both values are f16-representable, kept as f32 for speed.
struct ActQ8 {
  float d, s;
  int8_t qs[32];
};

}  // namespace llmk
