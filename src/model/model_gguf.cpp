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

// Matrix `name` with ne = {K, N}, or with E > 0 the 3-D ne = {K, N, E} viewed as E * N rows
// (GGUF tensors are packed: expert e's rows follow expert e - 1's).
WeightView matrix(const gguf::File& f, const std::string& name, int64_t K, int64_t N, int64_t E = 0) {
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.n_dims != (E > 0 ? 3 : 2) || t.ne[0] != K || t.ne[1] != N || (E > 0 && t.ne[2] != E))
    throw FormatError(f.path() + ": tensor '" + name + "' has shape " + dims(t) + ", expected [" + std::to_string(K) +
                      ", " + std::to_string(N) + (E > 0 ? ", " + std::to_string(E) : "") + "]");
  return WeightView{t.data, wtype_of(t, f.path()), E > 0 ? E * N : N, K, t.row_bytes};
}

// Vector `name` of n values as f32 (converted into `owned` unless stored as f32).
const float* vec(const gguf::File& f, const std::string& name, int64_t n, std::vector<std::vector<float>>& owned,
                 bool optional = false) {
  if (optional && !f.find_tensor(name)) return nullptr;
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.n_elements != n || t.ne[0] != n)
    throw FormatError(f.path() + ": tensor '" + name + "' has shape " + dims(t) + ", expected [" + std::to_string(n) +
                      "]");
  const WType wt = wtype_of(t, f.path());
  if (wt == WType::f32) return static_cast<const float*>(t.data);
  auto& v = owned.emplace_back(size_t(n));
  dequantize_row(WeightView{t.data, wt, 1, n, t.row_bytes}, 0, v.data());
  return v.data();
}
}  // namespace

WeightView* Model::Slots::mat(Model& m, LayerWeights& L, arch::Slot s) {
  using S = arch::Slot;
  switch (s) {
    case S::tok_embd: return &m.tok_embd_;
    case S::pos_embd: return &m.pos_embd_;
    case S::output: return &m.output_;
    case S::wq: return &L.wq;
    case S::wk: return &L.wk;
    case S::wv: return &L.wv;
    case S::wqkv: return &L.wqkv;
    case S::wo: return &L.wo;
    case S::w_gate: return &L.w_gate;
    case S::w_up: return &L.w_up;
    case S::w_down: return &L.w_down;
    case S::gate_inp: return &L.gate_inp;
    case S::gate_exps: return &L.gate_exps;
    case S::up_exps: return &L.up_exps;
    case S::down_exps: return &L.down_exps;
    default: return nullptr;
  }
}

const float** Model::Slots::vec(Model& m, LayerWeights& L, arch::Slot s) {
  using S = arch::Slot;
  switch (s) {
    case S::out_norm: return &m.out_norm_;
    case S::out_norm_b: return &m.out_norm_b_;
    case S::rope_div: return &m.rope_div_;
    case S::attn_norm: return &L.attn_norm;
    case S::attn_norm_b: return &L.attn_norm_b;
    case S::bq: return &L.bq;
    case S::bk: return &L.bk;
    case S::bv: return &L.bv;
    case S::bqkv: return &L.bqkv;
    case S::bo: return &L.bo;
    case S::ffn_norm: return &L.ffn_norm;
    case S::ffn_norm_b: return &L.ffn_norm_b;
    case S::b_up: return &L.b_up;
    case S::b_down: return &L.b_down;
    case S::q_norm: return &L.q_norm;
    case S::k_norm: return &L.k_norm;
    case S::post_attn_norm: return &L.post_attn_norm;
    case S::post_ffn_norm: return &L.post_ffn_norm;
    default: return nullptr;
  }
}

namespace {
// The metadata of the architecture's table into c; then the keys whose meaning
// is not one field: defaults that depend on other keys, RoPE scaling, windows.
void read_config(const gguf::File& f, const arch::ArchInfo& a, ModelConfig& c) {
  const std::string p = std::string(a.name) + ".";
  for (const arch::KeySpec& k : a.keys) {
    const std::string key = p + k.key;
    if (k.i) c.*k.i = k.required ? f.get_int(key) : f.get_int_or(key, int64_t(k.fallback));
    if (k.f) c.*k.f = k.required ? f.get_f32(key) : f.get_f32_or(key, float(k.fallback));
  }
  if (c.n_head_kv == 0) c.n_head_kv = c.n_head;
  if (a.rope == arch::Rope::none) return;
  if (c.head_dim > 0 && f.get_int_or(p + "attention.value_length", c.head_dim) != c.head_dim)
    throw FormatError(f.path() + ": " + p + "attention.value_length differs from key_length (unsupported)");
  if (c.rope_dim == 0) c.rope_dim = c.d_head();
  // llama.cpp (llama-model.cpp): type "linear" unless stated; factor f gives freq_scale 1 / f
  // (0 or absent: 1); attn_factor multiplies cos and sin. yarn's ramp is not implemented.
  const std::string scaling(f.get_string_or(p + "rope.scaling.type", "linear"));
  if (scaling != "linear" && scaling != "none" && scaling != "longrope")
    throw FormatError(f.path() + ": " + p + "rope.scaling.type = '" + scaling +
                      "' is not supported (linear, none, longrope are)");
  const float factor = f.get_f32_or(p + "rope.scaling.factor", 0.0f);
  c.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  c.rope_attn_factor = f.get_f32_or(p + "rope.scaling.attn_factor", 1.0f);
  if (a.arch == Arch::gemma3) {
    if (f.has(p + "attention.sliding_window_pattern") &&
        f.get(p + "attention.sliding_window_pattern").type == gguf::ValueType::array)
      throw FormatError(f.path() + ": " + p + "attention.sliding_window_pattern as a per-layer array is not supported");
    c.swa_period = c.sliding_window > 0 ? f.get_int_or(p + "attention.sliding_window_pattern", 6) : 0;
    if (f.get_f32_or(p + "final_logit_softcapping", 0.0f) != 0.0f)
      throw FormatError(f.path() + ": " + p + "final_logit_softcapping is not supported");
  }
  if (a.arch == Arch::phi3 && f.find_tensor("rope_factors_long.weight"))
    c.rope_short_ctx = f.get_int_or(p + "rope.scaling.original_context_length", c.n_ctx);
}
}  // namespace

