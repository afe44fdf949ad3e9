// The attention kernel (attention_kernel.hpp) compiled for AVX-512 with VNNI:
// quantized K is scored a tile at a time with vpdpbusd (score_tile_avx512vnni)
// and the integer P.V over int8/int4 V takes vpdpwssd instead of vpmaddwd +
// vpaddd: the same integer sums and f32 steps, so the AVX-512 bits.
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
