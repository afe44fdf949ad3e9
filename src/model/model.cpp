// Model construction (config checks, random models), the dense KV store, and
// accounting. GGUF loading is in model_gguf.cpp, the forward in forward.cpp.
#include <algorithm>
#include <cmath>
#include <random>

#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "llmk/dtype.hpp"
#include "llmk/ggml_quants.hpp"
#include "llmk/tensor.hpp"
#include "model/model_internal.hpp"

namespace llmk {

void ModelConfig::validate() const {
  const char* fn = "ModelConfig";
  LLMK_CHECK_ARG(n_vocab > 0, fn, "n_vocab", n_vocab, "must be > 0");
  LLMK_CHECK_ARG(n_ctx > 0, fn, "n_ctx", n_ctx, "must be > 0");
  LLMK_CHECK_ARG(n_layer > 0, fn, "n_layer", n_layer, "must be > 0");
  LLMK_CHECK_ARG(head_dim >= 0 && (arch != Arch::gpt2 || head_dim == 0), fn, "head_dim", head_dim,
                 "must be >= 0, and 0 (d_model / n_head) for gpt2");
  LLMK_CHECK_ARG(n_head > 0 && (head_dim > 0 || d_model % n_head == 0), fn, "n_head", n_head,
                 "must be > 0 and divide d_model (unless head_dim is set)");
  LLMK_CHECK_ARG(sliding_window >= 0 && swa_period >= 0 && (arch == Arch::gemma3 || swa_period == 0), fn, "swa_period",
                 swa_period, "must be >= 0, and 0 but for gemma3");
  LLMK_CHECK_ARG(rope_base_local > 0 && std::isfinite(rope_base_local), fn, "rope_base_local", rope_base_local,
                 "must be finite and > 0");
  LLMK_CHECK_ARG(n_head_kv > 0 && n_head % n_head_kv == 0, fn, "n_head_kv", n_head_kv, "must be > 0 and divide n_head");
  LLMK_CHECK_ARG(d_model > 0 && d_model % 32 == 0, fn, "d_model", d_model, "must be a positive multiple of 32");
  LLMK_CHECK_ARG(d_ff > 0 && d_ff % 32 == 0, fn, "d_ff", d_ff, "must be a positive multiple of 32");
  LLMK_CHECK_ARG(d_head() % 2 == 0, fn, "d_head", d_head(), "must be even");
  LLMK_CHECK_ARG(rope_dim >= 0 && rope_dim <= d_head() && rope_dim % 2 == 0, fn, "rope_dim", rope_dim,
                 "must be even and <= d_head");
  LLMK_CHECK_ARG(norm_eps > 0 && std::isfinite(norm_eps), fn, "norm_eps", norm_eps, "must be finite and > 0");
  LLMK_CHECK_ARG(rope_base > 0 && std::isfinite(rope_base), fn, "rope_base", rope_base, "must be finite and > 0");
  LLMK_CHECK_ARG(arch != Arch::gpt2 || n_head_kv == n_head, fn, "n_head_kv", n_head_kv, "must equal n_head for gpt2");
  LLMK_CHECK_ARG(arch != Arch::gemma3 || rope_dim == 0 || rope_dim == d_head(), fn, "rope_dim", rope_dim,
                 "must be d_head (or 0) for gemma3: NEOX RoPE over the whole head");
  LLMK_CHECK_ARG(rope_freq_scale > 0 && std::isfinite(rope_freq_scale), fn, "rope_freq_scale", rope_freq_scale,
                 "must be finite and > 0");
  LLMK_CHECK_ARG(rope_attn_factor > 0 && std::isfinite(rope_attn_factor), fn, "rope_attn_factor", rope_attn_factor,
                 "must be finite and > 0");
  LLMK_CHECK_ARG(rope_short_ctx >= 0, fn, "rope_short_ctx", rope_short_ctx, "must be >= 0");
  LLMK_CHECK_ARG(sliding_window == 0 || arch == Arch::gemma3 || arch == Arch::llama, fn, "sliding_window",
                 sliding_window, "must be 0 but for gemma3 and llama");
  LLMK_CHECK_ARG(n_expert >= 0 && (n_expert == 0 || arch == Arch::llama || arch == Arch::qwen3moe) &&
                     (n_expert > 0 || arch != Arch::qwen3moe),
                 fn, "n_expert", n_expert, "must be > 0 for qwen3moe, >= 0 for llama, 0 for the others");
  LLMK_CHECK_ARG(n_expert == 0 ? n_expert_used == 0 : n_expert_used >= 1 && n_expert_used <= n_expert, fn,
                 "n_expert_used", n_expert_used, "must be in [1, n_expert] with experts, else 0");
  LLMK_CHECK_ARG(d_ff_exp >= 0 && (d_ff_exp == 0 || n_expert > 0) && d_ff_expert() > 0 && d_ff_expert() % 32 == 0, fn,
                 "d_ff_exp", d_ff_exp,
                 "must be >= 0 (0 without experts) with an expert width a positive multiple of 32");
}

Model::Model() : owned_(std::make_unique<Owned>()) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {
// Random [N, K] weights of type t with standard deviation about `sd`:
// float types N(0, sd); Q8_0 / Q4_x random codes under per-block scales; the other
// block types N(0, sd) quantized by the traits table's reference quantizer.
WeightView random_weight(std::vector<std::vector<uint8_t>>& blobs, WType t, int64_t N, int64_t K, double sd,
                         std::mt19937_64& g) {
  const int64_t rb = wtype_row_bytes(t, K);
  auto& buf = blobs.emplace_back(size_t(N * rb));
  std::normal_distribution<float> nd(0.0f, float(sd));
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  std::uniform_int_distribution<int> byte(0, 255), q8(-127, 127);
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* r = buf.data() + n * rb;
    for (int64_t k = 0; k < K && !wtype_is_quantized(t); ++k) {
      if (t == WType::f32) reinterpret_cast<float*>(r)[k] = nd(g);
      if (t == WType::f16) reinterpret_cast<f16*>(r)[k] = from_f32<f16>(nd(g));
      if (t == WType::bf16) reinterpret_cast<bf16*>(r)[k] = from_f32<bf16>(nd(g));
    }
    const bool legacy = t == WType::q8_0 || t == WType::q4_0 || t == WType::q4_1;
    if (wtype_is_quantized(t) && !legacy) {  // the other block types: N(0, sd) through the reference quantizer
      std::vector<float> v(static_cast<size_t>(K));
      for (float& x : v) x = nd(g);
      wtype_traits(t).from_float(v.data(), r, K);
    }
    for (int64_t b = 0; b < K / kQuantBlock && legacy; ++b) {
      // uniform codes: sd of q8 codes is 127/sqrt(3), of nibbles 16/sqrt(12)
      if (t == WType::q8_0) {
        auto& q = reinterpret_cast<BlockQ8_0*>(r)[b];
        q.d = f32_to_f16_bits(float(sd * std::sqrt(3.0) / 127.0) * jitter(g));
        for (auto& c : q.qs) c = int8_t(q8(g));
      } else {
        const float d = float(sd * std::sqrt(12.0) / 16.0) * jitter(g);
        for (int j = 0; j < 16; ++j)
          (t == WType::q4_0 ? reinterpret_cast<BlockQ4_0*>(r)[b].qs
                            : reinterpret_cast<BlockQ4_1*>(r)[b].qs)[j] = uint8_t(byte(g));
        if (t == WType::q4_0) reinterpret_cast<BlockQ4_0*>(r)[b].d = f32_to_f16_bits(d);
        if (t == WType::q4_1) {
          reinterpret_cast<BlockQ4_1*>(r)[b].d = f32_to_f16_bits(d);
          reinterpret_cast<BlockQ4_1*>(r)[b].m = f32_to_f16_bits(-7.5f * d);
        }
      }
    }
  }
  return WeightView{buf.data(), t, N, K, rb};
}

const float* random_vec(std::vector<std::vector<float>>& vecs, int64_t n, float mean, float sd, std::mt19937_64& g) {
  auto& v = vecs.emplace_back(size_t(n));
  std::normal_distribution<float> nd(mean, sd);
  for (auto& x : v) x = nd(g);
  return v.data();
}
}  // namespace

