// Model::from_gguf: views a GGUF file's tensors in place (no copy of any
// matrix; only 1-D norm/bias vectors stored as f16/bf16 are converted to f32).
// ggml order: a PyTorch [out, in] matrix has ne = {in, out}, so W rows are
// ne[1] rows of ne[0] values. Llama Q/K rows come permuted by the converter so
// that RoPE rotates adjacent pairs, which forward() does.
#include <string>

#include "llmk/gguf.hpp"
#include "model/model_internal.hpp"

namespace llmk {
namespace {
using gguf::FormatError;
using gguf::GgmlType;

WType wtype_of(const gguf::TensorInfo& t, const std::string& file) {
  if (const WTypeTraits* tr = wtype_traits_for_ggml(uint32_t(t.type))) return tr->type;
  throw FormatError(file + ": tensor '" + t.name + "' has type " + gguf::ggml_type_name(t.type) +
                    " (supported: " + gguf::supported_types_list() + ")");
}

std::string dims(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (int i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[size_t(i)]);
  return s + "]";
}

// Matrix `name` with ne = {K, N}.
WeightView matrix(const gguf::File& f, const std::string& name, int64_t K, int64_t N) {
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.n_dims != 2 || t.ne[0] != K || t.ne[1] != N)
    throw FormatError(f.path() + ": tensor '" + name + "' has shape " + dims(t) + ", expected [" + std::to_string(K) +
                      ", " + std::to_string(N) + "]");
  return WeightView{t.data, wtype_of(t, f.path()), N, K, t.row_bytes};
}

// Vector `name` of n values as f32 (converted into `owned` unless stored as f32).
const float* vec(const gguf::File& f, const std::string& name, int64_t n, std::vector<std::vector<float>>& owned,
                 bool optional = false) {
  if (optional && !f.find_tensor(name)) return nullptr;
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.n_elements != n || t.ne[0] != n)
    throw FormatError(f.path() + ": tensor '" + name + "' has shape " + dims(t) + ", expected [" + std::to_string(n) + "]");
  const WType wt = wtype_of(t, f.path());
  if (wt == WType::f32) return static_cast<const float*>(t.data);
  auto& v = owned.emplace_back(size_t(n));
  dequantize_row(WeightView{t.data, wt, 1, n, t.row_bytes}, 0, v.data());
  return v.data();
}
}  // namespace

