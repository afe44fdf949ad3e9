// Decoder-only transformers on weights kept in their stored type. The families
// (general.architecture; llmk::known_archs() lists them):
// - llama (Llama 2/3, SmolLM2, Mistral): RMSNorm, RoPE on adjacent pairs as in
//   llama-arch GGUF, GQA, SwiGLU, optional tied embeddings and q/k/v biases,
//   Llama 3's per-frequency RoPE divisors (rope_freqs.weight);
// - qwen2: llama with q/k/v biases and NEOX RoPE (pairs i, i + d_rot/2);
// - qwen3: qwen2 without biases, with RMSNorm on each head's q and k;
// - phi3: NEOX RoPE, fused QKV (attn_qkv) and fused gate|up (ffn_up) matrices,
//   LongRoPE divisors (rope_factors_short) and attention factor;
// - gpt2: LayerNorm, learned positions, fused QKV with biases, GELU MLP;
// - gemma3: embeddings scaled by sqrt(d), RMSNorm before and after attention and
//   the FFN, q/k head norms, NEOX RoPE with a local base on the sliding-window
//   layers and a global one on the others, GeGLU with the tanh GELU, tied output;
// - qwen3moe (Qwen3-30B-A3B, 235B-A22B): qwen3 whose FFN is a mixture of experts;
//   llama with expert_count > 0 (Mixtral) likewise. Mixture of experts: the router
//   (ffn_gate_inp) gives n_expert logits l; the token's n_expert_used experts are the
//   largest l (ties to the lower index, softmax_topk's order), weighted by the softmax
//   over the selected logits (= the full softmax's top-k renormalised, llama.cpp's
//   norm_w); each expert is a SwiGLU FFN of width d_ff_expert().
// Every RoPE family rotates by theta_i = pos * scale * base^(-2i / d_rot) / f_i
// (f: the file's divisors, 1 without; scale: 1 / rope.scaling.factor for linear
// scaling) and multiplies cos and sin by rope.scaling.attn_factor.
// Sliding windows are not applied: forward() refuses a position at or past one
// (attention would still see the positions before the window).
//
// A Model views its weights (mmap'd GGUF, or buffers of a random model it owns)
// and runs forward() on a Batch: any tokens of any sequences, each with its own
// position, so prompts of different lengths prefill together and decode steps
// of many sequences run as one batch. K/V live in a KvStore the caller owns:
// the model writes each token's K/V rows there, then every token attends to
// positions [0, pos] of its own sequence (the causal mask). All matmuls see the
// whole batch (M = tokens), so each weight is read once per forward.
// A token's logits never depend on what it is batched with (see matmul.hpp).
//
// forward_ref() is the oracle: one sequence, every activation in double, each
// weight dequantized on the fly in double, a dense llama2.c-style cache.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "llmk/matmul.hpp"