Model Model::random(const ModelConfig& c, WType t, uint64_t seed) {
  c.validate();
  Model m;
  m.cfg_ = c;
  if (m.cfg_.rope_dim == 0 && arch::info(c.arch).rope != arch::Rope::none) m.cfg_.rope_dim = c.d_head();
  std::mt19937_64 g(seed);
  auto& B = m.owned_->blobs;
  auto& V = m.owned_->vecs;
  const int64_t d = c.d_model, dh = c.d_head(), dq = c.n_head * dh, dkv = c.d_kv();
  const bool gpt2 = c.arch == Arch::gpt2;
  const double sd_in = 1.0 / std::sqrt(double(d)), sd_ff = 1.0 / std::sqrt(double(c.d_ff));
  // embeddings ~ N(0, 1/d): tied logits then have unit scale, so sampling is not degenerate
  m.tok_embd_ = random_weight(B, t, c.n_vocab, d, sd_in, g);
  if (gpt2) m.pos_embd_ = random_weight(B, WType::f32, c.n_ctx, d, 0.5, g);
  m.output_ = c.tied ? m.tok_embd_ : random_weight(B, t, c.n_vocab, d, sd_in, g);
  m.out_norm_ = random_vec(V, d, 1.0f, 0.1f, g);
  if (gpt2) m.out_norm_b_ = random_vec(V, d, 0.0f, 0.1f, g);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights L;
    L.attn_norm = random_vec(V, d, 1.0f, 0.1f, g);
    L.ffn_norm = random_vec(V, d, 1.0f, 0.1f, g);
    if (gpt2) {
      L.attn_norm_b = random_vec(V, d, 0.0f, 0.1f, g);
      L.ffn_norm_b = random_vec(V, d, 0.0f, 0.1f, g);
      L.wqkv = random_weight(B, t, 3 * d, d, sd_in, g);
      L.bqkv = random_vec(V, 3 * d, 0.0f, 0.1f, g);
      L.bo = random_vec(V, d, 0.0f, 0.1f, g);
      L.b_up = random_vec(V, c.d_ff, 0.0f, 0.1f, g);
      L.b_down = random_vec(V, d, 0.0f, 0.1f, g);
    } else if (c.arch == Arch::phi3) {  // fused q | k | v and gate | up
      L.wqkv = random_weight(B, t, dq + 2 * dkv, d, sd_in, g);
    } else {
      if (c.arch == Arch::gemma3 || c.arch == Arch::qwen3 || c.arch == Arch::qwen3moe) {
        L.q_norm = random_vec(V, dh, 1.0f, 0.1f, g);
        L.k_norm = random_vec(V, dh, 1.0f, 0.1f, g);
      }
      if (c.arch == Arch::gemma3) {
        L.post_attn_norm = random_vec(V, d, 1.0f, 0.1f, g);
        L.post_ffn_norm = random_vec(V, d, 1.0f, 0.1f, g);
      }
      if (c.arch == Arch::qwen2) {
        L.bq = random_vec(V, dq, 0.0f, 0.5f, g);
        L.bk = random_vec(V, dkv, 0.0f, 0.5f, g);
        L.bv = random_vec(V, dkv, 0.0f, 0.5f, g);
      }
      L.wq = random_weight(B, t, dq, d, sd_in, g);
      L.wk = random_weight(B, t, dkv, d, sd_in, g);
      L.wv = random_weight(B, t, dkv, d, sd_in, g);
      if (c.n_expert == 0) L.w_gate = random_weight(B, t, c.d_ff, d, sd_in, g);
    }
    L.wo = random_weight(B, t, d, dq, 1.0 / std::sqrt(double(dq)), g);
    if (c.n_expert > 0) {  // the router in f32 (llama.cpp's quantizer leaves ffn_gate_inp unquantized)
      const int64_t E = c.n_expert, F = c.d_ff_expert();
      L.gate_inp = random_weight(B, WType::f32, E, d, sd_in, g);
      L.gate_exps = random_weight(B, t, E * F, d, sd_in, g);
      L.up_exps = random_weight(B, t, E * F, d, sd_in, g);
      L.down_exps = random_weight(B, t, E * d, F, 1.0 / std::sqrt(double(F)), g);
    } else {
      L.w_up = random_weight(B, t, c.arch == Arch::phi3 ? 2 * c.d_ff : c.d_ff, d, sd_in, g);
      L.w_down = random_weight(B, t, d, c.d_ff, sd_ff, g);
    }
    m.layers_.push_back(L);
  }
  if (c.arch == Arch::phi3) {  // LongRoPE-like frequency divisors in [1, 4)
    auto& div = V.emplace_back(size_t(m.cfg_.rope_dim / 2));
    std::uniform_real_distribution<float> u(1.0f, 4.0f);
    for (float& x : div) x = u(g);
    m.rope_div_ = div.data();
  }
  return m;
}

