// Attention over the paged KV cache (llmk/kv_cache.hpp): decode (one new token per
// sequence) and varlen causal prefill, on the CPU and on CUDA. Design, kernels and
// measurements: docs/kv_cache.md, "Attention over the cache".
//
// Conventions for every function below:
//   - Activations are f32, rows contiguous. Hq = n_heads query heads, Hkv = kv.n_kv_heads,
//     D = kv.head_dim, G = Hq / Hkv (Hq % Hkv == 0): query head h reads KV head h / G
//     (MHA, GQA and MQA).
//   - out = sum_j softmax_j(scale * q . K[j]) V[j] over the keys a row sees; out is
//     overwritten, never accumulated, and must not overlap q.
//   - kv_len(b) = (blocks(b) - 1) * kv.block_tokens + pages.last_len[b]. The pools must be
//     aligned to kv_type_align() of their types (KvCache's are).
//   - opt.window = W > 0 (a sliding window): the query at position p sees only the keys at
//     p - W < k <= p (llama.cpp's standard window); positions before it are never read.
//   - Non-finite values: a key scored -inf gets weight 0; a row whose visible keys all score
//     -inf is NaN (0 / 0); a NaN or +inf score makes its row NaN. A NaN or infinity in a V
//     row reaches only the rows that see that key (unspecified where that key's score is
//     also -inf).
//   - Quantized K (int8 / int4) on the CPU: the query rows are quantized to int8 per
//     32-group, which moves a score by at most sum_g (amax_g / 254) sum_{i in g} |k_i|;
//     CUDA keeps f32 queries. With kv.k_rotated, q is rotated into a scratch copy (q itself
//     is never written). The result's bits depend on the SIMD level, the CUDA kernel and,
//     for decode, the split count, never on timing.
//   - Errors: every argument is validated on the host and a bad one throws
//     llmk::InvalidArgument naming it and its value (null pointers, shapes, an
//     out-of-range block id or last_len, overlapping q / out, misaligned pools, a CUDA view
//     in a build without CUDA); CUDA failures throw llmk::RuntimeError. The CUDA paths do
//     not read device-resident tables on the host: their contents are the caller's
//     guarantee.
//   - Thread-safety: no shared state; concurrent calls are safe when none writes what
//     another reads. A CPU call runs on up to llmk::num_threads() OpenMP threads; a CUDA call
//     is asynchronous on opt.stream (or its stream argument), with per-launch scratch on it.
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/cuda.hpp"
#include "llmk/kv_cache.hpp"

