// The storage types llmk computes with: f32/f16/bf16 and ggml's quantized block formats,
// bit-exact with ggml/llama.cpp files, described by one traits table (wtype_traits).
//
// 32-value blocks (scales `d`, minimum `m`: IEEE halves):
//   Q8_0: value j = qs[j] * d                                        (34 bytes / 32 values)
//   Q4_0: value j = (q_j - 8) * d,   q_j a nibble                    (18 bytes / 32 values)
//   Q4_1: value j = q_j * d + m                                      (20 bytes / 32 values)
//   Q5_0: value j = (q_j - 16) * d,  q_j = nibble | bit j of qh << 4 (22 bytes / 32 values)
//   Q5_1: value j = q_j * d + m,     q_j as Q5_0                      (24 bytes / 32 values)
// Nibble order: byte qs[j] (j < 16) holds element j in its low nibble and element j + 16 in
// its high nibble.
// 256-value super-blocks (K-quants), sub-blocks of 16 or 32 values with integer scales
// relative to the super-block's half scale(s) d (and dmin):
//   Q2_K: 16 x 16, value = d*(sc&15)*q - dmin*(sc>>4), q 2 bits     (84 bytes / 256 values)
//   Q3_K: 16 x 16, value = d*(sc-32)*(q-4*!hbit), q 2 bits, sc 6 bits (110 bytes / 256 values)
//   Q4_K:  8 x 32, value = d*sc*q - dmin*m, q 4 bits, sc, m 6 bits  (144 bytes / 256 values)
//   Q5_K:  8 x 32, as Q4_K with q 5 bits (high bit in qh)           (176 bytes / 256 values)
//   Q6_K: 16 x 16, value = d*sc*(q-32), q 6 bits, sc int8           (210 bytes / 256 values)
// Where each bit of a K-quant lives is given next to its struct (the element i of the
// super-block, i = 128 h + 32 j + l, l < 32). A row of n elements (n a multiple of the
// block) is n / block consecutive blocks.
//
// Here are the structs, the traits table, and the scalar reference quantizers and
// dequantizers. The dequantizers are bitwise equal to the `gguf` package's
// gguf.quants.dequantize (python/tests/test_ggml_quants.py). The 32-value quantizers follow
// ggml's reference rounding, so a row quantized here equals the one ggml's
// quantize_row_*_ref writes; the K-quant quantizers are plain min/max quantizers (not
// ggml's search for the best scales), for writing test files. The model code (src/model)
// reads and writes the blocks itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmk {

inline constexpr int kQuantBlock = 32;   // values per block of the 32-value formats
inline constexpr int kSuperBlock = 256;  // values per K-quant super-block

