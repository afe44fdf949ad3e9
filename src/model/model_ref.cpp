// forward_ref: the decoder's oracle. One sequence, positions 0..T-1, every
// activation in double, each weight row dequantized in double when used, K/V
// in a dense [layer, pos, d_kv] cache, attention written out in full.
#include <algorithm>
#include <cmath>

#include "llmk/error.hpp"
#include "llmk/model.hpp"
#include "model/arch.hpp"
#include "model/moe.hpp"

namespace llmk {
namespace {
using Vec = std::vector<double>;

Vec matvec(const WeightView& w, const Vec& x, const float* bias) {
  Vec y(size_t(w.rows)), row(size_t(w.cols));
  for (int64_t n = 0; n < w.rows; ++n) {
    dequantize_row_f64(w, n, row.data());
    double acc = bias ? bias[n] : 0.0;
    for (int64_t k = 0; k < w.cols; ++k) acc += row[size_t(k)] * x[size_t(k)];
    y[size_t(n)] = acc;
  }
  return y;
}

Vec norm(const Vec& x, const float* w, const float* b, bool layer_norm, double eps) {
  const double d = double(x.size());
  double mean = 0, var = 0;
  if (layer_norm)
    for (double v : x) mean += v / d;
  for (double v : x) var += (v - mean) * (v - mean) / d;
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * w[i] + (b ? b[i] : 0.0);
  return y;
}

// theta_i of position pos (model.hpp): pos * base^(-2i / rope_dim) * scale / div[i].
double angle(const ModelConfig& c, const float* div, double base, int64_t pos, int64_t i, int64_t rope_dim) {
  return double(pos) * std::pow(base, -2.0 * double(i) / double(rope_dim)) * c.rope_freq_scale / (div ? div[i] : 1.0);
}

// Rotates each head's pairs (i, i + rope_dim/2) (neox) or (2i, 2i+1), i < rope_dim / 2, by
// theta_i, cos and sin scaled by the attention factor.
void rope(double* x, int64_t heads, int64_t dh, int64_t rope_dim, bool neox, const ModelConfig& c, const float* div,
          double base, int64_t pos) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < rope_dim / 2; ++i) {
      const double th = angle(c, div, base, pos, i, rope_dim), af = c.rope_attn_factor;
      double* p = x + h * dh;
      const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + rope_dim / 2 : 2 * i + 1;
      const double a = p[i0], b = p[i1];
      p[i0] = af * (a * std::cos(th) - b * std::sin(th));
      p[i1] = af * (a * std::sin(th) + b * std::cos(th));
    }
}

// RMSNorm of each dh-value head of x (the q / k norm of qwen3 and gemma3).
void head_norm(Vec& x, int64_t dh, const float* w, double eps) {
  for (size_t h0 = 0; h0 < x.size(); h0 += size_t(dh)) {
    const Vec part(x.begin() + long(h0), x.begin() + long(h0) + dh);
    const Vec y = norm(part, w, nullptr, false, eps);
    std::copy(y.begin(), y.end(), x.begin() + long(h0));
  }
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }
double gelu_tanh(double e) { return 0.5 * e * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (e + 0.044715 * e * e * e))); }

// Rows [r0, r0 + n) of a stacked expert matrix.
WeightView rows_of(const WeightView& w, int64_t r0, int64_t n) {
  return WeightView{static_cast<const uint8_t*>(w.data) + r0 * w.row_bytes, w.type, n, w.cols, w.row_bytes};
}

}  // namespace

// The mixture of experts of h (model.hpp): the K largest router logits (ties to the lower
// index), weights softmax over them, each expert's SwiGLU FFN.
std::vector<double> moe::ffn_ref(const ModelConfig& c, const LayerWeights& L, const std::vector<double>& h) {
  const int64_t E = c.n_expert, K = c.n_expert_used, F = c.d_ff_expert(), d = c.d_model;
  const Vec l = matvec(L.gate_inp, h, nullptr);
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[size_t(a)] > l[size_t(b)]; });
  double sum = 0;
  for (int64_t j = 0; j < K; ++j) sum += std::exp(l[size_t(order[size_t(j)])] - l[size_t(order[0])]);
  Vec out(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < K; ++j) {
    const int64_t e = order[size_t(j)];
    const double w = std::exp(l[size_t(e)] - l[size_t(order[0])]) / sum;
    Vec u = matvec(rows_of(L.up_exps, e * F, F), h, nullptr);
    const Vec g = matvec(rows_of(L.gate_exps, e * F, F), h, nullptr);
    for (int64_t i = 0; i < F; ++i) u[size_t(i)] *= silu(g[size_t(i)]);
    const Vec y = matvec(rows_of(L.down_exps, e * d, d), u, nullptr);
    for (int64_t i = 0; i < d; ++i) out[size_t(i)] += w * y[size_t(i)];
  }
  return out;
}

