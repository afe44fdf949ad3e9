// The mixture-of-experts FFN of qwen3moe and Mixtral-style llama (model.hpp): routing by
// softmax_topk, then each expert's SwiGLU FFN over the tokens routed to it.
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/model.hpp"

namespace llmk::moe {

struct Scratch {
  std::vector<float> logits, probs, w;  // [T, E] router logits; [T, K] softmax_topk probs, routing weights
  std::vector<int32_t> idx;             // [T, K] experts of each token, best first
  std::vector<int64_t> start, slot;     // [E + 1] offsets, [T * K] (t * K + j) grouped by expert
  std::vector<float> xg, g, u, y;       // gathered rows [n, d], gate / up [n, F], expert outputs [T * K, d]
};

// idx[t, :] = the K largest of the E router logits of row t (descending, ties to the lower
// index: softmax_topk's order), w[t, j] = exp(l_j - l_0) / sum_i<K exp(l_i - l_0) (the softmax
// over the selected logits, in double, rounded once). Row t's result depends on row t alone.
void route(const float* logits, int64_t T, int64_t E, int64_t K, int32_t* idx, float* w, Scratch& s);

// out[t] = sum_{j<K} w[t, j] * W_down,e (SiLU(W_gate,e h_t) * W_up,e h_t), e = idx[t, j], summed
// in j order. Tokens are grouped by expert so each expert's weights stream once per call; the
// matmul's rows are summed alone (matmul.hpp), so out[t] does not depend on the other tokens.
// h, out: [T, d], not overlapping.
void ffn(const ModelConfig& c, const LayerWeights& L, const float* h, float* out, int64_t T, Scratch& s);

// The oracle (model_ref.cpp): one token's ffn in double, weights dequantized in double.
std::vector<double> ffn_ref(const ModelConfig& c, const LayerWeights& L, const std::vector<double>& h);

}  // namespace llmk::moe
