// Attention over the paged KV cache (llmk/kv_cache.hpp), prefill and decode.
//
// Shapes (f32, rows contiguous; Hq query heads, Hkv = kv.n_kv_heads, D = head_dim,
// Hq % Hkv == 0: query head h reads KV head h / (Hq / Hkv), so MHA, GQA and MQA):
//   decode:  q   [B, Hq, D]  one new token per sequence, already appended to the cache;
//            out [B, Hq, D]  overwritten. Token b attends to all kv_len(b) cached tokens.
//            out must not share memory with q (CPU: InvalidArgument).
//            Every sequence needs kv_len >= 1: the CPU path rejects an empty one;
//            the CUDA path (which does not read the device tables on the host)
//            writes NaN rows for it.
//   prefill: q   [T, Hq, D]  the new tokens of B sequences packed without padding;
//            qo_indptr [B+1] (int64): sequence b owns q rows qo_indptr[b] .. qo_indptr[b+1]-1;
//            out [T, Hq, D]  overwritten.
//            The new tokens are the LAST qo_len(b) tokens of the sequence in the
//            cache, so query i of sequence b sits at position
//            kv_len(b) - qo_len(b) + i and attends (causally) to positions 0 .. that
//            position: a chunk attends to its already-cached prefix too.
//   kv:      pools aligned to kv_type_align() of their types (KvCache's are 64-byte aligned);
//            anything else is an InvalidArgument naming kv.k / kv.v.
//   pages:   PageTableView over the same B sequences; kv_len(b) =
//            (blocks(b) - 1) * block_tokens + last_len[b].
//   out[t, h, :] = sum_j softmax_j(scale * q[t,h,:] . K[j, h/G, :]) V[j, h/G, :]
//   window (opt.window, 0 = none): the query at position p sees only the keys
//            at positions k with p - window < k <= p (llama.cpp's standard sliding
//            window, gemma3's local layers). Positions before a row's window are
//            never read: whole blocks before it are skipped, and a row's first
//            visible tile starts at its window's first position.
//   A key whose score is -inf (an infinite K element) gets weight 0; a row whose
//   visible keys all score -inf is NaN (0 / 0), as softmax; a NaN or +inf score makes
//   its row NaN. A NaN or infinity in a row's V reaches only the rows that see it;
//   where that key's own score is -inf (weight 0, but 0 * NaN is NaN), whether it
//   reaches them depends on how the keys are split into tiles, warps and splits
//   (unspecified: a key scored -inf and a V that is not finite at once).
//
// K and V are dequantized inside the inner loops (no dequantized copy), except
// that on the CPU an int8 / int4 K is never dequantized: each query row
// (times scale) is quantized to int8 per 32-group (scale amax/127, like
// llama.cpp's Q8 activations against a quantized cache) and the scores are
// integer dot products times the two scales (+ the Q4_1 min term). This moves
// a score by at most sum_g (amax_g/254) sum_{i in g} |k_i| (tests/attention
// asserts the bound); f32 / f16 / bf16 K keep f32 queries. On CUDA the
// queries stay f32: lane_per_element dequantizes each K element, token_tiles
// sums a 32-group's quants times q and then multiplies by the group's scale
// (int4: plus its min times the group's sum of q), and token_tiles_mma does the
// same with q as two f16 parts (within ~2^-22 of q) in exact products.
// CPU prefill runs a row's context in fixed chunks of opt.prefill_chunk
// positions ([c C, (c + 1) C), by absolute position) and folds the chunks'
// log-sum-exp states in chunk order, so the result of a query depends only on
// its own q, its position, the chunk size and the cached rows it sees, not on
// the batch around it or on which thread ran which chunk: a prefill over a
// cached prefix is bitwise equal to a cold prefill of the whole prompt, and a
// one-token prefill (the engine's decode) to the same token's row in a
// prompt. With fewer (sequence, kv-head, 8-token tile) items than 4 per
// thread, a tile's chunks are spread over several threads (one long sequence
// at batch 1 uses them all).
// Decode splits the context (split-K, exact log-sum-exp merge) when there
// are too few sequences (CPU) or sequences x kv-heads (CUDA) to occupy the
// threads / SMs; the split count depends on the batch, so attention_decode
// equals a one-token prefill bitwise only with one split and a context of at
// most prefill_chunk.
//
// With kv.k_rotated (KvCacheConfig::k_rotate: K rows stored Hadamard-rotated,
// llmk/kv_quant.hpp), q is rotated the same way into a scratch copy at entry,
// CPU and CUDA alike (q itself is never written); V is not rotated, so out
// needs no inverse rotation.
//
// CPU (Device::cpu views): decode threads over (sequence, split), each item
// walking the sequence's blocks once for all its kv heads; prefill threads over
// (sequence, kv-head, query tile, range of context chunks);
// scalar / AVX2 / AVX-512 by llmk::simd_level(). CUDA (Device::cuda views,
// all pointers on the device): decode, prefill (attention_prefill with
// opt.num_tokens = qo_indptr[B] calls attention_prefill_cuda()), and
// kv_append_cuda() which quantizes K/V rows into the pools through the slot map.
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/cuda.hpp"
#include "llmk/kv_cache.hpp"

