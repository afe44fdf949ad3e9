// ggml's quantized block formats, bit-exact with ggml/llama.cpp files: 32 values a block, the
// scale `d` (and Q4_1's minimum `m`) an IEEE half.
//   Q8_0: value j = qs[j] * d                               (34 bytes / 32 values)
//   Q4_0: value j = (nibble_j - 8) * d                      (18 bytes / 32 values)
//   Q4_1: value j = nibble_j * d + m                        (20 bytes / 32 values)
// Nibble order: byte qs[j] (j < 16) holds element j in its low nibble and element j + 16 in
// its high nibble. A row of n elements (n a multiple of 32) is n/32 consecutive blocks.
// Here are the structs and the scalar reference quantizers and dequantizers; quantizers
// follow ggml's reference rounding, so a row quantized here equals the row ggml's
// quantize_row_*_ref would write. They are used by gguf::dequantize_row and checked by
// tests/gguf/test_ggml_quants.cpp (golden bytes from the gguf package). The model code
// (src/model: the matmuls, their oracle matmul_ref.cpp, Model::random) uses only the
// structs and reads and writes the blocks itself.
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmk {

inline constexpr int kQuantBlock = 32;  // values per block, every type here

struct BlockQ8_0 {
  uint16_t d;      // f16 bits: scale
  int8_t qs[32];   // value j = qs[j] * d
};
struct BlockQ4_0 {
  uint16_t d;      // f16 bits: scale
  uint8_t qs[16];  // qs[j]: element j (low nibble), element j+16 (high); value = (nib-8) * d
};
struct BlockQ4_1 {
  uint16_t d;      // f16 bits: scale
  uint16_t m;      // f16 bits: minimum
  uint8_t qs[16];  // qs[j]: element j (low nibble), element j+16 (high); value = nib * d + m
};
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 2, "Q8_0 block must be 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 2, "Q4_0 block must be 18 bytes");
static_assert(sizeof(BlockQ4_1) == 20 && alignof(BlockQ4_1) == 2, "Q4_1 block must be 20 bytes");

// Reference quantizers: x [n] -> y [n/32] blocks; n must be a multiple of 32 and every
// x finite (checked, InvalidArgument naming the element). Q8_0: d = amax/127, q = round(x/d). Q4_0: d = max/-8 where max is the
// signed value of largest magnitude, q = min(15, (int)(x/d + 8.5)). Q4_1: d = (max-min)/15,
// m = min, q = min(15, (int)((x-min)/d + 0.5)).
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n);

// Reference dequantizers: x [n/32] blocks -> y [n] floats (overwritten).
void dequantize_row_q8_0_ref(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_0_ref(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1_ref(const BlockQ4_1* x, float* y, int64_t n);

}  // namespace llmk
