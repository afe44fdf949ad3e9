// The mixture-of-experts FFN (moe.hpp).
#include "model/moe.hpp"

#include <algorithm>
#include <cmath>

#include "llmk/parallel.hpp"
#include "llmk/topk.hpp"

namespace llmk::moe {
namespace {
// Rows [r0, r0 + n) of a stacked expert matrix.
WeightView rows_of(const WeightView& w, int64_t r0, int64_t n) {
  return WeightView{static_cast<const uint8_t*>(w.data) + r0 * w.row_bytes, w.type, n, w.cols, w.row_bytes};
}
}  // namespace

void route(const float* logits, int64_t T, int64_t E, int64_t K, int32_t* idx, float* w, Scratch& s) {
  s.probs.resize(size_t(T * K));
  softmax_topk(TensorView::matrix(logits, DType::f32, T, E), K, 1.0f, SoftmaxTopkOut{s.probs.data(), idx});
  // The weights from the selected logits themselves: softmax_topk's order is exact, and this
  // sum over K terms in rank order is the same for a row whatever rows share the call.
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    const int32_t* e = idx + t * K;
    double sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += std::exp(double(l[e[j]]) - double(l[e[0]]));
    for (int64_t j = 0; j < K; ++j) w[t * K + j] = float(std::exp(double(l[e[j]]) - double(l[e[0]])) / sum);
  }
}

void ffn(const ModelConfig& c, const LayerWeights& L, const float* h, float* out, int64_t T, Scratch& s) {
  const int64_t d = c.d_model, E = c.n_expert, K = c.n_expert_used, F = c.d_ff_expert();
  s.logits.resize(size_t(T * E));
  s.idx.resize(size_t(T * K));
  s.w.resize(size_t(T * K));
  matmul(h, d, L.gate_inp, s.logits.data(), E, T);
  route(s.logits.data(), T, E, K, s.idx.data(), s.w.data(), s);

  // Counting sort of the (token, rank) slots by expert, tokens ascending within an expert.
  s.start.assign(size_t(E + 1), 0);
  for (int64_t i = 0; i < T * K; ++i) ++s.start[size_t(s.idx[size_t(i)] + 1)];
  for (int64_t e = 0; e < E; ++e) s.start[size_t(e + 1)] += s.start[size_t(e)];
  s.slot.resize(size_t(T * K));
  {
    std::vector<int64_t> fill(s.start.begin(), s.start.end() - 1);
    for (int64_t i = 0; i < T * K; ++i) s.slot[size_t(fill[size_t(s.idx[size_t(i)])]++)] = i;
  }
  int64_t most = 0;
  for (int64_t e = 0; e < E; ++e) most = std::max(most, s.start[size_t(e + 1)] - s.start[size_t(e)]);
  s.xg.resize(size_t(most * d));
  s.g.resize(size_t(most * F));
  s.u.resize(size_t(most * F));
  s.y.resize(size_t(T * K * d));
  const int threads = num_threads();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = s.start[size_t(e)], n = s.start[size_t(e + 1)] - b;
    if (n == 0) continue;  // an expert no token chose is not read
    for (int64_t r = 0; r < n; ++r) std::copy_n(h + s.slot[size_t(b + r)] / K * d, d, s.xg.data() + r * d);
    float *g = s.g.data(), *u = s.u.data();
    matmul(s.xg.data(), d, rows_of(L.gate_exps, e * F, F), g, F, n);
    matmul(s.xg.data(), d, rows_of(L.up_exps, e * F, F), u, F, n);
    // SiLU(gate) * up, element by element (the dense FFN's expression)
#pragma omp parallel for num_threads(threads) schedule(static) if (n * F >= 4096)
    for (int64_t i = 0; i < n * F; ++i) u[i] *= g[i] / (1.0f + std::exp(-g[i]));
    // expert e's outputs straight into their (token, rank) rows of y: ldy = d, rows gathered below
    matmul(u, F, rows_of(L.down_exps, e * d, d), s.xg.data(), d, n);
    for (int64_t r = 0; r < n; ++r) std::copy_n(s.xg.data() + r * d, d, s.y.data() + s.slot[size_t(b + r)] * d);
  }
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * d;
    const float* y = s.y.data() + t * K * d;
    for (int64_t i = 0; i < d; ++i) o[i] = s.w[size_t(t * K)] * y[i];
    for (int64_t j = 1; j < K; ++j)
      for (int64_t i = 0; i < d; ++i) o[i] += s.w[size_t(t * K + j)] * y[j * d + i];
  }
}

}  // namespace llmk::moe