namespace llmk {

// The CUDA decode kernels (docs/kv_cache.md). `automatic` picks token_tiles_mma where the
// token tiles fit, else lane_per_element; AttentionOptions::cuda_decode forces one.
enum class DecodeCudaKernel : int {
  automatic = 0,
  lane_per_element,  // any K / V types
  token_tiles,       // K = V int8 or int4, where decode_cuda_token_tiles_fit(kv)
  token_tiles_mma,   // as token_tiles, on tensor cores (sm_80 or later)
};
const char* decode_cuda_kernel_name(DecodeCudaKernel k);
// Whether token_tiles (and token_tiles_mma) can run over kv: K = V int8 or int4, kv.k
// 16-byte aligned, an int4 kv.v 4-byte aligned, block_tokens x row bytes a multiple of 16,
// and block_tokens dividing 32 or a multiple of it. decode_cuda_kernel_pick: what
// `automatic` runs for kv.
bool decode_cuda_token_tiles_fit(const KvLayerView& kv);
DecodeCudaKernel decode_cuda_kernel_pick(const KvLayerView& kv);

struct AttentionOptions {
  int splits = 0;  // decode: context splits per sequence (CUDA: per (sequence, kv-head)); 0 = choose
  DecodeCudaKernel cuda_decode = DecodeCudaKernel::automatic;  // CUDA decode: the kernel (forced ones must fit)
  int64_t prefill_chunk = 1024;  // CPU prefill: positions a context chunk, a multiple of 16 in [16, 2^30];
                                 // the rows' bits depend on it (also a windowed CPU decode's first tile)
  int64_t max_kv_len = 0;        // CUDA decode: longest context of the batch, for the split choice (0 = assume 32768)
  int64_t num_tokens = -1;       // CUDA prefill: qo_indptr[B], the rows of q and out (required: the host
                                 // reads no device table)
  int64_t window = 0;            // sliding window in positions (>= 0; 0 = none; above): CPU and CUDA decode,
                                 // CPU prefill
  Stream stream = nullptr;       // CUDA
};

// \brief Decode: one new query token per sequence over its whole cached context.
// \param q      [B, Hq, D] f32, B = pages.num_seqs; token b is the last of sequence b
//                (already appended to the cache) and sees all kv_len(b) >= 1 positions
//                (CPU: an empty sequence is an InvalidArgument; CUDA: its row is NaN).
// \param kv     one layer's pools (KvCache::layer); kv.device says CPU or CUDA, and q,
//                out and pages must be on that device.
// \param pages  the CSR page table of the B sequences.
// \param scale  finite multiplier of q . k (usually 1 / sqrt(D)).
// \param out    [B, Hq, D] f32, overwritten.
// \param opt    splits (0 = choose), window, the CUDA kernel and stream.
void attention_decode(const float* q, const KvLayerView& kv, const PageTableView& pages, int64_t n_heads, float scale,
                      float* out, const AttentionOptions& opt = {});

// \brief Varlen causal prefill: the new tokens of B sequences, packed without padding.
// \param q          [T, Hq, D] f32, T = qo_indptr[B].
// \param qo_indptr  [B + 1] int64, qo_indptr[0] = 0, non-decreasing: sequence b owns rows
//                    qo_indptr[b] .. qo_indptr[b + 1] - 1, its last qo_len(b) <= kv_len(b)
//                    cached tokens, so its query i sits at position kv_len(b) - qo_len(b) + i
//                    and sees positions 0 .. that one (a chunk attends to its cached prefix).
// \param out        [T, Hq, D] f32, overwritten.
// \param opt        prefill_chunk (CPU: a multiple of 16; a row's bits depend on it and on
//                    nothing else around it, so a prefill over a cached prefix equals a cold
//                    one bitwise), window (CPU only), and for CUDA views num_tokens = T
//                    (required) and stream, which run attention_prefill_cuda().
// Other parameters as attention_decode.
void attention_prefill(const float* q, const int64_t* qo_indptr, const KvLayerView& kv, const PageTableView& pages,
                       int64_t n_heads, float scale, float* out, const AttentionOptions& opt = {});

// The split count attention_decode picks for this batch (CPU: threads; CUDA: SMs).
int attention_decode_splits(const KvLayerView& kv, const PageTableView& pages, int64_t max_kv_len);
// The kv heads one CPU decode work item holds: Hkv, or 1 when a head's run of
// block_tokens rows is long (docs/kv_cache.md).
int64_t attention_decode_heads_per_item(const KvLayerView& kv);

// The oracle, in double, over a DENSE cache as in llama2.c:
//   k, v [kv_indptr[B], Hkv, D] f32: sequence b's tokens are rows kv_indptr[b] ..;
//   q [T, Hq, D], qo_indptr [B+1] as for prefill (decode: qo_len = 1); out [T, Hq, D] double;
//   window as AttentionOptions::window.
void attention_reference(const float* q, const int64_t* qo_indptr, const float* k, const float* v,
                         const int64_t* kv_indptr, int64_t num_seqs, int64_t n_heads, int64_t n_kv_heads,
                         int64_t head_dim, double scale, double* out, int64_t window = 0);

// \brief Writes K and V rows into kv's device pools, bitwise as KvCache::write does on the host.
// \param k, v    [num_tokens, Hkv * D] f32 on the device; k is not written (with
//                 kv.k_rotated the rows are rotated in scratch).
// \param slots   [num_tokens] int64 on the device: a slot outside
//                 [0, num_blocks * block_tokens) (the -1 of a padding token) is skipped.
//                 Valid slots must be distinct; with a repeated one, which token's rows it
//                 holds is unspecified.
void kv_append_cuda(const KvLayerView& kv, const float* k, const float* v, const int64_t* slots, int64_t num_tokens,
                    Stream stream = nullptr);

// \brief attention_prefill's semantics on the device, without a window.
// \param q, qo_indptr, out, kv, pages  as attention_prefill, all on the device; the caller
//        guarantees qo_indptr[0] = 0, 0 <= qo_len(b) <= kv_len(b) and valid block ids.
// \param num_tokens  T = qo_indptr[B], given on the host; rows past it are never read or written.
// \param cta_rows    query rows per CTA: 0 = the launcher's pick, else one of
//        attention_prefill_cuda_configs(), which lists what the launcher may pick for this
//        shape on the current device, its own pick first.
void attention_prefill_cuda(const float* q, const int64_t* qo_indptr, int64_t num_tokens, const KvLayerView& kv,
                            const PageTableView& pages, int64_t n_heads, float scale, float* out,
                            Stream stream = nullptr, int cta_rows = 0);
std::vector<int> attention_prefill_cuda_configs(const KvLayerView& kv, int64_t n_heads, int64_t num_tokens,
                                                int64_t num_seqs);

}  // namespace llmk
