// Matrix products against weights kept in their stored type: y = x @ W^T.
//
// W is [N, K] (N output rows, K inputs; PyTorch's [out, in], ggml's ne0 = K),
// row n at data + n * row_bytes, stored as f32, f16, bf16 or one of ggml's
// 32-value block formats Q8_0, Q4_0, Q4_1 (include/llmk/ggml_quants.hpp). x is
// [M, K] f32 and y is [M, N] f32, overwritten. Quantized weights are never
// expanded: each row of x is quantized on the fly to 32-value int8 blocks (as
// llama.cpp does with q8_0/q8_1 activations) and the block dot products run in
// int8 -> int32, scaled once per block. The float weights are read with SIMD
// conversions and accumulated in f32. Threads split the N output rows
// statically; several rows of x share each weight block read (batched decode,
// prefill), so a weight is read from memory once per call. y must not share
// memory with x or W (InvalidArgument).
#pragma once
#include <cstdint>
#include <string_view>

#include "llmk/ggml_quants.hpp"  // WType and its traits table

namespace llmk {

const char* wtype_name(WType t);                                           // wtype_traits(t).name
WType parse_wtype(std::string_view name, std::string_view arg = "wtype");  // throws InvalidArgument
bool wtype_is_quantized(WType t);
// Bytes of one row of k values (block types need k a multiple of their block; throws otherwise).
int64_t wtype_row_bytes(WType t, int64_t k);

struct WeightView {
  const void* data = nullptr;  // [rows, row_bytes] bytes
  WType type = WType::f32;
  int64_t rows = 0;       // N
  int64_t cols = 0;       // K
  int64_t row_bytes = 0;  // >= wtype_row_bytes(type, cols)
};

// Throws InvalidArgument naming fn and the field unless w is well formed: rows, cols >= 0, data not null
// when rows > 0, cols a multiple of 32 for a block type, row_bytes >= wtype_row_bytes(type, cols). Every
// function below checks its W with it.
void check_weight(const char* fn, const WeightView& w);

// y[m, n] = sum_k x[m, k] * W[n, k] for m < M. x: [M, ldx] f32, y: [M, ldy] f32.
void matmul(const float* x, int64_t ldx, const WeightView& w, float* y, int64_t ldy, int64_t M);

// The oracle: the same product with exact x and the dequantized W, in double.
void matmul_ref(const float* x, int64_t ldx, const WeightView& w, double* y, int64_t ldy, int64_t M);

// Row n of W, dequantized (embedding lookups; the f64 form is the oracles'). n in [0, N); out: [K], not
// null, and (the f32 form) not overlapping W.
void dequantize_row(const WeightView& w, int64_t n, float* out);
void dequantize_row_f64(const WeightView& w, int64_t n, double* out);

}  // namespace llmk
