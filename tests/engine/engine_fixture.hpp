// Shared by the engine tests: a tiny random-weight model's shape and deterministic prompts.
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/model.hpp"

namespace llmk::test {

// 2 layers, d = 64, 4 query heads over 2 KV heads, a 301-token vocabulary.
inline ModelConfig tiny_engine_model(int64_t n_ctx) {
  ModelConfig c;
  c.n_vocab = 301;
  c.n_ctx = n_ctx;
  c.d_model = 64;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.d_ff = 96;
  return c;
}

// n tokens in [0, 301), a different sequence for each seed.
inline std::vector<int32_t> engine_tokens(int64_t n, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t((seed * 2654435761u + uint32_t(i) * 40503u) % 301u);
  return t;
}

}  // namespace llmk::test
