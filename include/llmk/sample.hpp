// Token sampling on top of softmax_topk, for the engine's decode step.
//
// Per row b of f32 logits [B, V], with that row's SamplingParams:
//  1. penalties over the row's token history (each distinct token once):
//     repetition (CTRL / Hugging Face): z = z > 0 ? z / r : z * r, then
//     presence (OpenAI): z -= presence_penalty (f32, in that order, no FMA);
//  2. greedy (argmax, ties to the lower index) when temperature == 0 or
//     top_k == 1;
//  3. top-k is on when 0 < top_k < V. If top-k, top-p and min-p are all off,
//     p = softmax(z / T) and one token is drawn by inverse CDF over the whole
//     row in index order (accumulated in kSampleFullChunks chunks, see
//     src/sample/sample_math.hpp). Otherwise the K most probable tokens come
//     from softmax_topk (sorted, probabilities normalized over the whole row)
//     with K = top_k when top-k is on, else K = min(kSampleTopkCap, V); top-k
//     renormalizes over its K; top-p keeps the shortest prefix whose mass
//     reaches top_p; min-p keeps tokens with q >= min_p * q_max; the kept
//     tokens are renormalized and one is drawn by inverse CDF in that order.
//     The cap: with top-k off, top-p and min-p only see the 1024 most probable
//     tokens. The result is exact whenever the kept set has fewer than 1024
//     tokens (the usual case: top_p <= 0.95 on a trained model's logits); when
//     the top-1024 mass is below top_p, or more than 1024 tokens pass the
//     min-p floor, the kept set is those 1024 (renormalized). CPU and GPU
//     apply the same rule.
// The draw for (seed, step, row) uses u = uniform01(seed, step, row): Philox4x32-10
// (Salmon et al. 2011) with counter (step, row) and key seed, a pure function
// callable from host and device code. The selection from the sorted candidates
// is one __host__ __device__ function used by both sample() and sample_cuda(),
// so for the same candidates and u both pick the same token (see
// docs/softmax_topk.md, "The sampler on the GPU", for what can still differ).
// CPU: rows whose softmax is undefined (a NaN or +inf logit, or all -inf after
// penalties) throw llmk::InvalidArgument naming the row. CUDA: such rows get
// token kSampleRowUndefined, rows whose device history is malformed get
// kSampleBadHistory (a kernel cannot throw; the host checks nothing on the
// device, so the step never waits for the GPU).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "llmk/cuda.hpp"
#include "llmk/tensor.hpp"
#include "llmk/topk.hpp"

namespace llmk {

struct SamplingParams {
  float temperature = 1.0f;         // >= 0; 0 = greedy
  int32_t top_k = 0;                // >= 0; 0 = off, 1 = greedy
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1); 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float presence_penalty = 0.0f;    // finite; 0 = off
};

// Throws llmk::InvalidArgument naming `fn`, the field (with `at` appended, e.g. " (row 3)")
// and its value when a field of p is outside the range given above, or when log2(e)/T
// overflows f32. sample(), sample_cuda() and Engine::submit check each params with it.
void validate(const SamplingParams& p, const char* fn = "validate", const std::string& at = "");

// True when softmax(logits[0, v)) is defined: v >= 1, no NaN, no +inf, and not every logit
// -inf. sample() throws for a row that is not (after its penalties). Throws
// InvalidArgument for v < 0, or null logits with v > 0.
bool softmax_defined(const float* logits /* [V] */, int64_t v);

// A row's previous tokens (for the penalties); n >= 0, tokens[i] in [0, V).
struct TokenHistory {
  const int32_t* tokens = nullptr;  // [n]
  int64_t n = 0;
};

// Philox4x32-10: 4 x 32 random bits from a 128-bit counter and a 64-bit key.
LLMK_HD inline void philox4x32_10(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3], k0 = key_in[0], k1 = key_in[1];
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// A uniform double in [0, 1) with 53 random bits, for draw (seed, step, row).
LLMK_HD inline double uniform01(uint64_t seed, uint64_t step, uint64_t row) {
  const uint32_t ctr[4] = {uint32_t(step), uint32_t(step >> 32), uint32_t(row), uint32_t(row >> 32)};
  const uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  uint32_t o[4];
  philox4x32_10(ctr, key, o);
  return double(((uint64_t(o[0]) << 32) | o[1]) >> 11) * 0x1p-53;
}

