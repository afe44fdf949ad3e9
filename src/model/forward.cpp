// Model::forward: one batch of tokens (any sequences, any positions) through
// the decoder. Activations are f32 [T, width] rows; the matmuls take all T rows
// at once; attention is one KvStore::attend call per layer over the whole batch,
// split by the store: DenseKv per (token, query head); the engine's PagedKv
// through attention_prefill, whose CPU items are (sequence, kv head, tile of 8
// query tokens, context chunks), decode tokens included: a token's attention
// does not depend on its batch (src/attention/attention.cpp).

#include <algorithm>
#include <cmath>

#include "llmk/error.hpp"
#include "llmk/norm.hpp"
#include "llmk/parallel.hpp"
#include "model/model_internal.hpp"

namespace llmk {
namespace {

// The rotation of position pos: cs[2i], cs[2i+1] = a cos, a sin of
// theta_i = pos * base^(-2i / rope_dim) * scale / div[i] for i < rope_dim / 2 (model.hpp; a =
// attn_factor, div = 1 when null), in double, rounded to f32 (computed once a token and
// used by every layer's q and k).
void rope_table(int64_t rope_dim, float base, int64_t pos, float* cs, const ModelConfig& c, const float* div) {
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const double theta = double(pos) * std::pow(double(base), -2.0 * double(i) / double(rope_dim)) *
                         double(c.rope_freq_scale) / (div ? double(div[i]) : 1.0);
    cs[2 * i] = float(std::cos(theta) * double(c.rope_attn_factor));
    cs[2 * i + 1] = float(std::sin(theta) * double(c.rope_attn_factor));
  }
}

// Rotates adjacent pairs (2i, 2i+1) of the first rope_dim values of each head
// by the angles of cs (rope_table; llama-arch GGUF's permuted Q/K).
void rope_row(float* x, int64_t heads, int64_t dh, int64_t rope_dim, const float* cs) {
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    for (int64_t h = 0; h < heads; ++h) {
      float* p = x + h * dh + 2 * i;
      const float a = p[0], b = p[1];
      p[0] = a * c - b * s;
      p[1] = a * s + b * c;
    }
  }
}

void add_bias(float* y, int64_t ld, const float* b, int64_t T, int64_t n) {
  if (!b) return;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < n; ++i) y[t * ld + i] += b[i];
}

// y[rows, d] = RMSNorm (llama) or LayerNorm (gpt2, with bias) of x[rows, d].
void normalize(bool layer, const float* x, const float* w, const float* b, float eps, int64_t rows, int64_t d, float* y,
               std::vector<float>& stats) {
  stats.resize(size_t(2 * rows));
  const auto X = TensorView::matrix(x, DType::f32, rows, d), Y = TensorView::matrix(y, DType::f32, rows, d);
  const auto W = TensorView::vector(w, DType::f32, d), R = TensorView::vector(stats.data(), DType::f32, rows);
  if (layer)
    layer_norm(X, W, TensorView::vector(b, DType::f32, d), eps, Y,
               TensorView::vector(stats.data() + rows, DType::f32, rows), R);
  else rms_norm(X, W, eps, Y, R);
}

float gelu(float x) {  // GPT-2's tanh approximation
  return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// NEOX RoPE (qwen2, qwen3, phi3, gemma3): rotates the pairs (i, i + rope_dim/2) of the first
// rope_dim values of each head by the angles of cs.
void rope_row_neox(float* x, int64_t heads, int64_t dh, int64_t rope_dim, const float* cs) {
  const int64_t half = rope_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      float* p = x + h * dh;
      const float a = p[i], b = p[i + half];
      p[i] = a * c - b * s;
      p[i + half] = a * s + b * c;
    }
}

// RMSNorm of each dh-value head of the rows x[rows, heads * dh] in place (tmp: scratch of the same size).
void head_norm(float* x, const float* w, float eps, int64_t rows, int64_t heads, int64_t dh, std::vector<float>& tmp,
               std::vector<float>& stats) {
  tmp.resize(size_t(rows * heads * dh));
  normalize(false, x, w, nullptr, eps, rows * heads, dh, tmp.data(), stats);
  std::copy(tmp.begin(), tmp.begin() + rows * heads * dh, x);
}

// A position at or past a limit the forward does not apply is refused, naming it.
void check_limit(const Batch& b, int64_t limit, const std::string& what) {
  for (size_t t = 0; t < b.pos.size() && limit > 0; ++t)
    LLMK_CHECK_ARG(b.pos[t] < limit, "Model::forward", "batch.pos[" + std::to_string(t) + "]", b.pos[t],
                   "must be < " + what);
}

}  // namespace

