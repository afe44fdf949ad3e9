// The per-architecture table: for each general.architecture llmk runs, its
// GGUF metadata keys, its tensors (name, shape, required or not) and the
// feature flags its family's forward reads. from_gguf, Model::random,
// add_to_gguf, forward and forward_ref take every per-architecture fact from here.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "llmk/model.hpp"

namespace llmk::arch {

// A tensor dimension, resolved against a ModelConfig by dim().
enum class Dim : uint8_t {
  none,       // a vector's second dimension
  d,          // d_model
  dq,         // n_head * d_head
  dkv,        // n_head_kv * d_head
  qkv,        // dq + 2 dkv (fused q | k | v)
  ff,         // d_ff
  ff2,        // 2 d_ff (fused gate | up)
  dh,         // d_head
  rope_half,  // rope_dim / 2
  vocab,      // n_vocab
  ctx,        // n_ctx (learned positions)
  ffe,        // d_ff_expert()
  expert,     // n_expert
};
int64_t dim(const ModelConfig& c, Dim x);

// Where a tensor goes: a LayerWeights field (layer tensors) or one of the model's.
enum class Slot : uint8_t {
  tok_embd,
  pos_embd,
  output,
  out_norm,
  out_norm_b,
  rope_div,
  attn_norm,
  attn_norm_b,
  wq,
  wk,
  wv,
  bq,
  bk,
  bv,
  wqkv,
  bqkv,
  wo,
  bo,
  ffn_norm,
  ffn_norm_b,
  w_gate,
  w_up,
  w_down,
  b_up,
  b_down,
  q_norm,
  k_norm,
  post_attn_norm,
  post_ffn_norm,
  gate_inp,
  gate_exps,
  up_exps,
  down_exps,
};

enum class Need : uint8_t {
  required,
  optional,
  unfused,  // required unless the layer has the fused attn_qkv (phi3 takes either)
  dense,    // required unless the model has experts (n_expert > 0), else not read
  experts,  // required when the model has experts, else not read
};

struct TensorSpec {
  const char* name;  // GGUF name; layer tensors after "blk.<l>."
  bool per_layer;
  Dim rows, cols;  // PyTorch order [out, in] (ggml ne = {cols, rows}); cols none: a vector [rows]
  Need need;
  Slot slot;
  Dim depth = Dim::none;  // expert: a 3-D [n_expert, rows, cols] tensor (ggml ne = {cols, rows, n_expert})
};

// A metadata key after "<arch>.", read into an int64_t or a float field of ModelConfig.
struct KeySpec {
  const char* key;
  int64_t ModelConfig::*i = nullptr;
  float ModelConfig::*f = nullptr;
  bool required = true;
  double fallback = 0;  // the value when an optional key is absent
};

enum class Norm : uint8_t { rms, layer };
enum class Rope : uint8_t { none, adjacent, neox };  // none: learned positions
enum class Ffn : uint8_t { gelu, swiglu, geglu_tanh };
enum class Family : uint8_t { decoder, gemma3 };  // which forward runs it

struct ArchInfo {
  Arch arch;
  const char* name;
  Family family;
  Norm norm;
  Rope rope;
  Ffn ffn;
  bool qk_norm;  // RMSNorm on each head's q and k (qwen3, gemma3)
  std::span<const KeySpec> keys;
  std::span<const TensorSpec> tensors;
};

const ArchInfo& info(Arch a);
const ArchInfo* find(std::string_view name);  // nullptr when llmk does not know it
std::span<const ArchInfo> all();

}  // namespace llmk::arch
