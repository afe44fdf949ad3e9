// gguf::dequantize_row: one row of any type llmk computes with, to f32 (the traits table's
// scalar reference; the fast matmuls on quantized blocks live with the model).
#include "llmk/ggml_quants.hpp"
#include "llmk/gguf.hpp"

namespace llmk::gguf {

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const char* fn = "gguf::dequantize_row";
  const WTypeTraits* tr = wtype_traits_for_ggml(uint32_t(t));
  LLMK_CHECK_ARG(tr != nullptr, fn, "type", ggml_type_name(t), "must be one of " + supported_types_list());
  LLMK_CHECK_ARG(n >= 0 && n % tr->block_elems == 0, fn, "n", n, "must be a non-negative multiple of the block");
  tr->to_float(src, dst, n);
}

}  // namespace llmk::gguf
