// The attention kernel (attention_kernel.hpp) at the avxvnni level, VEX-encoded
// (AVX-VNNI: Alder Lake, Zen 5): AVX2 whose quantized-K scores take vpdpbusd
// and whose P.V over an int8 V takes vpdpwssd (simd::AvxVnni): the same integer
// sums as attention_avx2.cpp, so its bits.
#define LLMK_VNNI256_VEX 1
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avxvnni(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::AvxVnni>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