const LayerWeights& Model::layer(int64_t i) const {
  LLMK_CHECK_ARG(i >= 0 && i < int64_t(layers_.size()), "Model::layer", "i", i,
                 "must be in [0, n_layer = " + std::to_string(layers_.size()) + ")");
  return layers_[size_t(i)];
}

int64_t Model::weight_bytes() const {
  int64_t n = tok_embd_.rows * tok_embd_.row_bytes;
  if (output_.data != tok_embd_.data) n += output_.rows * output_.row_bytes;
  for (const auto& L : layers_)
    for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wqkv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.gate_inp,
                                &L.gate_exps, &L.up_exps, &L.down_exps})
      n += w->rows * w->row_bytes;
  return n;
}

int64_t Model::token_weight_bytes() const {
  int64_t n = weight_bytes();
  if (cfg_.n_expert == 0) return n;
  for (const auto& L : layers_)
    for (const WeightView* w : {&L.gate_exps, &L.up_exps, &L.down_exps})
      n -= w->rows * w->row_bytes / cfg_.n_expert * (cfg_.n_expert - cfg_.n_expert_used);
  return n;
}

namespace {
// The config is checked before DenseKv's members are computed from it: d_kv()
// and the query group divide by its head counts.
const ModelConfig& validated(const ModelConfig& c) {
  c.validate();
  return c;
}
}  // namespace

