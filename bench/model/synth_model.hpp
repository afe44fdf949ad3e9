// Random-weight GGUF files of real model shapes for `llmk bench generate --model SHAPE`:
// the shape's exact tensors, stored in a llama.cpp quantization mix, with the family's real
// tokenizer metadata (llama.cpp's vocab GGUFs, scripts/fetch-llamacpp-vocab).
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "llmk/model.hpp"

namespace llmk::bench {

struct SynthShape {
  const char* name;   // what --model takes: "llama3-8b"
  const char* vocab;  // llama.cpp's ggml-vocab-<vocab>.gguf: the tokenizer (and n_vocab)
  Arch arch;
  int64_t d_model, n_layer, n_head, n_head_kv, d_ff, n_ctx;
  float rope_base, norm_eps;
  bool qkv_bias;  // q, k, v biases (Qwen2)
};
// Llama-3-8B and Qwen2.5-7B (their config.json); the MoE shapes join once MoE is supported.
inline constexpr SynthShape kSynthShapes[] = {
    {"llama3-8b", "llama-bpe", Arch::llama, 4096, 32, 32, 8, 14336, 8192, 500000.0f, 1e-5f, false},
    {"qwen2.5-7b", "qwen2", Arch::qwen2, 3584, 28, 28, 4, 18944, 32768, 1e6f, 1e-6f, true},
};
// The weight mixes --weights takes: "q4_k_m" (Q4_K, with Q6_K where llama.cpp's Q4_K_M
// rules put it), "q4_0" (output Q6_K, as llama.cpp's Q4_0 files), "q8_0".
inline constexpr const char* kSynthWeights[] = {"q4_k_m", "q4_0", "q8_0"};

const SynthShape* synth_shape(std::string_view name);  // nullptr when `name` is not one
std::string synth_shape_names();                       // "llama3-8b, qwen2.5-7b"
bool synth_weights_known(std::string_view weights);

// The cached file of `shape` in `weights` with n_layer layers (0: the shape's own), written
// once (streamed: memory stays small) into ${LLMK_CACHE:-~/.cache/llmk}/bench-models/; returns
// its path. RuntimeError saying why when the vocabulary cannot be fetched or the file written.
std::string synth_model_file(const SynthShape& shape, const std::string& weights, int64_t n_layer);

}  // namespace llmk::bench