Model Model::from_gguf(const gguf::File& f) {
  Model m;
  ModelConfig& c = m.cfg_;
  const std::string name(f.get_string("general.architecture"));
  const arch::ArchInfo* a = arch::find(name);
  if (!a) throw FormatError(f.path() + ": general.architecture = '" + name + "' (supported: " + known_archs() + ")");
  c.arch = a->arch;
  read_config(f, *a, c);
  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  c.n_vocab = emb.ne[1];
  c.tied = f.find_tensor("output.weight") == nullptr;
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    throw FormatError(f.path() + ": unusable model hyperparameters: " + e.what());
  }
  auto& V = m.owned_->vecs;
  m.layers_.resize(size_t(c.n_layer));
  LayerWeights none;
  for (int64_t l = -1; l < c.n_layer; ++l) {  // -1: the global tensors
    LayerWeights& L = l < 0 ? none : m.layers_[size_t(l)];
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool fused = l >= 0 && f.find_tensor(b + "attn_qkv.weight");
    for (const arch::TensorSpec& t : a->tensors) {
      if (t.per_layer != (l >= 0)) continue;
      const std::string tn = t.per_layer ? b + t.name : t.name;
      const bool moe = c.n_expert > 0;
      if ((t.need == arch::Need::dense && moe) || (t.need == arch::Need::experts && !moe)) continue;
      const bool need = t.need == arch::Need::required || (t.need == arch::Need::unfused && !fused) ||
                        t.need == arch::Need::dense || t.need == arch::Need::experts;
      if (!need && !f.find_tensor(tn)) continue;
      const int64_t rows = arch::dim(c, t.rows);
      if (t.cols == arch::Dim::none) {
        *Slots::vec(m, L, t.slot) = vec(f, tn, rows, V);
      } else {
        const int64_t E = t.depth == arch::Dim::none ? 0 : arch::dim(c, t.depth);
        *Slots::mat(m, L, t.slot) = matrix(f, tn, arch::dim(c, t.cols), rows, E);
      }
    }
  }
  if (c.tied) m.output_ = m.tok_embd_;
  if (c.rope_short_ctx > 0) {  // long factors: checked for shape (llama.cpp reads them past the original context)
    std::vector<std::vector<float>> unused;
    vec(f, "rope_factors_long.weight", c.rope_dim / 2, unused);
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
  const arch::ArchInfo& a = arch::info(c.arch);
  const std::string p = std::string(a.name) + ".";
  w.set("general.architecture", Value::string(a.name));
  for (const arch::KeySpec& k : a.keys) {
    if (k.i && (k.required || c.*k.i != 0)) w.set(p + k.key, Value::of(uint32_t(c.*k.i)));
    if (k.f) w.set(p + k.key, Value::of(c.*k.f));
  }
  if (c.swa_period > 0) w.set(p + "attention.sliding_window_pattern", Value::of(uint32_t(c.swa_period)));
  if (c.rope_freq_scale != 1.0f) w.set(p + "rope.scaling.factor", Value::of(1.0f / c.rope_freq_scale));
  if (c.rope_attn_factor != 1.0f) w.set(p + "rope.scaling.attn_factor", Value::of(c.rope_attn_factor));
  LLMK_CHECK_ARG(c.rope_short_ctx == 0, "Model::add_to_gguf", "config.rope_short_ctx", c.rope_short_ctx,
                 "must be 0 (LongRoPE long factors are not written)");
  for (int64_t l = -1; l < c.n_layer; ++l) {
    const LayerWeights& L = l < 0 ? LayerWeights{} : layers_[size_t(l)];
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const arch::TensorSpec& t : a.tensors) {
      if (t.per_layer != (l >= 0)) continue;
      const std::string name = t.per_layer ? b + t.name : t.name;
      if (t.cols == arch::Dim::none) {
        const float* x = *Slots::vec(*this, L, t.slot);
        const int64_t n = arch::dim(c, t.rows);
        if (x) w.add_tensor(name, GgmlType::F32, {n}, {reinterpret_cast<const uint8_t*>(x), size_t(n) * 4});
        continue;
      }
      const WeightView& v = *Slots::mat(*this, L, t.slot);
      if (!v.data || (t.slot == arch::Slot::output && c.tied)) continue;
      LLMK_CHECK_ARG(v.row_bytes == wtype_row_bytes(v.type, v.cols), "Model::add_to_gguf", name, v.row_bytes,
                     "rows must be packed");
      const int64_t E = t.depth == arch::Dim::none ? 0 : arch::dim(c, t.depth);
      w.add_tensor(name, ggml_of(v.type),
                   E > 0 ? std::vector<int64_t>{v.cols, v.rows / E, E} : std::vector<int64_t>{v.cols, v.rows},
                   {static_cast<const uint8_t*>(v.data), size_t(v.rows * v.row_bytes)});
    }
  }
}

}  // namespace llmk
