// The attention kernel (attention_kernel.hpp) compiled for AVX512.
// GCC 12 warns falsely inside its own AVX-512 intrinsics headers (the
// "undefined" pass-through operand of masked builtins is not a real read).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avx512(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::Avx512>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