Model Model::from_gguf(const gguf::File& f) {
  Model m;
  ModelConfig& c = m.cfg_;
  const std::string arch(f.get_string("general.architecture"));
  if (arch == "llama") c.arch = Arch::llama;
  else if (arch == "gpt2") c.arch = Arch::gpt2;
  else if (arch == "gemma3") c.arch = Arch::gemma3;
  else throw FormatError(f.path() + ": general.architecture = '" + arch + "' (supported: llama, gpt2, gemma3)");
  const bool gemma3 = c.arch == Arch::gemma3;
  const bool gpt2 = c.arch == Arch::gpt2;
  const std::string p = arch + ".";
  c.n_ctx = f.get_int(p + "context_length");
  c.d_model = f.get_int(p + "embedding_length");
  c.n_layer = f.get_int(p + "block_count");
  c.d_ff = f.get_int(p + "feed_forward_length");
  c.n_head = f.get_int(p + "attention.head_count");
  c.n_head_kv = f.get_int_or(p + "attention.head_count_kv", c.n_head);
  if (gpt2) {
    c.norm_eps = f.get_f32(p + "attention.layer_norm_epsilon");
  } else {
    c.norm_eps = f.get_f32(p + "attention.layer_norm_rms_epsilon");
    c.rope_base = f.get_f32_or(p + "rope.freq_base", 10000.0f);
    c.rope_dim = f.get_int_or(p + "rope.dimension_count", c.n_head > 0 ? c.d_model / c.n_head : 0);
  }
  if (gemma3) {
    // llama.cpp's reading (src/models/gemma3.cpp): head_dim from key_length (= value_length),
    // global RoPE base rope.freq_base, local base rope.freq_base_swa (10000 when absent),
    // window attention.sliding_window on l % 6 < 5 (pattern 6 when absent).
    c.head_dim = f.get_int(p + "attention.key_length");
    if (f.get_int_or(p + "attention.value_length", c.head_dim) != c.head_dim)
      throw FormatError(f.path() + ": " + p + "attention.value_length differs from key_length (unsupported)");
    c.rope_dim = c.head_dim;
    c.rope_base = f.get_f32_or(p + "rope.freq_base", 1e6f);
    c.rope_base_local = f.get_f32_or(p + "rope.freq_base_swa", 10000.0f);
    c.sliding_window = f.get_int_or(p + "attention.sliding_window", 0);
    if (f.has(p + "attention.sliding_window_pattern") && f.get(p + "attention.sliding_window_pattern").type == gguf::ValueType::array)
      throw FormatError(f.path() + ": " + p + "attention.sliding_window_pattern as a per-layer array is not supported");
    c.swa_period = c.sliding_window > 0 ? f.get_int_or(p + "attention.sliding_window_pattern", 6) : 0;
    if (f.get_f32_or(p + "final_logit_softcapping", 0.0f) != 0.0f)
      throw FormatError(f.path() + ": " + p + "final_logit_softcapping is not supported");
  }
  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  c.n_vocab = emb.ne[1];
  c.tied = f.find_tensor("output.weight") == nullptr;
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    throw FormatError(f.path() + ": unusable model hyperparameters: " + e.what());
  }
  auto& V = m.owned_->vecs;
  const int64_t d = c.d_model, dq = c.n_head * c.d_head(), dkv = c.d_kv();
  m.tok_embd_ = matrix(f, "token_embd.weight", d, c.n_vocab);
  m.output_ = c.tied ? m.tok_embd_ : matrix(f, "output.weight", d, c.n_vocab);
  if (gpt2) m.pos_embd_ = matrix(f, "position_embd.weight", d, c.n_ctx);
  m.out_norm_ = vec(f, "output_norm.weight", d, V);
  if (gpt2) m.out_norm_b_ = vec(f, "output_norm.bias", d, V);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LayerWeights L;
    L.attn_norm = vec(f, b + "attn_norm.weight", d, V);
    L.ffn_norm = vec(f, b + "ffn_norm.weight", d, V);
    L.wo = matrix(f, b + "attn_output.weight", dq, d);
    L.w_up = matrix(f, b + "ffn_up.weight", d, c.d_ff);
    L.w_down = matrix(f, b + "ffn_down.weight", c.d_ff, d);
    if (gpt2) {
      L.attn_norm_b = vec(f, b + "attn_norm.bias", d, V);
      L.ffn_norm_b = vec(f, b + "ffn_norm.bias", d, V);
      L.wqkv = matrix(f, b + "attn_qkv.weight", d, 3 * d);
      L.bqkv = vec(f, b + "attn_qkv.bias", 3 * d, V);
      L.bo = vec(f, b + "attn_output.bias", d, V);
      L.b_up = vec(f, b + "ffn_up.bias", c.d_ff, V);
      L.b_down = vec(f, b + "ffn_down.bias", d, V);
    } else {
      L.wq = matrix(f, b + "attn_q.weight", d, dq);
      L.wk = matrix(f, b + "attn_k.weight", d, dkv);
      L.wv = matrix(f, b + "attn_v.weight", d, dkv);
      L.bq = vec(f, b + "attn_q.bias", dq, V, true);
      L.bk = vec(f, b + "attn_k.bias", dkv, V, true);
      L.bv = vec(f, b + "attn_v.bias", dkv, V, true);
      L.w_gate = matrix(f, b + "ffn_gate.weight", d, c.d_ff);
      if (gemma3) {
        L.q_norm = vec(f, b + "attn_q_norm.weight", c.d_head(), V);
        L.k_norm = vec(f, b + "attn_k_norm.weight", c.d_head(), V);
        L.post_attn_norm = vec(f, b + "post_attention_norm.weight", d, V);
        L.post_ffn_norm = vec(f, b + "post_ffw_norm.weight", d, V);
      }
    }
    m.layers_.push_back(L);
  }
  return m;
}

}  // namespace llmk

