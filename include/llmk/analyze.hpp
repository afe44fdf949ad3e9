// Capacity analysis: how much KV cache a model needs, how much fits on a device
// after the weights, and where each part of a forward pass sits on the
// device's roofline. Pure arithmetic on a model's shape (ModelConfig) and a
// device's datasheet figures (Device); docs/capacity.md derives every formula.
//
// Conventions:
//  - Byte counts are exact 64-bit integers. A product that would not fit in
//    int64 throws InvalidArgument instead of wrapping.
//  - A storage type's size is a ratio: `num` bytes per `den` values
//    (int8 = 34 bytes per 32 values). One head's K or V vector of head_dim
//    values is a row of the KV cache (kv_row_bytes, llmk/kv_quant.hpp).
//  - FLOPs count a multiply-add as 2, and each compare, subtract, exp, add,
//    multiply or divide of the softmax as 1 (see docs/capacity.md).
//  - GB/s and TFLOP/s are decimal (1e9 B/s, 1e12 FLOP/s); device memory is the
//    datasheet's GB x 1e9 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llmk/ggml_quants.hpp"
#include "llmk/kv_quant.hpp"

namespace llmk {
struct ModelConfig;
}

namespace llmk::analyze {

// Bytes per `den` stored values.
struct Ratio {
  int64_t num, den;
  double per_value() const { return double(num) / double(den); }
};

// The storage types are the library's, sized and named by their traits tables:
// KvType (llmk/kv_quant.hpp) and WType (llmk/ggml_quants.hpp).
using llmk::KvType;
using WeightType = llmk::WType;
using llmk::kv_type_name;

Ratio kv_type_size(KvType t);          // group bytes / group values: f32 4/1, f16 and bf16 2/1, int8 34/32, int4 20/32
Ratio weight_type_size(WeightType t);  // block bytes / block values: f32 4/1, Q8_0 34/32, Q4_0 18/32, Q4_1 20/32, ...
const char* weight_type_name(WeightType t);  // wtype_traits(t).name
// Names are read case-insensitively; a KV type by either spelling of its table row (int8 or q8).
KvType parse_kv_type(std::string_view name);          // throws InvalidArgument naming the value
WeightType parse_weight_type(std::string_view name);  // one of weight_types(); throws InvalidArgument naming the value
const std::vector<KvType>& all_kv_types();            // every KvType, in table order
// The weight types a whole model is sized in (docs/capacity.md): f32, f16, bf16, q8_0,
// q4_0, q4_1. K-quant files (Q4_K_M, ...) mix types across tensors, so one size per
// parameter would misstate them.
const std::vector<WeightType>& weight_types();
std::string weight_type_choices();  // weight_types()' names, ", "-separated: "f32, f16, ..."

// A model's shape under the names docs/capacity.md uses: the fields of llmk::ModelConfig
// (llmk/model.hpp) that size the KV cache, the weights and the FLOPs, plus what a loaded
// config does not hold (a name and the published parameter count). shape_of() derives it.
struct ModelConfig {
  std::string name;
  int64_t n_layers = 0;
  int64_t hidden = 0;      // model width
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // K/V heads; divides n_heads (MHA: equal, GQA: fewer, MQA: 1)
  int64_t head_dim = 0;
  int64_t ffn = 0;  // FFN inner width
  int64_t vocab = 0;
  bool tied_embeddings = false;  // LM head shares the token embedding
  bool gated_ffn = true;         // SwiGLU (gate, up, down) rather than a 2-matrix MLP
  int64_t params = 0;            // published parameter count (what the weights hold)
  int64_t max_context = 0;       // trained context length, 0 when unknown
};

// The shape of a loaded model's config c (n_layers = n_layer, hidden = d_model, n_heads =
// n_head, n_kv_heads = n_head_kv, head_dim = d_head(), ffn = d_ff, vocab = n_vocab,
// tied_embeddings = tied, gated_ffn = arch_gated_ffn(arch), max_context = n_ctx).
ModelConfig shape_of(const llmk::ModelConfig& c, std::string name, int64_t params);

const std::vector<ModelConfig>& builtin_models();
ModelConfig find_model(std::string_view name);  // case-insensitive; throws listing the names
// A config as a JSON object with exactly the keys of ModelConfig (name and
// max_context optional). Unknown, duplicate, missing or ill-typed keys throw
// InvalidArgument naming the key and its value; `source` names the file.
ModelConfig parse_model_config(std::string_view json, std::string_view source);
ModelConfig load_model_config(const std::string& path);
void validate(const ModelConfig& m);  // positive sizes, n_kv_heads | n_heads

struct Device {
  std::string key;   // CLI name: "h100", "cpu", ...
  std::string name;  // "NVIDIA H100 SXM 80GB"
  int64_t memory_bytes = 0;
  double bandwidth_gbps = 0;  // peak (GPUs: datasheet) or measured (cpu: STREAM triad)
  double peak_tflops = 0;     // dense bf16/f16 tensor (GPUs) or measured f32 FMA (cpu)
  double fp32_tflops = 0;     // f32 FMA without tensor cores (GPUs: datasheet; cpu: = peak_tflops)
  std::string source;         // where the figures come from
};

const std::vector<Device>& builtin_devices();  // the GPUs
Device find_device(std::string_view key);      // throws listing the keys ("cpu" is not here)
// This machine: MemTotal from /proc/meminfo, the CPU model from /proc/cpuinfo,
// and the bandwidth and peak the caller measured or gave.
Device host_device(double bandwidth_gbps, double peak_tflops);
// f32 FMA throughput of this CPU with `threads` threads on the widest SIMD path
// allowed (llmk::simd_level()), in TFLOP/s: independent FMA chains in registers.
double measure_peak_tflops(int threads);
// Memory bandwidth of this machine in GB/s: the STREAM triad a[i] = b[i] + s * c[i] over
// three double arrays of total_bytes together, with `threads` threads, counting 3 * 8 bytes
// per element (STREAM's convention, no write-allocate); the median of 5 to 20 timed runs
// (at least 0.5 s). Throws InvalidArgument for threads < 1 or total_bytes < 24.
double measure_triad_gbps(int threads, size_t total_bytes = size_t(768) << 20);

// --- sizes ---------------------------------------------------------------
// Bytes of one head's K (or V) vector of head_dim values: the cache's row, kv_row_bytes(t, head_dim).
int64_t kv_head_bytes(int64_t head_dim, KvType t);
// K and V of one token over all layers and KV heads.
int64_t kv_bytes_per_token(const ModelConfig& m, KvType k, KvType v);
// KV bytes of `batch` sequences of `context` tokens in blocks of `block`
// tokens (each sequence holds ceil(context/block) blocks). Throws on overflow.
int64_t kv_bytes(const ModelConfig& m, KvType k, KvType v, int64_t batch, int64_t context, int64_t block);
int64_t weight_bytes(const ModelConfig& m, WeightType w);  // params * size, rounded up
// Parameters implied by the shape (attention, FFN, RMSNorm weights, embedding
// and LM head; no biases or position embeddings): a check on the shape.
int64_t estimated_params(const ModelConfig& m);
// Sum over weight matrices of rows*cols (every layer's Q,K,V,O and FFN, and the
// LM head): a token costs 2x this in matmul FLOPs.
int64_t matmul_params(const ModelConfig& m);

// --- capacity --------------------------------------------------------------
struct CapacityOptions {
  double reserve_fraction = 0.10;  // of device memory, held back for activations, workspace, CUDA context
  int64_t block = 16;              // KV block size in tokens (1 = contiguous, no rounding)
};

struct Capacity {
  int64_t memory = 0, reserve = 0, weights = 0;
  int64_t kv_budget = 0;    // memory - reserve - weights (negative: the weights do not fit)
  bool fits = false;        // weights + reserve <= memory
  int64_t block_bytes = 0;  // one block of KV for one sequence
  int64_t blocks = 0;       // blocks the budget holds
  int64_t max_context = 0;  // longest context (a multiple of block) for `batch` sequences
  int64_t max_batch = 0;    // most sequences of `context` tokens
};

Capacity capacity(const ModelConfig& m, const Device& d, KvType k, KvType v, WeightType w, int64_t batch,
                  int64_t context, const CapacityOptions& opt = {});

// --- arithmetic intensity ----------------------------------------------------
struct Work {
  double flops = 0, bytes = 0;
  double intensity() const { return flops / bytes; }  // FLOPs per byte
};

// One decode step of one sequence over `context` cached tokens (all layers):
// read K and V, read q, write o. `act_bytes` is the q/o element size.
Work decode_attention(const ModelConfig& m, KvType k, KvType v, int64_t context, double act_bytes);
// Causal prefill of a `prompt`-token sequence (all layers), with the minimum
// traffic: Q read once, K and V read once from the cache, O written once.
Work prefill_attention(const ModelConfig& m, KvType k, KvType v, int64_t prompt, double act_bytes);
// All weight matmuls for `tokens` tokens at once (decode batch or prefill
// tokens): each weight read once, each matrix reads its input and writes its output.
Work weight_matmuls(const ModelConfig& m, WeightType w, int64_t tokens, double act_bytes);

inline double ridge(const Device& d) { return d.peak_tflops * 1e12 / (d.bandwidth_gbps * 1e9); }
// The ridge of a kernel that computes in f32 on the vector units (CUDA cores),
// as a decode-attention kernel usually does.
inline double fp32_ridge(const Device& d) { return d.fp32_tflops * 1e12 / (d.bandwidth_gbps * 1e9); }
// Roofline: attainable FLOP/s = min(peak, intensity x bandwidth); time = max(flops/peak, bytes/bw).
double roofline_seconds(const Device& d, const Work& w);

}  // namespace llmk::analyze