int64_t Model::forward(const Batch& b, KvStore& kv, float* logits) {
  const int64_t T = int64_t(b.tokens.size());
  const char* fn = "Model::forward";
  LLMK_CHECK_ARG(b.pos.size() == b.tokens.size(), fn, "batch.pos.size", b.pos.size(), "must equal batch.tokens.size");
  LLMK_CHECK_ARG(b.seq.size() == b.tokens.size(), fn, "batch.seq.size", b.seq.size(), "must equal batch.tokens.size");
  LLMK_CHECK_ARG(b.want.empty() || b.want.size() == b.tokens.size(), fn, "batch.want.size", b.want.size(),
                 "must be 0 or batch.tokens.size");
  const ModelConfig& c = cfg_;
  const bool gpt2 = c.arch == Arch::gpt2;
  for (int64_t t = 0; t < T; ++t) {
    LLMK_CHECK_ARG(b.tokens[t] >= 0 && b.tokens[t] < c.n_vocab, fn, "batch.tokens[" + std::to_string(t) + "]",
                   b.tokens[t], "must be in [0, n_vocab = " + std::to_string(c.n_vocab) + ")");
    LLMK_CHECK_ARG(b.pos[t] >= 0 && (!gpt2 || b.pos[t] < c.n_ctx), fn, "batch.pos[" + std::to_string(t) + "]", b.pos[t],
                   gpt2 ? "must be in [0, n_ctx)" : "must be >= 0");
    LLMK_CHECK_ARG(b.seq[t] >= 0, fn, "batch.seq[" + std::to_string(t) + "]", b.seq[t], "must be >= 0");
  }
  if (T == 0) return 0;
  const arch::ArchInfo& a = arch::info(c.arch);
  if (a.family == arch::Family::gemma3) return forward_gemma3(b, kv, logits);
  check_limit(b, c.sliding_window,
              "the sliding window (" + std::to_string(c.sliding_window) + "): llmk's attention does not apply it");
  check_limit(b, c.rope_short_ctx,
              "rope.scaling.original_context_length (" + std::to_string(c.rope_short_ctx) +
                  "): llmk applies the short LongRoPE factors only");
  const bool layer_norm = a.norm == arch::Norm::layer;
  const int64_t d = c.d_model, dh = c.d_head(), nh = c.n_head, nkv = c.n_head_kv, dq = nh * dh, dkv = c.d_kv();
  const bool moe = c.n_expert > 0;
  const int64_t ff = c.d_ff,
                ffw = a.ffn == arch::Ffn::swiglu && !moe && layers_[0].w_gate.data == nullptr ? 2 * ff : ff;
  Owned& s = *owned_;
  s.x.resize(size_t(T * d));
  s.h.resize(size_t(T * d));
  s.q.resize(size_t(T * dq));
  s.k.resize(size_t(T * dkv));
  s.v.resize(size_t(T * dkv));
  s.att.resize(size_t(T * dq));
  s.ff.resize(size_t(T * std::max(ffw, dq + 2 * dkv)));
  s.ff2.resize(size_t(T * ff));
  float *x = s.x.data(), *h = s.h.data();
  const int threads = num_threads();
  const bool par = T >= 4;

#pragma omp parallel for num_threads(threads) schedule(static) if (par)
  for (int64_t t = 0; t < T; ++t) {
    dequantize_row(tok_embd_, b.tokens[t], x + t * d);
    if (pos_embd_.data) {
      std::vector<float> p(static_cast<size_t>(d));
      dequantize_row(pos_embd_, b.pos[t], p.data());
      for (int64_t i = 0; i < d; ++i) x[t * d + i] += p[size_t(i)];
    }
  }

  std::vector<float>& rope = s.rope;  // [T, rope_dim]: each token's rotation, for every layer
  const int64_t rd = c.rope_dim;
  if (a.rope != arch::Rope::none) {
    rope.resize(size_t(T * rd));
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (int64_t t = 0; t < T; ++t) rope_table(rd, c.rope_base, b.pos[t], rope.data() + t * rd, c, rope_div_);
  }

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = layers_[size_t(l)];
    normalize(layer_norm, x, L.attn_norm, L.attn_norm_b, c.norm_eps, T, d, h, s.stats);
    // q [T, dq], k and v [T, dkv], contiguous (fused: split from one product)
    float *q = s.q.data(), *k = s.k.data(), *v = s.v.data();
    if (L.wqkv.data) {
      const int64_t w = dq + 2 * dkv;
      float* qkv = s.ff.data();  // [T, w]; ff is free until the MLP
      matmul(h, d, L.wqkv, qkv, w, T);
      add_bias(qkv, w, L.bqkv, T, w);
      for (int64_t t = 0; t < T; ++t) {
        std::copy_n(qkv + t * w, dq, q + t * dq);
        std::copy_n(qkv + t * w + dq, dkv, k + t * dkv);
        std::copy_n(qkv + t * w + dq + dkv, dkv, v + t * dkv);
      }
    } else {
      matmul(h, d, L.wq, q, dq, T);
      matmul(h, d, L.wk, k, dkv, T);
      matmul(h, d, L.wv, v, dkv, T);
    }
    add_bias(q, dq, L.bq, T, dq);
    add_bias(k, dkv, L.bk, T, dkv);
    add_bias(v, dkv, L.bv, T, dkv);
    if (a.qk_norm) {
      head_norm(q, L.q_norm, c.norm_eps, T, nh, dh, s.tmp, s.stats);
      head_norm(k, L.k_norm, c.norm_eps, T, nkv, dh, s.tmp, s.stats);
    }
    if (a.rope != arch::Rope::none) {
      const bool neox = a.rope == arch::Rope::neox;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
      for (int64_t t = 0; t < T; ++t) {
        const float* cs = rope.data() + t * rd;
        if (neox) {
          rope_row_neox(q + t * dq, nh, dh, rd, cs);
          rope_row_neox(k + t * dkv, nkv, dh, rd, cs);
        } else {
          rope_row(q + t * dq, nh, dh, rd, cs);
          rope_row(k + t * dkv, nkv, dh, rd, cs);
        }
      }
    }
    float* att = s.att.data();
    kv.store(l, b, k, v);
    kv.attend(l, b, q, att, 0);
    matmul(att, dq, L.wo, h, d, T);
    add_bias(h, d, L.bo, T, d);
    for (int64_t i = 0; i < T * d; ++i) x[i] += h[i];

    normalize(layer_norm, x, L.ffn_norm, L.ffn_norm_b, c.norm_eps, T, d, h, s.stats);
    if (moe) {
      s.tmp.resize(size_t(T * d));
      moe::ffn(c, L, h, s.tmp.data(), T, s.moe);
      for (int64_t i = 0; i < T * d; ++i) x[i] += s.tmp[size_t(i)];
      continue;
    }
    float *u = s.ff.data(), *g = s.ff2.data();
    matmul(h, d, L.w_up, u, ffw, T);
    if (a.ffn == arch::Ffn::gelu) {
      add_bias(u, ff, L.b_up, T, ff);
      for (int64_t i = 0; i < T * ff; ++i) u[i] = gelu(u[i]);
    } else if (ffw == ff) {
      matmul(h, d, L.w_gate, g, ff, T);
      // SiLU(gate) * up, element by element (the same bits on any thread)
#pragma omp parallel for num_threads(threads) schedule(static) if (T * ff >= 1024)
      for (int64_t i = 0; i < T * ff; ++i) u[i] *= g[i] / (1.0f + std::exp(-g[i]));
    } else {
      // fused rows gate | up: g[t, i] = SiLU(u[t, i]) * u[t, ff + i], then W_down reads g
#pragma omp parallel for num_threads(threads) schedule(static) if (T * ff >= 1024)
      for (int64_t i = 0; i < T * ff; ++i) {
        const float gi = u[i / ff * 2 * ff + i % ff], up = u[i / ff * 2 * ff + ff + i % ff];
        g[i] = up * (gi / (1.0f + std::exp(-gi)));
      }
      u = g;
    }
    matmul(u, ff, L.w_down, h, d, T);
    add_bias(h, d, L.b_down, T, d);
    for (int64_t i = 0; i < T * d; ++i) x[i] += h[i];
  }

  int64_t n = 0;  // gather the wanted rows into h, then norm and project them
  for (int64_t t = 0; t < T; ++t)
    if (b.want.empty() || b.want[t]) std::copy_n(x + t * d, d, h + n++ * d);
  if (n) {
    normalize(layer_norm, h, out_norm_, out_norm_b_, c.norm_eps, n, d, x, s.stats);
    matmul(x, d, output_, logits, c.n_vocab, n);
  }
  return n;
}