namespace llmk {
namespace {
GgmlType ggml_of(WType t) { return GgmlType(wtype_traits(t).ggml_type); }
}  // namespace

void Model::add_to_gguf(gguf::Writer& w) const {
  using gguf::Value;
  const ModelConfig& c = cfg_;
  const bool gpt2 = c.arch == Arch::gpt2;
  LLMK_CHECK_ARG(c.arch != Arch::gemma3, "Model::add_to_gguf", "config.arch", "gemma3", "is not written (llama and gpt2 are)");
  const std::string arch = gpt2 ? "gpt2" : "llama", p = arch + ".";
  w.set("general.architecture", Value::string(arch));
  w.set(p + "context_length", Value::of(uint32_t(c.n_ctx)));
  w.set(p + "embedding_length", Value::of(uint32_t(c.d_model)));
  w.set(p + "block_count", Value::of(uint32_t(c.n_layer)));
  w.set(p + "feed_forward_length", Value::of(uint32_t(c.d_ff)));
  w.set(p + "attention.head_count", Value::of(uint32_t(c.n_head)));
  w.set(p + "attention.head_count_kv", Value::of(uint32_t(c.n_head_kv)));
  if (gpt2) {
    w.set(p + "attention.layer_norm_epsilon", Value::of(c.norm_eps));
  } else {
    w.set(p + "attention.layer_norm_rms_epsilon", Value::of(c.norm_eps));
    w.set(p + "rope.freq_base", Value::of(c.rope_base));
    w.set(p + "rope.dimension_count", Value::of(uint32_t(c.rope_dim)));
  }
  auto mat = [&](const std::string& name, const WeightView& v) {
    if (!v.data) return;
    LLMK_CHECK_ARG(v.row_bytes == wtype_row_bytes(v.type, v.cols), "Model::add_to_gguf", name, v.row_bytes,
                   "rows must be packed");
    w.add_tensor(name, ggml_of(v.type), {v.cols, v.rows},
                 {static_cast<const uint8_t*>(v.data), size_t(v.rows * v.row_bytes)});
  };
  auto vec = [&](const std::string& name, const float* x, int64_t n) {
    if (x) w.add_tensor(name, GgmlType::F32, {n}, {reinterpret_cast<const uint8_t*>(x), size_t(n) * 4});
  };
  const int64_t d = c.d_model, dq = c.n_head * c.d_head(), dkv = c.d_kv();
  mat("token_embd.weight", tok_embd_);
  if (!c.tied) mat("output.weight", output_);
  mat("position_embd.weight", pos_embd_);
  vec("output_norm.weight", out_norm_, d);
  vec("output_norm.bias", out_norm_b_, d);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = layers_[size_t(l)];
    const std::string b = "blk." + std::to_string(l) + ".";
    vec(b + "attn_norm.weight", L.attn_norm, d);
    vec(b + "attn_norm.bias", L.attn_norm_b, d);
    vec(b + "ffn_norm.weight", L.ffn_norm, d);
    vec(b + "ffn_norm.bias", L.ffn_norm_b, d);
    mat(b + "attn_q.weight", L.wq);
    mat(b + "attn_k.weight", L.wk);
    mat(b + "attn_v.weight", L.wv);
    vec(b + "attn_q.bias", L.bq, dq);
    vec(b + "attn_k.bias", L.bk, dkv);
    vec(b + "attn_v.bias", L.bv, dkv);
    mat(b + "attn_qkv.weight", L.wqkv);
    vec(b + "attn_qkv.bias", L.bqkv, 3 * d);
    mat(b + "attn_output.weight", L.wo);
    vec(b + "attn_output.bias", L.bo, d);
    mat(b + "ffn_gate.weight", L.w_gate);
    mat(b + "ffn_up.weight", L.w_up);
    vec(b + "ffn_up.bias", L.b_up, c.d_ff);
    mat(b + "ffn_down.weight", L.w_down);
    vec(b + "ffn_down.bias", L.b_down, d);
  }
}

}  // namespace llmk