struct BlockQ8_0 {
  uint16_t d;     // f16 bits: scale
  int8_t qs[32];  // value j = qs[j] * d
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
struct BlockQ5_0 {
  uint16_t d;      // f16 bits: scale
  uint8_t qh[4];   // bit j (little-endian u32): the fifth bit of element j
  uint8_t qs[16];  // low 4 bits, as Q4_0; value = (q - 16) * d
};
struct BlockQ5_1 {
  uint16_t d;      // f16 bits: scale
  uint16_t m;      // f16 bits: minimum
  uint8_t qh[4];   // bit j: the fifth bit of element j
  uint8_t qs[16];  // low 4 bits, as Q4_0; value = q * d + m
};
struct BlockQ2_K {
  uint8_t scales[16];  // sub-block s (16 values, s = i / 16): low nibble scale, high nibble min
  uint8_t qs[64];      // element i: (qs[32 h + l] >> 2 j) & 3
  uint16_t d;          // f16 bits: scale of the scales
  uint16_t dmin;       // f16 bits: scale of the mins
};
struct BlockQ3_K {
  uint8_t hmask[32];   // element i: high bit (hmask[l] >> (4 h + j)) & 1; clear means q - 4
  uint8_t qs[64];      // element i: low 2 bits (qs[32 h + l] >> 2 j) & 3
  uint8_t scales[12];  // 16 6-bit scales (minus 32): low 4 bits in bytes 0..7 (s < 8: byte s low
                       // nibble, else byte s-8 high nibble), high 2 bits in byte 8 + s%4 at 2 (s/4)
  uint16_t d;          // f16 bits
};
struct BlockQ4_K {
  uint16_t d;          // f16 bits: scale of the scales
  uint16_t dmin;       // f16 bits: scale of the mins
  uint8_t scales[12];  // 8 6-bit scales and mins (ggml's get_scale_min_k4)
  uint8_t qs[128];     // element 64 c + 32 u + l: (qs[32 c + l] >> 4 u) & 15; sub-block 2 c + u
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // as Q4_K
  uint8_t qh[32];      // element 32 s + l: fifth bit (qh[l] >> s) & 1
  uint8_t qs[128];     // low 4 bits, as Q4_K
};
struct BlockQ6_K {
  uint8_t ql[128];    // element i: low 4 bits (ql[64 h + 32 (j & 1) + l] >> 4 (j >> 1)) & 15
  uint8_t qh[64];     // element i: high 2 bits (qh[32 h + l] >> 2 j) & 3
  int8_t scales[16];  // sub-block i / 16
  uint16_t d;         // f16 bits
};
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 2, "Q8_0 block must be 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 2, "Q4_0 block must be 18 bytes");
static_assert(sizeof(BlockQ4_1) == 20 && alignof(BlockQ4_1) == 2, "Q4_1 block must be 20 bytes");
static_assert(sizeof(BlockQ5_0) == 22 && alignof(BlockQ5_0) == 2, "Q5_0 block must be 22 bytes");
static_assert(sizeof(BlockQ5_1) == 24 && alignof(BlockQ5_1) == 2, "Q5_1 block must be 24 bytes");
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must be 84 bytes");
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must be 110 bytes");
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

// Q4_K / Q5_K: the 6-bit scale and min of sub-block s (0..7) (ggml's get_scale_min_k4).
inline void k4_scale_min(const uint8_t* q, int s, int& sc, int& m) {
  if (s < 4) {
    sc = q[s] & 63;
    m = q[s + 4] & 63;
  } else {
    sc = (q[s + 4] & 0x0f) | ((q[s - 4] >> 6) << 4);
    m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}
// Q3_K: the signed scale of sub-block s (0..15), in [-32, 31].
inline int q3k_scale(const uint8_t* sc, int s) {
  const int lo = (s < 8 ? sc[s] : sc[s - 8] >> 4) & 0x0f;
  const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Every storage type, in the order of the traits table.
enum class WType : uint8_t { f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k };
inline constexpr int kWTypeCount = 13;

// One row of the storage-type traits table.
struct WTypeTraits {
  WType type;
  const char* name;    // "q4_k": the CLI's and the errors' spelling
  uint32_t ggml_type;  // gguf::GgmlType id
  int block_elems;     // values per block: 1 (float types), 32 or 256
  int block_bytes;     // bytes per block
  // Reference dequantizer: x [n / block_elems blocks] -> y [n] f32 (overwritten).
  void (*to_float)(const void* x, float* y, int64_t n);
  // Reference quantizer: y [n] f32 (finite) -> x blocks.
  void (*from_float)(const float* y, void* x, int64_t n);
  bool quantized() const { return block_elems > 1; }
};
// The row of t (t a WType enumerator).
const WTypeTraits& wtype_traits(WType t);
// The row whose ggml id is `ggml_type`, or nullptr: a type llmk does not compute with.
const WTypeTraits* wtype_traits_for_ggml(uint32_t ggml_type);
// The row named `name`, or nullptr.
const WTypeTraits* wtype_traits_named(std::string_view name);
// Every name, for error messages: "f32|f16|bf16|q8_0|...".
std::string wtype_choices();

// Reference quantizers: x [n] -> y [n/block] blocks; n must be a multiple of the block and
// every x finite (checked, InvalidArgument naming the element). Q8_0: d = amax/127,
// q = round(x/d). Q4_0: d = max/-8 where max is the signed value of largest magnitude,
// q = min(15, (int)(x/d + 8.5)). Q4_1: d = (max-min)/15, m = min,
// q = min(15, (int)((x-min)/d + 0.5)). Q5_0 / Q5_1: as Q4_0 / Q4_1 with 16 / 31 steps.
// K-quants: per sub-block min/max scales, the scales quantized against the largest one,
// then q = round of the value over the quantized scale, clamped to the code range.
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t n);
void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t n);

// Reference dequantizers: x [n/block] blocks -> y [n] floats (overwritten), in the gguf
// package's order of f32 operations (no fused multiply-adds).
void dequantize_row_q8_0_ref(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_0_ref(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1_ref(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0_ref(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1_ref(const BlockQ5_1* x, float* y, int64_t n);
void dequantize_row_q2_k_ref(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_row_q3_k_ref(const BlockQ3_K* x, float* y, int64_t n);
void dequantize_row_q4_k_ref(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_k_ref(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_k_ref(const BlockQ6_K* x, float* y, int64_t n);

}  // namespace llmk
