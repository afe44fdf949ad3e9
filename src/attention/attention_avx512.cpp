// The attention kernel (attention_kernel.hpp) compiled for AVX512.
#include "attention/attention_kernel.hpp"

namespace llmk::attn_isa {
void attend_avx512(const KvLayerView& kv, const attn::Item& it, float* scratch) {
  attn::attend<simd::Avx512>(kv, it, scratch);
}
}  // namespace llmk::attn_isa
