// attention_avxvnni.cpp with its VNNI instructions EVEX-encoded on ymm0-15: the
// avxvnni level on a CPU with AVX-512 VNNI + VL but not AVX-VNNI (Ice Lake,
// Zen 4), where LLMK_SIMD=avxvnni runs it. The same code, so the same bits.
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avxvnni_evex(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::AvxVnni>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