DenseKv::DenseKv(const ModelConfig& c, int32_t max_seqs, int64_t max_pos)
    : layers_(validated(c).n_layer),
      seqs_(max_seqs),
      max_pos_(max_pos),
      dkv_(c.d_kv()),
      dh_(c.d_head()),
      nh_(c.n_head),
      group_(c.n_head / c.n_head_kv) {
  LLMK_CHECK_ARG(max_seqs > 0, "DenseKv", "max_seqs", max_seqs, "must be > 0");
  LLMK_CHECK_ARG(max_pos > 0, "DenseKv", "max_pos", max_pos, "must be > 0");
  // A byte count that wraps would allocate a few floats and let store() write past them.
  int64_t bytes = 0;
  const bool overflow = __builtin_mul_overflow(layers_, seqs_, &bytes) ||
                        __builtin_mul_overflow(bytes, max_pos_, &bytes) ||
                        __builtin_mul_overflow(bytes, dkv_, &bytes) ||
                        __builtin_mul_overflow(bytes, int64_t(2 * sizeof(float)), &bytes);
  LLMK_CHECK_ARG(!overflow, "DenseKv", "n_layer x max_seqs x max_pos x d_kv",
                 std::to_string(layers_) + " x " + std::to_string(seqs_) + " x " + std::to_string(max_pos_) + " x " +
                     std::to_string(dkv_),
                 "the cache's bytes (K and V, f32) overflow a 64-bit integer");
  data_.assign(size_t(bytes) / sizeof(float), 0.0f);
}

