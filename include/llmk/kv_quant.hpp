// Storage types of the KV cache and their rows.
//
// A cache row is one token's vector for one KV head: head_dim values stored as
//   f32 | f16 | bf16   head_dim elements;
//   int8 (BlockQ8)     ceil(head_dim/32) blocks of 34 bytes: symmetric, f16 scale d,
//                      value = qs[j] * d (ggml Q8_0);
//   int4 (BlockQ4)     ceil(head_dim/32) blocks of 20 bytes: f16 scale d and min m,
//                      value = nib * d + m; byte qs[j] holds element j in its low
//                      nibble and element j+16 in its high nibble (ggml Q4_1).
// When head_dim is not a multiple of 32 (80) the last group holds fewer values;
// its unused quants are 0 and are never read back.
//
// The functions here are the scalar reference quantizers/dequantizers: the
// oracle for every fused kernel. Quantizing rounds x / d with d the STORED (f16)
// scale, so the reconstruction error of every element is bounded by
//   int8: d/2 + 2^-11 * amax            (d = f16(amax/127))
//   int4: d/2 + 3 * 2^-11 * amax        (d = f16((max-min)/15), m = f16(min))
// with amax the group's largest |x|: half a quantization step, plus the f16
// rounding of the scale (and min), plus nothing else. kv_error_bound() returns it.
// A group holding a NaN or an infinity cannot be represented: its scale (and
// min) are stored as a quiet f16 NaN (0x7e00) and its quants as 0, so every
// value of that group reads back as NaN (the other groups are unaffected), and
// attention over it gives NaN, as over an f32 cache holding a NaN. The CUDA
// append (kv_append_cuda) stores the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmk {

enum class KvType : uint8_t { f32, f16, bf16, int8, int4 };

inline constexpr int kKvGroup = 32;  // values per quantization group

struct BlockQ8 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // value = qs[j] * d
};
static_assert(sizeof(BlockQ8) == 34, "BlockQ8 must be 34 bytes (ggml Q8_0)");

struct BlockQ4 {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 min
  uint8_t qs[16];  // qs[j]: element j (low nibble), element j+16 (high nibble)
};
static_assert(sizeof(BlockQ4) == 20, "BlockQ4 must be 20 bytes (ggml Q4_1)");

inline constexpr int kKvTypeCount = 5;

// One row of the KV storage-type table (as ggml's type_traits): every name,
// size and reference conversion of a KvType is read from it.
struct KvTypeTraits {
  KvType type;
  const char* name;      // "int8": the API's spelling (kv_type_name, Python, `llmk analyze`)
  const char* cli_name;  // "q8": the model commands' spelling (--kv-type); both are accepted
  int group_values;      // values per group: 1 (f32, f16, bf16) or kKvGroup
  int group_bytes;       // bytes per group: the element, or sizeof(BlockQ8) / sizeof(BlockQ4)
  // The alignment in bytes a pool of this type needs (the attention kernels and
  // the CUDA append load its elements, or the f16 scales of int8 / int4 blocks,
  // as such). KvCache pools are 64-byte aligned.
  int align;
  // Reference (scalar) quantization of one row: x[n] -> dst[kv_row_bytes(type, n)].
  void (*quantize)(const float* x, int64_t n, void* dst);
  // Reference dequantization: src[kv_row_bytes(type, n)] -> y[n].
  void (*dequantize)(const void* src, int64_t n, float* y);
  bool quantized() const { return group_values > 1; }
};
const KvTypeTraits& kv_type_traits(KvType t);  // t: a KvType enumerator, else InvalidArgument
// The row whose name or cli_name is exactly `name`, or nullptr.
const KvTypeTraits* kv_type_traits_named(std::string_view name);
// Every accepted spelling, for error messages: "f32|f16|bf16|q8|q4 (or int8|int4)".
std::string kv_type_choices();

const char* kv_type_name(KvType t);  // kv_type_traits(t).name
// A name or cli_name of the table; InvalidArgument naming `arg` and listing kv_type_choices().
KvType parse_kv_type(std::string_view name, std::string_view arg = "kv_type");
bool kv_type_quantized(KvType t);
// Bytes of one row of n values (n >= 1): ceil(n / group_values) groups of group_bytes.
int64_t kv_row_bytes(KvType t, int64_t n);
int64_t kv_type_align(KvType t);
void kv_quantize_row(KvType t, const float* x, int64_t n, void* dst);    // kv_type_traits(t).quantize
void kv_dequantize_row(KvType t, const void* src, int64_t n, float* y);  // kv_type_traits(t).dequantize
// Bound on |x[i] - dequant(quant(x))[i]| for every i of the group holding x[i]
// (the group's amax and stored scale, see above); for f16/bf16 half an ulp of
// |x| (x in the normal range). `row` is x's quantized row, i the element.
double kv_error_bound(KvType t, const float* x, int64_t n, const void* row, int64_t i);

// Hadamard rotation of K (KvCacheConfig::k_rotate; QuaRot, llama.cpp's rotated
// KV). A row of dim values is cut into blocks of `block` (a power of two) and
// each block x becomes H_b x / sqrt(b), with H_b[i][j] = (-1)^popcount(i & j)
// (Sylvester). H_b / sqrt(b) is symmetric and orthogonal: applying it twice is
// the identity, and (H q) . (H k) = q . k, so scores are unchanged in exact
// arithmetic while an outlier channel of k is spread over its whole block
// before the row is quantized (every element gets +-outlier / sqrt(b)).
// The cache uses block = kv_rotation_block(head_dim), the largest power of two
// dividing head_dim (at most 256): 64, 128 and 256 are one transform of the
// whole head; 80 is five blocks of 16 and 96 three blocks of 32, so there an
// outlier is spread over 16 or 32 values only (less spreading, a smaller gain).
int64_t kv_rotation_block(int64_t head_dim);  // head_dim: a multiple of 16 in [16, 256]
// Fast in-place transform of x[rows][dim], O(rows * dim * log2(block)): the
// butterfly stages h = 1, 2, 4, .. < block in that order (x[j] + x[j+h],
// x[j] - x[j+h], in f32), then a multiply by f32(1/sqrt(block)). The scalar,
// AVX2, AVX-512 and CUDA paths do exactly these operations: all give the same
// bits. block: a power of two in [1, 2^16]; dim: a multiple of block.
void hadamard_transform(float* x, int64_t rows, int64_t dim, int64_t block);
// The oracle: y[rows][dim] = the same transform in double, from the definition
// of H_b (a dense block x block product per block, O(rows * dim * block)).
void hadamard_transform_reference(const double* x, double* y, int64_t rows, int64_t dim, int64_t block);

}  // namespace llmk
