// The capacity and roofline arithmetic of llmk/analyze.hpp. Byte counts go
// through 128-bit intermediates and are checked into int64; FLOP and byte
// counts of the intensity model are doubles (they feed ratios and times).
// docs/capacity.md derives each formula.
#include <algorithm>
#include <cmath>
#include <string>

#include "llmk/analyze.hpp"
#include "llmk/error.hpp"

namespace llmk::analyze {

namespace {
using i128 = __int128;

int64_t fit(i128 x, const char* fn, const char* arg, const std::string& value) {
  LLMK_CHECK_ARG(x >= 0 && x <= i128(INT64_MAX), fn, arg, value, "the byte count overflows a 64-bit integer");
  return int64_t(x);
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Rows x cols of the weight matrices of one layer (Q, K, V, O, FFN).
i128 layer_matmul_params(const ModelConfig& m) {
  const i128 h = m.hidden, q = i128(m.n_heads) * m.head_dim, kv = i128(m.n_kv_heads) * m.head_dim;
  return h * q + 2 * h * kv + q * h + (m.gated_ffn ? 3 : 2) * h * m.ffn;
}
}  // namespace

int64_t kv_head_bytes(int64_t head_dim, KvType t) {
  LLMK_CHECK_ARG(head_dim > 0, "analyze::kv_head_bytes", "head_dim", head_dim, "must be > 0");
  // kv_row_bytes computes in int64: no row of head_dim values may exceed 2^63 bytes.
  const Ratio r = kv_type_size(t);
  fit(i128(ceil_div(head_dim, r.den)) * r.num, "analyze::kv_head_bytes", "head_dim", std::to_string(head_dim));
  return kv_row_bytes(t, head_dim);
}

int64_t kv_bytes_per_token(const ModelConfig& m, KvType k, KvType v) {
  validate(m);
  const i128 per_head = i128(kv_head_bytes(m.head_dim, k)) + kv_head_bytes(m.head_dim, v);
  return fit(i128(m.n_layers) * m.n_kv_heads * per_head, "analyze::kv_bytes_per_token", "model", m.name);
}

int64_t kv_bytes(const ModelConfig& m, KvType k, KvType v, int64_t batch, int64_t context, int64_t block) {
  const char* fn = "analyze::kv_bytes";
  LLMK_CHECK_ARG(batch >= 1, fn, "batch", batch, "must be >= 1");
  LLMK_CHECK_ARG(context >= 0, fn, "context", context, "must be >= 0");
  LLMK_CHECK_ARG(block >= 1, fn, "block", block, "must be >= 1");
  const i128 tokens = i128(ceil_div(context, block)) * block;  // each sequence holds whole blocks
  const i128 bytes = i128(batch) * tokens * kv_bytes_per_token(m, k, v);
  return fit(bytes, fn, "batch x context", std::to_string(batch) + " x " + std::to_string(context));
}

int64_t weight_bytes(const ModelConfig& m, WeightType w) {
  validate(m);
  const Ratio r = weight_type_size(w);
  return fit((i128(m.params) * r.num + r.den - 1) / r.den, "analyze::weight_bytes", "params", std::to_string(m.params));
}

int64_t estimated_params(const ModelConfig& m) {
  validate(m);
  const i128 per_layer = layer_matmul_params(m) + 2 * i128(m.hidden);  // + two RMSNorm weight vectors
  const i128 embed = i128(m.vocab) * m.hidden * (m.tied_embeddings ? 1 : 2);
  return fit(m.n_layers * per_layer + embed + m.hidden, "analyze::estimated_params", "model", m.name);
}

int64_t matmul_params(const ModelConfig& m) {
  validate(m);
  return fit(m.n_layers * layer_matmul_params(m) + i128(m.vocab) * m.hidden, "analyze::matmul_params", "model", m.name);
}

Capacity capacity(const ModelConfig& m, const Device& d, KvType k, KvType v, WeightType w, int64_t batch,
                  int64_t context, const CapacityOptions& opt) {
  const char* fn = "analyze::capacity";
  LLMK_CHECK_ARG(batch >= 1, fn, "batch", batch, "must be >= 1");
  LLMK_CHECK_ARG(context >= 1, fn, "context", context, "must be >= 1");
  LLMK_CHECK_ARG(opt.block >= 1, fn, "block", opt.block, "must be >= 1");
  LLMK_CHECK_ARG(opt.reserve_fraction >= 0 && opt.reserve_fraction < 1, fn, "reserve_fraction", opt.reserve_fraction,
                 "must be in [0, 1)");
  LLMK_CHECK_ARG(d.memory_bytes > 0, fn, "device memory", d.memory_bytes, "must be > 0");
  Capacity c;
  c.memory = d.memory_bytes;
  c.reserve = std::llround(double(c.memory) * opt.reserve_fraction);
  c.weights = weight_bytes(m, w);
  c.kv_budget = c.memory - c.reserve - c.weights;  // all three < 2^63, so no overflow
  c.fits = c.kv_budget >= 0;
  c.block_bytes = fit(i128(opt.block) * kv_bytes_per_token(m, k, v), fn, "block", std::to_string(opt.block));
  c.blocks = c.fits ? c.kv_budget / c.block_bytes : 0;
  c.max_context = c.blocks / batch * opt.block;
  c.max_batch = c.blocks / ceil_div(context, opt.block);
  return c;
}

Work decode_attention(const ModelConfig& m, KvType k, KvType v, int64_t context, double act_bytes) {
  LLMK_CHECK_ARG(context >= 1, "analyze::decode_attention", "context", context, "must be >= 1");
  LLMK_CHECK_ARG(act_bytes > 0, "analyze::decode_attention", "act_bytes", act_bytes, "must be > 0");
  validate(m);
  const double L = double(context), d = double(m.head_dim);
  const double kv_row = double(kv_head_bytes(m.head_dim, k) + kv_head_bytes(m.head_dim, v));
  Work w;
  // Per query head: L scores of (QK 2d + scale, max, subtract, exp, sum: 5) and
  // PV 2d per score, then d divides to normalize.
  w.flops = double(m.n_layers) * double(m.n_heads) * (L * (4 * d + 5) + d);
  // Every cached K and V row once, q read and o written.
  w.bytes = double(m.n_layers) * (double(m.n_kv_heads) * L * kv_row + 2 * double(m.n_heads) * d * act_bytes);
  return w;
}

Work prefill_attention(const ModelConfig& m, KvType k, KvType v, int64_t prompt, double act_bytes) {
  LLMK_CHECK_ARG(prompt >= 1, "analyze::prefill_attention", "prompt", prompt, "must be >= 1");
  LLMK_CHECK_ARG(act_bytes > 0, "analyze::prefill_attention", "act_bytes", act_bytes, "must be > 0");
  validate(m);
  const double P = double(prompt), d = double(m.head_dim), scores = P * (P + 1) / 2;  // causal
  const double kv_row = double(kv_head_bytes(m.head_dim, k) + kv_head_bytes(m.head_dim, v));
  Work w;
  w.flops = double(m.n_layers) * double(m.n_heads) * (scores * (4 * d + 5) + P * d);
  w.bytes = double(m.n_layers) * (double(m.n_kv_heads) * P * kv_row + 2 * double(m.n_heads) * P * d * act_bytes);
  return w;
}

Work weight_matmuls(const ModelConfig& m, WeightType wt, int64_t tokens, double act_bytes) {
  LLMK_CHECK_ARG(tokens >= 1, "analyze::weight_matmuls", "tokens", tokens, "must be >= 1");
  LLMK_CHECK_ARG(act_bytes > 0, "analyze::weight_matmuls", "act_bytes", act_bytes, "must be > 0");
  validate(m);
  const double h = double(m.hidden), q = double(m.n_heads * m.head_dim), kv = double(m.n_kv_heads * m.head_dim);
  const double f = double(m.ffn), L = double(m.n_layers), T = double(tokens);
  // Sum over matrices of (inputs + outputs) per token: Q, K, V, O, FFN, then the LM head.
  const double io = L * ((h + q) + 2 * (h + kv) + (q + h) + (m.gated_ffn ? 3 : 2) * (h + f)) + (h + double(m.vocab));
  const double nk = double(matmul_params(m));
  Work w;
  w.flops = 2 * T * nk;
  w.bytes = nk * weight_type_size(wt).per_value() + T * io * act_bytes;
  return w;
}

double roofline_seconds(const Device& d, const Work& w) {
  return std::max(w.flops / (d.peak_tflops * 1e12), w.bytes / (d.bandwidth_gbps * 1e9));
}

}  // namespace llmk::analyze
