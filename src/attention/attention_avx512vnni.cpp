// The attention kernel (attention_kernel.hpp) compiled for AVX-512 with VNNI:
// the integer dots of quantized K (attn_simd.hpp, qdots4 / qdots4x2) take
// vpdpbusd instead of maddubs + madd, the same sums, so the same bits.
// GCC 12 warns falsely inside its own AVX-512 intrinsics headers (the
// "undefined" pass-through operand of masked builtins is not a real read).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avx512vnni(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::Avx512>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
