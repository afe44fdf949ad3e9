// The attention kernel (attention_kernel.hpp) compiled for AVX-512 with VNNI
// and VBMI (Ice Lake, Zen 4 and later): as attention_avx512vnni.cpp, except
// that P.V over an int4 V takes 8-bit weights, four positions a vpdpbusd, the
// four V rows' bytes interleaved by one vpermb (pv_q4_rows_avx512vbmi). Over every
// other V type the same code, so the VNNI bits.
// GCC 12 warns falsely inside its own AVX-512 intrinsics headers (the
// "undefined" pass-through operand of masked builtins is not a real read).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avx512vbmi(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::Avx512>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
