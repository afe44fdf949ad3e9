// Stand-in for include/llmk/ggml_quants.hpp (gguf branch) until it lands:
// ggml's 32-value block formats, and the int8 activation block the quantized
// matmul dots against. Nibble order: qs[j] holds element j (low) and j+16 (high).
#pragma once
#include <cstdint>

#include "llmk/dtype.hpp"

namespace llmk {

inline constexpr int kQBlock = 32;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;  // f16 scale; value = (nibble - 8) * d
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d, m;  // f16 scale and min; value = nibble * d + m
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);

// One block of an activation row quantized for the int8 dots:
// x[j] ~= qs[j] * d, with d = amax / 127, and s = d * sum(qs) (for Q4_0/Q4_1).
struct ActQ8 {
  float d, s;
  int8_t qs[32];
};

}  // namespace llmk