// The batch API: tokens[b] for each row of logits (f32 [B, V], CPU, 4-byte
// aligned, last dimension contiguous: stride[1] = 1 unless V = 1; any row
// stride >= V), params [B], history [B] (null: no penalties anywhere; each
// row's n >= 0, tokens not null when n > 0). tokens [B] must not overlap the
// logits, params or a history. A failed call (a bad argument, a row whose
// softmax is undefined) writes no token.
void sample(const TensorView& logits, const SamplingParams* params, const TokenHistory* history, uint64_t seed,
            uint64_t step, int32_t* tokens /* [B] */);

// One row with an explicit u in [0, 1): what sample() does for each row,
// exposed so tests can drive it with chosen u. `scratch` is resized as needed.
int32_t sample_row(const float* logits /* [V] */, int64_t v, const SamplingParams& p, const TokenHistory& history,
                   double u, std::vector<float>& scratch);

// --- CUDA: logits on the GPU -> token ids on the GPU, no host round trip. ---
inline constexpr int64_t kSampleTopkCap = 1024;     // K when top-k is off but top-p / min-p is on
inline constexpr int kSampleFullChunks = 256;       // chunks of the full-row inverse CDF
inline constexpr int32_t kSampleRowUndefined = -1;  // CUDA token for a NaN / +inf / all -inf row
inline constexpr int32_t kSampleBadHistory = -2;    // CUDA token for a malformed history row

// Every row's previous tokens as a CSR on the device: row b's tokens are
// tokens[indptr[b], indptr[b + 1]). indptr null = no history anywhere.
// Contents are checked on the device: a row with indptr[b] < 0,
// indptr[b + 1] < indptr[b], indptr[b + 1] > nnz or a token outside [0, V)
// is flagged (kSampleBadHistory), never read out of bounds.
struct DeviceTokenHistory {
  const int64_t* indptr = nullptr;  // [B + 1], device
  const int32_t* tokens = nullptr;  // [nnz], device
  int64_t nnz = 0;                  // host value: the length of tokens
};

// What sample_cuda launches for a batch (host logic, also built without CUDA).
struct SampleCudaPlan {
  int64_t k = 0;  // K of the softmax_topk launches (0: no row needs them)
  // Row ranges [first, end), one softmax_topk launch each: maximal runs whose
  // top-k / top-p / min-p rows share one temperature (greedy and full-row rows
  // join any run). One run when all sampled rows share T.
  std::vector<std::pair<int64_t, int64_t>> topk_runs;
  std::vector<float> run_temperature;  // [runs]
  bool full = false;                   // some row draws over its full row (full_row_kernel)
  bool penalties = false;              // some row has a penalty: logits are copied to a scratch first
};
SampleCudaPlan sample_cuda_plan(const SamplingParams* params /* [B] */, int64_t rows, int64_t v);

// Forces softmax_topk's launch configuration inside sample_cuda (tests).
struct SampleCudaOptions {
  TopkCudaConfig topk_config = TopkCudaConfig::auto_pick;
  int topk_splits = 0;  // split_row only (0 = pick), as softmax_topk_cuda's splits
};

// The device sampler: logits f32 [B, V] on the GPU (any row stride >= V, never
// written), params [B] on the host (validated here, uploaded as kernel
// arguments), history on the device (indptr null: none), tokens [B] on the
// device. Runs asynchronously on `stream`: penalties into a scratch copy (only
// when some row has a penalty and history is given), softmax_topk per
// temperature run, then the selection kernel and the full-row kernel. Top-k on
// CUDA needs top_k <= 1024 when V > 1024 (softmax_topk's limit).
void sample_cuda(const TensorView& logits, const SamplingParams* params, const DeviceTokenHistory& history,
                 uint64_t seed, uint64_t step, int32_t* tokens, Stream stream = nullptr,
                 const SampleCudaOptions& options = {});

// The penalties kernel on its own: out = logits with each row's history
// penalties applied (f32 [B, V], device, must not overlap logits), and
// bad_rows[b] = 1 where row b's history is malformed, else 0 (int32 [B], device).
void penalize_cuda(const TensorView& logits, const SamplingParams* params, const DeviceTokenHistory& history,
                   const TensorView& out, int32_t* bad_rows, Stream stream = nullptr);

}  // namespace llmk
