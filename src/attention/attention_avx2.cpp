// The attention kernel (attention_kernel.hpp) compiled for AVX2.
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avx2(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::Avx2>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
