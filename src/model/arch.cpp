// The architecture table (arch.hpp). Keys and tensors follow llama.cpp's
// loaders (src/models/<arch>.cpp): what llama.cpp requires is required here,
// what it takes when present is optional.
#include "model/arch.hpp"

#include <array>
#include <string>

namespace llmk::arch {
namespace {
using C = ModelConfig;
constexpr bool kOpt = false;

// clang-format off
// (here and below: macro lists of braced specs, laid out by hand)
// The keys every architecture has.
#define LLMK_BASE_KEYS                                                                      \
  KeySpec{"context_length", &C::n_ctx}, KeySpec{"embedding_length", &C::d_model},           \
      KeySpec{"block_count", &C::n_layer}, KeySpec{"feed_forward_length", &C::d_ff},        \
      KeySpec{"attention.head_count", &C::n_head},                                          \
      KeySpec{"attention.head_count_kv", &C::n_head_kv, nullptr, kOpt, 0} /* 0: n_head */

// RMSNorm + RoPE families: head_dim from key_length (0: d_model / n_head), rope_dim
// from dimension_count (0: d_head).
#define LLMK_ROPE_KEYS(base)                                                          \
  LLMK_BASE_KEYS, KeySpec{"attention.layer_norm_rms_epsilon", nullptr, &C::norm_eps}, \
      KeySpec{"rope.freq_base", nullptr, &C::rope_base, kOpt, base},                  \
      KeySpec{"rope.dimension_count", &C::rope_dim, nullptr, kOpt, 0}
// clang-format on

// llama.cpp reads expert_count and expert_used_count for every architecture (llama-model.cpp);
// llama's experts are d_ff wide, qwen3moe's expert_feed_forward_length (absent: d_ff / used).
constexpr KeySpec kLlamaKeys[] = {LLMK_ROPE_KEYS(10000.0),
                                  KeySpec{"attention.key_length", &C::head_dim, nullptr, kOpt, 0},
                                  KeySpec{"attention.sliding_window", &C::sliding_window, nullptr, kOpt, 0},
                                  KeySpec{"expert_count", &C::n_expert, nullptr, kOpt, 0},
                                  KeySpec{"expert_used_count", &C::n_expert_used, nullptr, kOpt, 0}};
constexpr KeySpec kQwen3MoeKeys[] = {LLMK_ROPE_KEYS(10000.0),
                                     KeySpec{"attention.key_length", &C::head_dim, nullptr, kOpt, 0},
                                     KeySpec{"expert_count", &C::n_expert},
                                     KeySpec{"expert_used_count", &C::n_expert_used},
                                     KeySpec{"expert_feed_forward_length", &C::d_ff_exp, nullptr, kOpt, 0}};
constexpr KeySpec kQwenKeys[] = {LLMK_ROPE_KEYS(10000.0),
                                 KeySpec{"attention.key_length", &C::head_dim, nullptr, kOpt, 0}};
constexpr KeySpec kGpt2Keys[] = {LLMK_BASE_KEYS, KeySpec{"attention.layer_norm_epsilon", nullptr, &C::norm_eps}};
// llama.cpp's gemma3 (src/models/gemma3.cpp): head_dim from key_length, global base rope.freq_base,
// local base rope.freq_base_swa, window attention.sliding_window (swa_period: see model_gguf.cpp).
constexpr KeySpec kGemma3Keys[] = {LLMK_ROPE_KEYS(1e6), KeySpec{"attention.key_length", &C::head_dim},
                                   KeySpec{"rope.freq_base_swa", nullptr, &C::rope_base_local, kOpt, 10000.0},
                                   KeySpec{"attention.sliding_window", &C::sliding_window, nullptr, kOpt, 0}};
#undef LLMK_ROPE_KEYS
#undef LLMK_BASE_KEYS

constexpr auto R = Need::required, O = Need::optional, U = Need::unfused, F = Need::dense, X = Need::experts;
using D = Dim;
using S = Slot;

// clang-format off
// Global tensors every family shares.
#define LLMK_EMBD_OUT                                                                     \
  TensorSpec{"token_embd.weight", false, D::vocab, D::d, R, S::tok_embd},                 \
      TensorSpec{"output.weight", false, D::vocab, D::d, O, S::output} /* absent: tied */, \
      TensorSpec{"output_norm.weight", false, D::d, D::none, R, S::out_norm}

#define LLMK_LAYER(name, rows, cols, need, slot) TensorSpec{name, true, D::rows, D::cols, need, S::slot}
// The mixture of experts: the router and the experts' 3-D [n_expert, rows, cols] tensors.
#define LLMK_EXPERTS                                                                                     \
  LLMK_LAYER("ffn_gate_inp.weight", expert, d, X, gate_inp),                                              \
      TensorSpec{"ffn_gate_exps.weight", true, D::ffe, D::d, X, S::gate_exps, D::expert},                 \
      TensorSpec{"ffn_up_exps.weight", true, D::ffe, D::d, X, S::up_exps, D::expert},                     \
      TensorSpec{"ffn_down_exps.weight", true, D::d, D::ffe, X, S::down_exps, D::expert}

// Llama and the families that differ from it only in flags.
#define LLMK_LLAMA_LAYER(bias)                                                                          \
  LLMK_LAYER("attn_norm.weight", d, none, R, attn_norm), LLMK_LAYER("attn_q.weight", dq, d, R, wq),      \
      LLMK_LAYER("attn_k.weight", dkv, d, R, wk), LLMK_LAYER("attn_v.weight", dkv, d, R, wv),           \
      LLMK_LAYER("attn_q.bias", dq, none, bias, bq), LLMK_LAYER("attn_k.bias", dkv, none, bias, bk),    \
      LLMK_LAYER("attn_v.bias", dkv, none, bias, bv), LLMK_LAYER("attn_output.weight", d, dq, R, wo),   \
      LLMK_LAYER("ffn_norm.weight", d, none, R, ffn_norm), LLMK_LAYER("ffn_gate.weight", ff, d, F, w_gate), \
      LLMK_LAYER("ffn_up.weight", ff, d, F, w_up), LLMK_LAYER("ffn_down.weight", d, ff, F, w_down)
// clang-format on

constexpr TensorSpec kLlamaTensors[] = {LLMK_EMBD_OUT,
                                        TensorSpec{"rope_freqs.weight", false, D::rope_half, D::none, O, S::rope_div},
                                        LLMK_LLAMA_LAYER(O), LLMK_EXPERTS};
constexpr TensorSpec kQwen2Tensors[] = {LLMK_EMBD_OUT, LLMK_LLAMA_LAYER(O)};
constexpr TensorSpec kQwen3Tensors[] = {
    LLMK_EMBD_OUT,
    LLMK_LAYER("attn_norm.weight", d, none, R, attn_norm),
    LLMK_LAYER("attn_q.weight", dq, d, R, wq),
    LLMK_LAYER("attn_k.weight", dkv, d, R, wk),
    LLMK_LAYER("attn_v.weight", dkv, d, R, wv),
    LLMK_LAYER("attn_q_norm.weight", dh, none, R, q_norm),
    LLMK_LAYER("attn_k_norm.weight", dh, none, R, k_norm),
    LLMK_LAYER("attn_output.weight", d, dq, R, wo),
    LLMK_LAYER("ffn_norm.weight", d, none, R, ffn_norm),
    LLMK_LAYER("ffn_gate.weight", ff, d, R, w_gate),
    LLMK_LAYER("ffn_up.weight", ff, d, R, w_up),
    LLMK_LAYER("ffn_down.weight", d, ff, R, w_down),
};
// qwen3's attention; the FFN is always a mixture of experts (llama.cpp's qwen3moe.cpp).
constexpr TensorSpec kQwen3MoeTensors[] = {
    LLMK_EMBD_OUT,
    LLMK_LAYER("attn_norm.weight", d, none, R, attn_norm),
    LLMK_LAYER("attn_q.weight", dq, d, R, wq),
    LLMK_LAYER("attn_k.weight", dkv, d, R, wk),
    LLMK_LAYER("attn_v.weight", dkv, d, R, wv),
    LLMK_LAYER("attn_q_norm.weight", dh, none, R, q_norm),
    LLMK_LAYER("attn_k_norm.weight", dh, none, R, k_norm),
    LLMK_LAYER("attn_output.weight", d, dq, R, wo),
    LLMK_LAYER("ffn_norm.weight", d, none, R, ffn_norm),
    LLMK_EXPERTS,
};
// rope_factors_short is the divisor set llmk applies; rope_factors_long (read by
// llama.cpp when its context exceeds the original one) is checked for shape only.
constexpr TensorSpec kPhi3Tensors[] = {
    LLMK_EMBD_OUT,
    TensorSpec{"rope_factors_short.weight", false, D::rope_half, D::none, O, S::rope_div},
    LLMK_LAYER("attn_norm.weight", d, none, R, attn_norm),
    LLMK_LAYER("attn_qkv.weight", qkv, d, O, wqkv),
    LLMK_LAYER("attn_q.weight", dq, d, U, wq),
    LLMK_LAYER("attn_k.weight", dkv, d, U, wk),
    LLMK_LAYER("attn_v.weight", dkv, d, U, wv),
    LLMK_LAYER("attn_output.weight", d, dq, R, wo),
    LLMK_LAYER("ffn_norm.weight", d, none, R, ffn_norm),
    LLMK_LAYER("ffn_up.weight", ff2, d, R, w_up),
    LLMK_LAYER("ffn_down.weight", d, ff, R, w_down),
};
constexpr TensorSpec kGpt2Tensors[] = {
    LLMK_EMBD_OUT,
    TensorSpec{"output_norm.bias", false, D::d, D::none, R, S::out_norm_b},
    TensorSpec{"position_embd.weight", false, D::ctx, D::d, R, S::pos_embd},
    LLMK_LAYER("attn_norm.weight", d, none, R, attn_norm),
    LLMK_LAYER("attn_norm.bias", d, none, R, attn_norm_b),
    LLMK_LAYER("attn_qkv.weight", qkv, d, R, wqkv),
    LLMK_LAYER("attn_qkv.bias", qkv, none, R, bqkv),
    LLMK_LAYER("attn_output.weight", d, dq, R, wo),
    LLMK_LAYER("attn_output.bias", d, none, R, bo),
    LLMK_LAYER("ffn_norm.weight", d, none, R, ffn_norm),
    LLMK_LAYER("ffn_norm.bias", d, none, R, ffn_norm_b),
    LLMK_LAYER("ffn_up.weight", ff, d, R, w_up),
    LLMK_LAYER("ffn_up.bias", ff, none, R, b_up),
    LLMK_LAYER("ffn_down.weight", d, ff, R, w_down),
    LLMK_LAYER("ffn_down.bias", d, none, R, b_down),
};
constexpr TensorSpec kGemma3Tensors[] = {
    LLMK_EMBD_OUT,
    LLMK_LAYER("attn_norm.weight", d, none, R, attn_norm),
    LLMK_LAYER("attn_q.weight", dq, d, R, wq),
    LLMK_LAYER("attn_k.weight", dkv, d, R, wk),
    LLMK_LAYER("attn_v.weight", dkv, d, R, wv),
    LLMK_LAYER("attn_q_norm.weight", dh, none, R, q_norm),
    LLMK_LAYER("attn_k_norm.weight", dh, none, R, k_norm),
    LLMK_LAYER("attn_output.weight", d, dq, R, wo),
    LLMK_LAYER("post_attention_norm.weight", d, none, R, post_attn_norm),
    LLMK_LAYER("ffn_norm.weight", d, none, R, ffn_norm),
    LLMK_LAYER("ffn_gate.weight", ff, d, R, w_gate),
    LLMK_LAYER("ffn_up.weight", ff, d, R, w_up),
    LLMK_LAYER("ffn_down.weight", d, ff, R, w_down),
    LLMK_LAYER("post_ffw_norm.weight", d, none, R, post_ffn_norm),
};
#undef LLMK_LLAMA_LAYER
#undef LLMK_EXPERTS
#undef LLMK_LAYER
#undef LLMK_EMBD_OUT

const std::array<ArchInfo, 7> kArchs = {{
    {Arch::llama, "llama", Family::decoder, Norm::rms, Rope::adjacent, Ffn::swiglu, false, kLlamaKeys, kLlamaTensors},
    {Arch::gpt2, "gpt2", Family::decoder, Norm::layer, Rope::none, Ffn::gelu, false, kGpt2Keys, kGpt2Tensors},
    {Arch::gemma3, "gemma3", Family::gemma3, Norm::rms, Rope::neox, Ffn::geglu_tanh, true, kGemma3Keys, kGemma3Tensors},
    {Arch::qwen2, "qwen2", Family::decoder, Norm::rms, Rope::neox, Ffn::swiglu, false, kQwenKeys, kQwen2Tensors},
    {Arch::qwen3, "qwen3", Family::decoder, Norm::rms, Rope::neox, Ffn::swiglu, true, kQwenKeys, kQwen3Tensors},
    {Arch::phi3, "phi3", Family::decoder, Norm::rms, Rope::neox, Ffn::swiglu, false, kQwenKeys, kPhi3Tensors},
    {Arch::qwen3moe, "qwen3moe", Family::decoder, Norm::rms, Rope::neox, Ffn::swiglu, true, kQwen3MoeKeys,
     kQwen3MoeTensors},
}};
}  // namespace

int64_t dim(const ModelConfig& c, Dim x) {
  const int64_t dq = c.n_head * c.d_head();
  switch (x) {
    case Dim::none: return 1;
    case Dim::d: return c.d_model;
    case Dim::dq: return dq;
    case Dim::dkv: return c.d_kv();
    case Dim::qkv: return dq + 2 * c.d_kv();
    case Dim::ff: return c.d_ff;
    case Dim::ff2: return 2 * c.d_ff;
    case Dim::dh: return c.d_head();
    case Dim::rope_half: return c.rope_dim / 2;
    case Dim::vocab: return c.n_vocab;
    case Dim::ctx: return c.n_ctx;
    case Dim::ffe: return c.d_ff_expert();
    case Dim::expert: return c.n_expert;
  }
  return 0;
}

const ArchInfo& info(Arch a) {
  for (const ArchInfo& i : kArchs)
    if (i.arch == a) return i;
  return kArchs[0];
}

const ArchInfo* find(std::string_view name) {
  for (const ArchInfo& i : kArchs)
    if (name == i.name) return &i;
  return nullptr;
}

std::span<const ArchInfo> all() { return kArchs; }

}  // namespace llmk::arch

namespace llmk {
const char* arch_name(Arch a) { return arch::info(a).name; }
bool arch_gated_ffn(Arch a) { return arch::info(a).ffn != arch::Ffn::gelu; }

std::string known_archs() {
  std::string s;
  for (const arch::ArchInfo& i : arch::all()) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}
}  // namespace llmk
