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

namespace mm {
// Quantizes x [nb * 32] into nb ActQ8 blocks: d = f16(amax / 127), q = round
// half even of x * (127 / amax), s = f16(d * sum q); a block holding a NaN or
// an infinity gets d = s = NaN and quants 0; a block whose 127 / amax is not
// finite (amax < 3.8e-37, so f16(d) = 0 anyway) gets quants 0. The AVX2
// version (matmul_avx2.cpp) writes the same bytes as the scalar one
// (matmul.cpp): tests/model/test_matmul.cpp.
void quantize_act_scalar(const float* x, int64_t nb, ActQ8* out);
void quantize_act_avx2(const float* x, int64_t nb, ActQ8* out);
}  // namespace mm

}  // namespace llmk