namespace llmk {
namespace gguf {
class File;
class Writer;
}  // namespace gguf

enum class Arch : uint8_t { llama, gpt2, gemma3, qwen2, qwen3, phi3, qwen3moe };
const char* arch_name(Arch a);  // general.architecture's value, e.g. "qwen2"
bool arch_gated_ffn(Arch a);    // the FFN has gate, up and down matrices (not gpt2's 2-matrix MLP)
std::string known_archs();      // "llama, gpt2, ...": the values from_gguf takes

struct ModelConfig {
  Arch arch = Arch::llama;
  int64_t n_vocab = 0, n_ctx = 0;  // vocabulary; trained context (learned positions: table rows)
  int64_t d_model = 0, n_layer = 0, n_head = 0, n_head_kv = 0, d_ff = 0;
  int64_t rope_dim = 0;  // llama: rotated dims per head (0 = d_head)
  float norm_eps = 1e-5f, rope_base = 10000.0f;
  bool tied = true;      // output projection = token embedding
  int64_t head_dim = 0;  // values per head; 0: d_model / n_head
  // gemma3: layer l is a sliding-window layer when swa_period > 0 and l % swa_period <
  // swa_period - 1; those rotate with rope_base_local and see sliding_window positions.
  // llama (Mistral): every layer's window when sliding_window > 0.
  int64_t sliding_window = 0, swa_period = 0;
  float rope_base_local = 10000.0f;
  // RoPE scaling (rope.scaling.*): theta *= rope_freq_scale; cos, sin *= rope_attn_factor.
  float rope_freq_scale = 1.0f, rope_attn_factor = 1.0f;
  // phi3 with LongRoPE factors: llmk applies the short ones, which hold below the original
  // context; forward() refuses positions at or past it (0: no limit).
  int64_t rope_short_ctx = 0;
  // Mixture of experts (qwen3moe; llama when n_expert > 0): experts per layer, experts per
  // token, and each expert's FFN width d_ff_exp (qwen3moe's expert_feed_forward_length; 0:
  // llama.cpp's default, d_ff for llama, d_ff / n_expert_used for qwen3moe).
  int64_t n_expert = 0, n_expert_used = 0, d_ff_exp = 0;
  int64_t d_ff_expert() const {
    return d_ff_exp > 0 ? d_ff_exp : arch == Arch::qwen3moe && n_expert_used > 0 ? d_ff / n_expert_used : d_ff;
  }
  int64_t d_head() const { return head_dim > 0 ? head_dim : d_model / n_head; }
  bool is_local(int64_t l) const { return swa_period > 0 && l % swa_period < swa_period - 1; }
  int64_t d_kv() const { return n_head_kv * d_head(); }  // K (or V) values per token per layer
  void validate() const;                                 // InvalidArgument naming the field
};

struct LayerWeights {
  const float* attn_norm = nullptr;                         // [d_model]
  const float* attn_norm_b = nullptr;                       // [d_model] (gpt2)
  WeightView wq, wk, wv;                                    // llama: [n_head*dh, d], [n_kv*dh, d], [n_kv*dh, d]
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // optional
  WeightView wqkv;                                          // gpt2, phi3: [dq + 2 dkv, d] rows q | k | v
  const float* bqkv = nullptr;                              // [dq + 2 dkv]
  WeightView wo;                                            // [d, n_head*dh]
  const float* bo = nullptr;                                // [d] (gpt2)
  const float* ffn_norm = nullptr;                          // [d]
  const float* ffn_norm_b = nullptr;                        // [d] (gpt2)
  WeightView w_gate, w_up, w_down;                          // [d_ff, d] (gate: llama, gemma3), [d_ff, d], [d, d_ff]
                                                            // phi3: no gate, w_up [2 d_ff, d] rows gate | up
  const float *b_up = nullptr, *b_down = nullptr;           // [d_ff], [d] (gpt2)
  const float *q_norm = nullptr, *k_norm = nullptr;         // [d_head] (gemma3, qwen3)
  const float *post_attn_norm = nullptr, *post_ffn_norm = nullptr;  // [d] (gemma3)
  // Mixture of experts (n_expert E > 0, expert width F = d_ff_expert()): the router, and the
  // experts' matrices stacked expert by expert (GGUF's 3-D [E, rows, cols] tensors viewed as
  // one matrix: expert e's rows start at row e * rows). w_gate / w_up / w_down are then unused.
  WeightView gate_inp;                       // [E, d]
  WeightView gate_exps, up_exps, down_exps;  // [E * F, d], [E * F, d], [E * d, F]
};

struct Batch {
  std::span<const int32_t> tokens;  // [T]
  std::span<const int64_t> pos;     // [T] position of each token in its sequence
  std::span<const int32_t> seq;     // [T] sequence id in the KvStore
  std::span<const uint8_t> want;    // [T] 1 = return this token's logits; empty = all
};

// Where K and V live. Rows are f32 at this interface; the store may keep them
// in any format (the paged quantized cache does). Per layer, the model calls
// store() with every batch token's K/V, then attend(), so a token sees the
// tokens of its own sequence that precede it in the same batch.
class KvStore {
 public:
  virtual ~KvStore() = default;
  // k, v: [T, d_kv], row t = token t of the batch (heads concatenated).
  virtual void store(int64_t layer, const Batch& b, const float* k, const float* v) = 0;
  // out[t, h] = softmax_j(q[t, h] . K[j, h / G] / sqrt(d_head)) V[j, h / G] over
  // positions j in [0, pos[t]] of seq[t], and with window > 0 only those with
  // pos[t] - j < window (AttentionOptions::window); q, out: [T, n_head * d_head].
  virtual void attend(int64_t layer, const Batch& b, const float* q, float* out, int64_t window) = 0;
};

// A dense f32 cache [layer, seq, pos, 2, d_kv] (llama2.c's): the simplest
// correct store, the oracle of the paged one. Any batch order works. store()
// and attend() take layers in [0, n_layer), batch.seq in [0, max_seqs) and
// batch.pos in [0, max_pos); they check the whole batch before writing anything.
class DenseKv final : public KvStore {
 public:
  DenseKv(const ModelConfig& c, int32_t max_seqs, int64_t max_pos);  // c must pass c.validate()
  void store(int64_t layer, const Batch& b, const float* k, const float* v) override;
  void attend(int64_t layer, const Batch& b, const float* q, float* out, int64_t window) override;