// The gemma3 family (model.hpp): the batch is checked by forward(). Per layer:
//   x += RMSNorm_post(Wo attn(RoPE(RMSNorm_q(Wq h)), RoPE(RMSNorm_k(Wk h)), Wv h)), h = RMSNorm(x)
//   x += RMSNorm_post(W_down (GELU_tanh(W_gate h) * W_up h)),                    h = RMSNorm(x)
int64_t Model::forward_gemma3(const Batch& b, KvStore& kv, float* logits) {
  const ModelConfig& c = cfg_;
  const int64_t T = int64_t(b.tokens.size());
  const int64_t d = c.d_model, dh = c.d_head(), nh = c.n_head, nkv = c.n_head_kv, dq = nh * dh, dkv = c.d_kv();
  const int64_t ff = c.d_ff;
  Owned& s = *owned_;
  s.x.resize(size_t(T * d));
  s.h.resize(size_t(T * d));
  s.q.resize(size_t(T * dq));
  s.k.resize(size_t(T * dkv));
  s.v.resize(size_t(T * dkv));
  s.att.resize(size_t(T * dq));
  s.tmp.resize(size_t(T * std::max(dq, d)));
  s.ff.resize(size_t(T * ff));
  s.ff2.resize(size_t(T * ff));
  float *x = s.x.data(), *h = s.h.data(), *tmp = s.tmp.data();
  const int threads = num_threads();
  const bool par = T >= 4;
  const float scale = float(std::sqrt(double(d)));  // embeddings * sqrt(d), rounded to f32 once

#pragma omp parallel for num_threads(threads) schedule(static) if (par)
  for (int64_t t = 0; t < T; ++t) {
    dequantize_row(tok_embd_, b.tokens[t], x + t * d);
    for (int64_t i = 0; i < d; ++i) x[t * d + i] *= scale;
  }
  s.rope.resize(size_t(T * dh));
  s.rope_local.resize(size_t(T * dh));
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
  for (int64_t t = 0; t < T; ++t) {
    rope_table(dh, c.rope_base, b.pos[t], s.rope.data() + t * dh, c, rope_div_);
    rope_table(dh, c.rope_base_local, b.pos[t], s.rope_local.data() + t * dh, c, rope_div_);
  }

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = layers_[size_t(l)];
    const float* cs = c.is_local(l) ? s.rope_local.data() : s.rope.data();
    normalize(false, x, L.attn_norm, nullptr, c.norm_eps, T, d, h, s.stats);
    float *q = s.q.data(), *k = s.k.data(), *v = s.v.data();
    matmul(h, d, L.wq, tmp, dq, T);
    normalize(false, tmp, L.q_norm, nullptr, c.norm_eps, T * nh, dh, q, s.stats);  // each head's row
    matmul(h, d, L.wk, tmp, dkv, T);
    normalize(false, tmp, L.k_norm, nullptr, c.norm_eps, T * nkv, dh, k, s.stats);
    matmul(h, d, L.wv, v, dkv, T);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (int64_t t = 0; t < T; ++t) {
      rope_row_neox(q + t * dq, nh, dh, dh, cs + t * dh);
      rope_row_neox(k + t * dkv, nkv, dh, dh, cs + t * dh);
    }
    float* att = s.att.data();
    kv.store(l, b, k, v);
    kv.attend(l, b, q, att, c.is_local(l) ? c.sliding_window : 0);  // softmax(q.k / sqrt(d_head)): gemma3's scale
    matmul(att, dq, L.wo, tmp, d, T);
    normalize(false, tmp, L.post_attn_norm, nullptr, c.norm_eps, T, d, h, s.stats);
    for (int64_t i = 0; i < T * d; ++i) x[i] += h[i];

    normalize(false, x, L.ffn_norm, nullptr, c.norm_eps, T, d, h, s.stats);
    float *u = s.ff.data(), *g = s.ff2.data();
    matmul(h, d, L.w_up, u, ff, T);
    matmul(h, d, L.w_gate, g, ff, T);
#pragma omp parallel for num_threads(threads) schedule(static) if (T * ff >= 1024)
    for (int64_t i = 0; i < T * ff; ++i) u[i] *= gelu(g[i]);
    matmul(u, ff, L.w_down, tmp, d, T);
    normalize(false, tmp, L.post_ffn_norm, nullptr, c.norm_eps, T, d, h, s.stats);
    for (int64_t i = 0; i < T * d; ++i) x[i] += h[i];
  }

  int64_t n = 0;
  for (int64_t t = 0; t < T; ++t)
    if (b.want.empty() || b.want[t]) std::copy_n(x + t * d, d, h + n++ * d);
  if (n) {
    normalize(false, h, out_norm_, nullptr, c.norm_eps, n, d, x, s.stats);
    matmul(x, d, output_, logits, c.n_vocab, n);
  }
  return n;
}

}  // namespace llmk