namespace llmk {

// The CUDA decode kernels; the launcher picks token_tiles_mma wherever the
// token tiles fit, else lane_per_element, and each can be forced
// (AttentionOptions::cuda_decode) so all are tested.
enum class DecodeCudaKernel : int {
  automatic = 0,
  lane_per_element,  // any K / V types: lane j holds elements j, j + 32, .. of every K and V row
  token_tiles,       // K = V int8 or int4: tiles of 32 K rows copied to shared memory and scored a
                     // lane per token; in P.V a lane holds a run of consecutive elements of a
                     // V row. Fits when kv.k is 16-byte aligned, an int4 kv.v 4-byte aligned
                     // (a group's scale and min are one 32-bit load), block_tokens x row
                     // bytes is a multiple of 16 and block_tokens divides 32 or is a multiple of it.
  token_tiles_mma,   // the same, with the scores by tensor-core MMAs (f16 quants, q split into
                     // two f16 parts), and P.V too for GQA (G >= 2) up to head_dim
                     // 128; fits where token_tiles fits (sm_80 or later).
};
const char* decode_cuda_kernel_name(DecodeCudaKernel k);
// Whether token_tiles (and token_tiles_mma) fits kv (above), and what
// `automatic` picks for it.
bool decode_cuda_token_tiles_fit(const KvLayerView& kv);
DecodeCudaKernel decode_cuda_kernel_pick(const KvLayerView& kv);

struct AttentionOptions {
  int splits = 0;           // decode: context splits per sequence (CUDA: per (sequence, kv-head)); 0 = choose
  DecodeCudaKernel cuda_decode = DecodeCudaKernel::automatic;  // CUDA decode: the kernel (forced ones must fit)
  int64_t prefill_chunk = 1024;  // CPU prefill (and a windowed CPU decode's first tile): positions a context chunk (a multiple of 16); the rows' bits depend on it
  int64_t max_kv_len = 0;   // CUDA decode: longest context of the batch, for the split choice (0 = assume 32768)
  int64_t num_tokens = -1;  // CUDA prefill: qo_indptr[B], the rows of q and out (required: the host reads no device table)
  int64_t window = 0;       // sliding window in positions (>= 0; 0 = none): see the header comment; CPU and CUDA decode, CPU prefill
  Stream stream = nullptr;  // CUDA
};

void attention_decode(const float* q, const KvLayerView& kv, const PageTableView& pages, int64_t n_heads,
                      float scale, float* out, const AttentionOptions& opt = {});

void attention_prefill(const float* q, const int64_t* qo_indptr, const KvLayerView& kv, const PageTableView& pages,
                       int64_t n_heads, float scale, float* out, const AttentionOptions& opt = {});

// The split count attention_decode picks for this batch (CPU: threads; CUDA: SMs).
int attention_decode_splits(const KvLayerView& kv, const PageTableView& pages, int64_t max_kv_len);
// The kv heads one CPU decode work item holds (every head of a sequence, or
// one): a whole block read as one run when a head's run of block_tokens rows is short.
int64_t attention_decode_heads_per_item(const KvLayerView& kv);

// The oracle, in double, over a DENSE cache as in llama2.c:
//   k, v [kv_indptr[B], Hkv, D] f32: sequence b's tokens are rows kv_indptr[b] ..;
//   q [T, Hq, D], qo_indptr [B+1] as for prefill (decode: qo_len = 1); out [T, Hq, D] double;
//   window as AttentionOptions::window.
void attention_reference(const float* q, const int64_t* qo_indptr, const float* k, const float* v,
                         const int64_t* kv_indptr, int64_t num_seqs, int64_t n_heads, int64_t n_kv_heads,
                         int64_t head_dim, double scale, double* out, int64_t window = 0);

// Quantizes K and V rows [T, Hkv * D] (device f32) into the device pools of kv
// through slots [T] (device int64), bitwise like KvCache::write (rotating the K
// rows first when kv.k_rotated; the caller's k is not written). The host does
// not read the device slots: a slot outside [0, num_blocks * block_tokens)
// (such as the -1 of a padding token) is skipped, its rows not written. The
// valid slots must be distinct (as KvBlockManager hands them out): with a slot
// given twice, which token's rows it ends up holding is unspecified (the
// host's KvCache::write keeps the last).
void kv_append_cuda(const KvLayerView& kv, const float* k, const float* v, const int64_t* slots, int64_t num_tokens,
                    Stream stream = nullptr);

// Prefill on the device (src/attention/prefill.cu): attention_prefill's
// semantics with q [T, Hq, D], qo_indptr [B+1], out [T, Hq, D], the pools and
// the page table all on the device. num_tokens = T = qo_indptr[B] is given on
// the host, which never reads the device tables: the caller guarantees
// qo_indptr[0] = 0, 0 <= qo_len(b) <= kv_len(b) and valid block ids (rows
// past num_tokens are never read or written). Queries stay f32 against every K
// type (the CPU quantizes them to int8 against an int8 / int4 K). cta_rows:
// query rows per CTA, 0 = the launcher's pick, else one of
// attention_prefill_cuda_configs(), which lists every configuration the
// launcher may pick for this shape on the current device, its own pick first.
void attention_prefill_cuda(const float* q, const int64_t* qo_indptr, int64_t num_tokens, const KvLayerView& kv,
                            const PageTableView& pages, int64_t n_heads, float scale, float* out,
                            Stream stream = nullptr, int cta_rows = 0);
std::vector<int> attention_prefill_cuda_configs(const KvLayerView& kv, int64_t n_heads, int64_t num_tokens,
                                                int64_t num_seqs);

}  // namespace llmk
