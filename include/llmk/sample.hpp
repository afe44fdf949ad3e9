// Token sampling on top of softmax_topk, for the engine's decode step.
//
// Per row b of f32 logits [B, V] on the CPU, with that row's SamplingParams:
//  1. penalties over the row's token history (each distinct token once):
//     repetition (CTRL / Hugging Face): z = z > 0 ? z / r : z * r, then
//     presence (OpenAI): z -= presence_penalty;
//  2. greedy (argmax, ties to the lower index) when temperature == 0 or
//     top_k == 1;
//  3. otherwise p = softmax(z / T) over the whole row; top-k keeps the k most
//     probable and renormalizes; top-p keeps the shortest prefix (in softmax_topk's
//     order) whose mass reaches top_p; min-p keeps tokens with q >= min_p * q_max;
//     the kept tokens are renormalized and one is drawn by inverse CDF over
//     that order with u from the RNG below. Without top-k/top-p/min-p the draw
//     is over the full row, in index order.
// The draw for (seed, step, row) uses u = uniform01(seed, step, row): Philox4x32-10
// (Salmon et al. 2011) with counter (step, row) and key seed, a pure function
// callable from host and device code, so a GPU sampler draws the same u.
// Rows whose softmax is undefined (a NaN or +inf logit, or all -inf after
// penalties) throw llmk::InvalidArgument naming the row.
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/tensor.hpp"

#if defined(__CUDACC__)
#define LLMK_HD __host__ __device__
#else
#define LLMK_HD
#endif

namespace llmk {

struct SamplingParams {
  float temperature = 1.0f;         // >= 0; 0 = greedy
  int32_t top_k = 0;                // >= 0; 0 = off, 1 = greedy
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1); 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float presence_penalty = 0.0f;    // finite; 0 = off
};

// A row's previous tokens (for the penalties); tokens[i] in [0, V).
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

// The batch API: tokens[b] for each row of logits (f32 [B, V], CPU, any row
// stride), params [B], history [B] (null: no penalties anywhere).
void sample(const TensorView& logits, const SamplingParams* params, const TokenHistory* history, uint64_t seed,
            uint64_t step, int32_t* tokens /* [B] */);

// One row with an explicit u in [0, 1): what sample() does for each row,
// exposed so tests can drive it with chosen u. `scratch` is resized as needed.
int32_t sample_row(const float* logits /* [V] */, int64_t v, const SamplingParams& p, const TokenHistory& history,
                   double u, std::vector<float>& scratch);

}  // namespace llmk