 private:
  void check(const char* fn, int64_t layer, const Batch& b) const;
  float* row(int64_t layer, int32_t seq, int64_t pos) {
    return data_.data() + ((layer * seqs_ + seq) * max_pos_ + pos) * 2 * dkv_;
  }
  int64_t layers_, seqs_, max_pos_, dkv_, dh_, nh_, group_;
  std::vector<float> data_;
};

class Model {
 public:
  // Views the tensors of an open GGUF file (which must outlive the model).
  // FormatError / InvalidArgument naming the key or tensor when unusable.
  static Model from_gguf(const gguf::File& f);
  // A random model of the given config, weights of type `t` owned by the
  // model (quantized types: random codes and scales), for tests and benches.
  static Model random(const ModelConfig& c, WType t, uint64_t seed);

  // Adds this model's metadata and tensors (GGUF names, ggml order) to a
  // writer, so tests can write a tiny model file (tests/model/test_forward.cpp).
  void add_to_gguf(gguf::Writer& w) const;

  const ModelConfig& config() const { return cfg_; }
  const LayerWeights& layer(int64_t i) const;  // i in [0, n_layer)
  // Logits of the tokens with want = 1, in batch order: logits [n_want, n_vocab].
  // Returns n_want. Positions must be < n_ctx for learned positions. Uses
  // scratch owned by the model: one forward() at a time per Model.
  int64_t forward(const Batch& b, KvStore& kv, float* logits);
  // Bytes of weights read per forward (every matrix once) and stored in total.
  int64_t weight_bytes() const;
  // Bytes of weights one token reads: weight_bytes() but, in a mixture of experts, only
  // n_expert_used of each layer's n_expert experts (a decode step of batch 1).
  int64_t token_weight_bytes() const;

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

 private:
  Model();
  int64_t forward_gemma3(const Batch& b, KvStore& kv, float* logits);
  ModelConfig cfg_;
  WeightView tok_embd_, pos_embd_, output_;  // [V, d], [n_ctx, d] (gpt2), [V, d] (= tok_embd_ when tied)
  const float *out_norm_ = nullptr, *out_norm_b_ = nullptr;  // [d]
  const float* rope_div_ = nullptr;  // [rope_dim / 2] RoPE frequency divisors (rope_freqs / rope_factors_short)
  std::vector<LayerWeights> layers_;
  struct Owned;
  struct Slots;                   // the architecture table's slots -> these members (model_internal.hpp)
  std::unique_ptr<Owned> owned_;  // random weights, converted norm vectors, scratch
  friend std::vector<double> forward_ref(const Model& m, std::span<const int32_t> tokens);
};

// The oracle: logits [T, n_vocab] of one sequence `tokens` at positions 0..T-1.
std::vector<double> forward_ref(const Model& m, std::span<const int32_t> tokens);

}  // namespace llmk