// Every token's row, checked before store() writes or attend() reads any of
// them, so a refused call changes nothing.
void DenseKv::check(const char* fn, int64_t layer, const Batch& b) const {
  LLMK_CHECK_ARG(layer >= 0 && layer < layers_, fn, "layer", layer, "must be in [0, " + std::to_string(layers_) + ")");
  LLMK_CHECK_ARG(b.pos.size() == b.tokens.size(), fn, "batch.pos.size", b.pos.size(), "must equal batch.tokens.size");
  LLMK_CHECK_ARG(b.seq.size() == b.tokens.size(), fn, "batch.seq.size", b.seq.size(), "must equal batch.tokens.size");
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    LLMK_CHECK_ARG(b.seq[t] >= 0 && b.seq[t] < seqs_, fn, "batch.seq[" + std::to_string(t) + "]", b.seq[t],
                   "must be in [0, max_seqs = " + std::to_string(seqs_) + ")");
    LLMK_CHECK_ARG(b.pos[t] >= 0 && b.pos[t] < max_pos_, fn, "batch.pos[" + std::to_string(t) + "]", b.pos[t],
                   "must be in [0, max_pos = " + std::to_string(max_pos_) + ")");
  }
}

void DenseKv::store(int64_t layer, const Batch& b, const float* k, const float* v) {
  check("DenseKv::store", layer, b);
  LLMK_CHECK_ARG(b.tokens.empty() || (k && v), "DenseKv::store", "k/v", "null", "must not be null");
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    float* r = row(layer, b.seq[t], b.pos[t]);
    std::copy_n(k + t * dkv_, dkv_, r);
    std::copy_n(v + t * dkv_, dkv_, r + dkv_);
  }
}

void DenseKv::attend(int64_t layer, const Batch& b, const float* q, float* out, int64_t window) {
  const char* fn = "DenseKv::attend";
  check(fn, layer, b);
  LLMK_CHECK_ARG(window >= 0, fn, "window", window, "must be >= 0 (0: no window)");
  const int64_t T = int64_t(b.tokens.size());
  LLMK_CHECK_ARG(T == 0 || (q && out), fn, "q/out", "null", "must not be null");
  LLMK_CHECK_ARG(!ranges_overlap(out, T * nh_ * dh_ * 4, q, T * nh_ * dh_ * 4), fn, "out", out, "must not overlap q");
  const float scale = 1.0f / std::sqrt(float(dh_));
#pragma omp parallel for num_threads(num_threads()) schedule(static) collapse(2)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nh_; ++h) {
      const int64_t lo = window ? std::max<int64_t>(0, b.pos[t] - window + 1) : 0, n = b.pos[t] + 1 - lo;
      const int64_t kvh = h / group_;
      const float* qh = q + (t * nh_ + h) * dh_;
      std::vector<float> p(static_cast<size_t>(n));
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const float* kr = row(layer, b.seq[t], lo + j) + kvh * dh_;
        float s = 0;
        for (int64_t i = 0; i < dh_; ++i) s += qh[i] * kr[i];
        p[size_t(j)] = s * scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      float sum = 0;
      for (auto& e : p) sum += (e = std::exp(e - mx));
      float* o = out + (t * nh_ + h) * dh_;
      std::fill_n(o, dh_, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float* vr = row(layer, b.seq[t], lo + j) + dkv_ + kvh * dh_;
        const float w = p[size_t(j)] / sum;
        for (int64_t i = 0; i < dh_; ++i) o[i] += w * vr[i];
      }
    }
}

}  // namespace llmk
