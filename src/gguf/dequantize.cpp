// gguf::dequantize_row: one row of any type llmk computes with, to f32 (the scalar reference
// path; the fast matmuls on quantized blocks live with the model).
#include "llmk/dtype.hpp"
#include "llmk/ggml_quants.hpp"
#include "llmk/gguf.hpp"

namespace llmk::gguf {

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const char* fn = "gguf::dequantize_row";
  LLMK_CHECK_ARG(ggml_type_supported(t), fn, "type", ggml_type_name(t), "must be F32, F16, BF16, Q8_0, Q4_0 or Q4_1");
  LLMK_CHECK_ARG(n >= 0 && n % ggml_block_elems(t) == 0, fn, "n", n, "must be a non-negative multiple of the block");
  switch (t) {
    case GgmlType::F32: convert(src, DType::f32, dst, DType::f32, size_t(n)); break;
    case GgmlType::F16: convert(src, DType::f16, dst, DType::f32, size_t(n)); break;
    case GgmlType::BF16: convert(src, DType::bf16, dst, DType::f32, size_t(n)); break;
    case GgmlType::Q8_0: dequantize_row_q8_0_ref(static_cast<const BlockQ8_0*>(src), dst, n); break;
    case GgmlType::Q4_0: dequantize_row_q4_0_ref(static_cast<const BlockQ4_0*>(src), dst, n); break;
    case GgmlType::Q4_1: dequantize_row_q4_1_ref(static_cast<const BlockQ4_1*>(src), dst, n); break;
    default: break;  // excluded above
  }
}

}  // namespace llmk::gguf
