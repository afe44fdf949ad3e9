// Fused softmax + top-k: for each row of logits [B, V] (f32, f16 or bf16, last
// dimension contiguous: stride[1] = 1 unless V = 1; any row stride >= V), the
// K largest probabilities of softmax(logits / T), normalized over the whole
// row, with their indices, in one read of the logits. Serves sampling (V
// 32k..256k, K 1..1024) and MoE routing (V 8..512, K 1..8). All outputs are
// overwritten.
//
// Semantics (every one is tested in tests/topk/):
//  - Order: descending by logit, ties to the lower index. softmax is monotone,
//    so this is descending probability; two distinct logits whose f32
//    probabilities round equal keep their logit order. Selection compares the
//    stored logits themselves (exactly, after conversion to f32; -0 == +0),
//    never rounded probabilities, so the index set is exact and identical on
//    CPU and GPU and for every thread count and SIMD level.
//  - probs[b, j] = exp(x_j / T - lse[b]) in f32, normalized over all V logits.
//    row_max[b] = max_j x_j / T, lse[b] = log sum_j exp(x_j / T) (both f32), so
//    log p_j = x_j / T - lse[b].
//  - -inf logits are valid and get probability 0; when fewer than K logits are
//    > -inf, the remaining slots hold the lowest-index -inf entries (prob 0).
//  - Rows where softmax is undefined give what torch.softmax gives, NaN
//    probabilities, with indices 0..K-1 (all tied). row_max says which case:
//      a NaN anywhere in the row     -> row_max = NaN,  lse = NaN;
//      +inf (and no NaN)             -> row_max = +inf, lse = +inf;
//      every logit -inf              -> row_max = -inf, lse = -inf.
//    So `std::isfinite(row_max[b])` is the per-row status flag, unless
//    max / T itself overflows f32 (|max| / T > 3.4e38: a T near 1e-38, or
//    logits near FLT_MAX); such a row has row_max = +-inf but finite probs.
//  - Arguments: 1 <= K <= V, V <= 2^31 - 1 (int32 indices; offsets are 64-bit),
//    T > 0 finite with log2(e)/T finite in f32 (T >= 4.2e-39); on CUDA also K <= 1024 when V > 1024
//    and logits.data aligned to its element size.
//    Anything else throws llmk::InvalidArgument naming the argument, as does an
//    output that shares memory with the logits or another output. Outputs
//    live on the logits' device.
//  - Temperature: the scale is 1/T rounded to f32, applied inside the pass.
#pragma once
#include <cstdint>

#include "llmk/cuda.hpp"
#include "llmk/tensor.hpp"

namespace llmk {

struct SoftmaxTopkOut {
  float* probs = nullptr;      // [B, K] row-major, contiguous
  int32_t* indices = nullptr;  // [B, K]
  float* row_max = nullptr;    // [B]; may be null when not wanted
  float* lse = nullptr;        // [B]; may be null when not wanted
};

// The fused op. CPU: scalar / AVX2 / AVX-512 by llmk::simd_level(), rows (or,
// when B < threads, chunks of rows) over llmk::num_threads() threads. CUDA:
// runs on `stream`, asynchronously; the launch configuration is picked from
// (B, V, K) by softmax_topk_cuda_config().
void softmax_topk(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out,
                  Stream stream = nullptr);

// The oracle: double precision, full sort of every row (CPU only).
void softmax_topk_ref(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out);

// The baseline the fused op must beat: a safe softmax written to a [B, V]
// scratch (3 passes), then a separate heap top-k over the probabilities (ties
// to the lower index). CPU only, rows over threads.
void softmax_topk_naive(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out);

// --- CUDA launch configurations, exposed so every one is tested. ---
enum class TopkCudaConfig : int {
  auto_pick = 0,
  warp_per_row = 1,   // V <= 1024: one warp per row, 4 rows per block, bitonic sort in shared memory
  block_per_row = 2,  // one 256-thread block per row, threshold-filtered pool in shared memory
  split_row = 3,      // row split over several blocks + an exact merge kernel (small B)
};
const char* topk_cuda_config_name(TopkCudaConfig c);
// What auto_pick chooses for this shape on the current device (rows >= 0,
// vocab >= 1, k >= 1, else InvalidArgument).
TopkCudaConfig softmax_topk_cuda_config(int64_t rows, int64_t vocab, int64_t k);
// Like softmax_topk on a CUDA tensor, with a forced configuration (warp_per_row
// needs V <= 1024; split_row uses `splits` blocks per row, 0 = pick; splits
// must be 0 with any other config, auto_pick included).
void softmax_topk_cuda(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out, Stream stream,
                       TopkCudaConfig config, int splits = 0);

}  // namespace llmk
