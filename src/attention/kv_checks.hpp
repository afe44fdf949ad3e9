// Argument checks on a KvLayerView shared by the CPU entry points
// (attention.cpp) and the CUDA ones (attention.cu, prefill.cu).
#pragma once
#include <cstdint>
#include <string>

#include "llmk/error.hpp"
#include "llmk/kv_cache.hpp"
#include "llmk/kv_quant.hpp"

namespace llmk::attn {

// Tokens a warp of the CUDA decode's token_tiles kernel scores at once; its
// tiles start at multiples of it (llmk/attention.hpp, DecodeCudaKernel).
constexpr int64_t kDecodeTile = 32;

// kv.k and kv.v aligned to their types' elements (kv_type_align), named when not.
inline void check_pools_aligned(const char* fn, const KvLayerView& kv) {
  LLMK_CHECK_ARG(reinterpret_cast<uintptr_t>(kv.k) % uintptr_t(kv_type_align(kv.k_type)) == 0, fn, "kv.k", kv.k,
                 "must be aligned to " + std::to_string(kv_type_align(kv.k_type)) + " bytes (its type's elements)");
  LLMK_CHECK_ARG(reinterpret_cast<uintptr_t>(kv.v) % uintptr_t(kv_type_align(kv.v_type)) == 0, fn, "kv.v", kv.v,
                 "must be aligned to " + std::to_string(kv_type_align(kv.v_type)) + " bytes (its type's elements)");
}

}  // namespace llmk::attn