std::vector<double> forward_ref(const Model& m, std::span<const int32_t> tokens) {
  const ModelConfig& c = m.cfg_;
  const arch::ArchInfo& a = arch::info(c.arch);
  const bool gemma3 = a.family == arch::Family::gemma3, layer_norm = a.norm == arch::Norm::layer;
  const int64_t T = int64_t(tokens.size()), d = c.d_model, dh = c.d_head(), nh = c.n_head, dkv = c.d_kv();
  const int64_t G = c.n_head / c.n_head_kv, dq = nh * dh;
  std::vector<Vec> kc(size_t(c.n_layer)), vc(size_t(c.n_layer));  // [layer][pos * dkv]
  Vec logits;
  for (int64_t t = 0; t < T; ++t) {
    LLMK_CHECK_ARG(tokens[t] >= 0 && tokens[t] < c.n_vocab, "forward_ref", "tokens[t]", tokens[t], "out of vocabulary");
    // gemma3 applies its window (below); the others' windows are read but not applied
    LLMK_CHECK_ARG((gemma3 || c.sliding_window == 0 || t < c.sliding_window) &&
                       (c.rope_short_ctx == 0 || t < c.rope_short_ctx),
                   "forward_ref", "tokens.size()", T, "must be <= the sliding window and the LongRoPE short context");
    Vec x(static_cast<size_t>(d));
    dequantize_row_f64(m.tok_embd_, tokens[t], x.data());
    if (gemma3)
      for (auto& e : x) e *= std::sqrt(double(d));
    if (m.pos_embd_.data) {
      Vec p(static_cast<size_t>(d));
      dequantize_row_f64(m.pos_embd_, t, p.data());
      for (int64_t i = 0; i < d; ++i) x[size_t(i)] += p[size_t(i)];
    }
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const LayerWeights& L = m.layers_[size_t(l)];
      const Vec h = norm(x, L.attn_norm, L.attn_norm_b, layer_norm, c.norm_eps);
      Vec q, k, v;
      if (L.wqkv.data) {
        const Vec qkv = matvec(L.wqkv, h, L.bqkv);
        q.assign(qkv.begin(), qkv.begin() + dq);
        k.assign(qkv.begin() + dq, qkv.begin() + dq + dkv);
        v.assign(qkv.begin() + dq + dkv, qkv.end());
      } else {
        q = matvec(L.wq, h, L.bq);
        k = matvec(L.wk, h, L.bk);
        v = matvec(L.wv, h, L.bv);
      }
      if (a.qk_norm) {
        head_norm(q, dh, L.q_norm, c.norm_eps);
        head_norm(k, dh, L.k_norm, c.norm_eps);
      }
      if (a.rope != arch::Rope::none) {
        const bool neox = a.rope == arch::Rope::neox;
        const double base = c.is_local(l) ? c.rope_base_local : c.rope_base;
        const int64_t rd = c.rope_dim > 0 ? c.rope_dim : dh;
        rope(q.data(), nh, dh, rd, neox, c, m.rope_div_, base, t);
        rope(k.data(), c.n_head_kv, dh, rd, neox, c, m.rope_div_, base, t);
      }
      auto& K = kc[size_t(l)];
      auto& V = vc[size_t(l)];
      K.insert(K.end(), k.begin(), k.end());
      V.insert(V.end(), v.begin(), v.end());
      Vec att(size_t(nh * dh), 0.0), p(size_t(t + 1));
      // gemma3's local layers see positions j with t - j < sliding_window (llama.cpp's rule)
      const int64_t j0 = gemma3 && c.is_local(l) && c.sliding_window > 0
                             ? std::max<int64_t>(0, t - c.sliding_window + 1)
                             : 0;
      for (int64_t hd = 0; hd < nh; ++hd) {
        const int64_t kvh = hd / G;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = j0; j <= t; ++j) {
          double sc = 0;
          for (int64_t i = 0; i < dh; ++i) sc += q[size_t(hd * dh + i)] * K[size_t(j * dkv + kvh * dh + i)];
          p[size_t(j)] = sc / std::sqrt(double(dh));
          mx = std::max(mx, p[size_t(j)]);
        }
        for (int64_t j = j0; j <= t; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
        for (int64_t j = j0; j <= t; ++j)
          for (int64_t i = 0; i < dh; ++i)
            att[size_t(hd * dh + i)] += p[size_t(j)] / sum * V[size_t(j * dkv + kvh * dh + i)];
      }
      Vec o = matvec(L.wo, att, L.bo);
      if (gemma3) o = norm(o, L.post_attn_norm, nullptr, false, c.norm_eps);
      for (int64_t i = 0; i < d; ++i) x[size_t(i)] += o[size_t(i)];
      const Vec h2 = norm(x, L.ffn_norm, L.ffn_norm_b, layer_norm, c.norm_eps);
      if (c.n_expert > 0) {
        const Vec y = moe::ffn_ref(c, L, h2);
        for (int64_t i = 0; i < d; ++i) x[size_t(i)] += y[size_t(i)];
        continue;
      }
      Vec u = matvec(L.w_up, h2, L.b_up);
      if (a.ffn == arch::Ffn::gelu) {
        for (auto& e : u) e = gelu_tanh(e);
      } else if (!L.w_gate.data) {  // fused rows gate | up
        const size_t n = u.size() / 2;
        for (size_t i = 0; i < n; ++i) u[i] = silu(u[i]) * u[n + i];
        u.resize(n);
      } else {
        const Vec g = matvec(L.w_gate, h2, nullptr);
        for (size_t i = 0; i < u.size(); ++i) u[i] *= a.ffn == arch::Ffn::swiglu ? silu(g[i]) : gelu_tanh(g[i]);
      }
      Vec dn = matvec(L.w_down, u, L.b_down);
      if (gemma3) dn = norm(dn, L.post_ffn_norm, nullptr, false, c.norm_eps);
      for (int64_t i = 0; i < d; ++i) x[size_t(i)] += dn[size_t(i)];
    }
    const Vec out = matvec(m.output_, norm(x, m.out_norm_, m.out_norm_b_, layer_norm, c.norm_eps), nullptr);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

}  // namespace llmk
