// The sampler on the GPU: f32 logits [B, V] on the device become token ids on
// the device, with no host round trip. The API layer validates everything on
// the host, plans (sample_cuda_plan, sample.cpp) and enqueues on one stream:
//  1. the rows' parameters, as kernel arguments of store_rows_kernel (64 rows
//     per launch, so no pageable host buffer outlives the call);
//  2. with history: bad-row flags zeroed, and when some row has a penalty the
//     logits copied (copy_rows: cudaMemcpy2DAsync) into a scratch z [B, ldz]; then
//     penalties_kernel, one block per row, threads over the row's CSR slice:
//     z[t] = penalize(logits[t]) for each history token t. It reads the
//     unmodified logits, so a token seen twice writes the same value twice:
//     each distinct token is penalized once, as on the CPU, without a dedup;
//  3. softmax_topk_cuda on z (or the logits) per temperature run, with K =
//     the largest K any row needs, into a workspace (probs, indices);
//  4. select_kernel, one warp per greedy / sorted row: the warp stages the
//     row's first k candidates in shared memory, lane 0 runs select_sorted()
//     on them with u = uniform01(seed, step, row);
//  5. full_row_kernel, one 256-thread block per full-row row: thread c owns
//     chunk c (kSampleFullChunks = 256 = blockDim), the block reduces the max
//     and the NaN / +inf flags, each thread writes its full_chunk_sum() to
//     shared memory, and thread 0 runs full_pick().
// Steps 4 and 5 write disjoint rows; every row gets exactly one token.
// The workspace is one cudaMallocAsync, freed with cudaFreeAsync on the same
// stream (also when an error is thrown after it was taken).
#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda_check.cuh"
#include "llmk/error.hpp"
#include "sample/sample_math.hpp"

namespace llmk::sampling {
namespace {

using namespace sample_math;

constexpr int kParamRows = 64;  // rows per store_rows_kernel launch: 64 * 32 B of kernel arguments
constexpr int kPenaltyThreads = 128;
constexpr int kSelectRows = 4;                   // rows (warps) per select_kernel block: 4 * 8 KiB of shared candidates
constexpr int kFullThreads = kSampleFullChunks;  // one thread per chunk
static_assert(kFullThreads % 32 == 0 && kFullThreads <= 1024, "full_row_kernel: whole warps, one block");

// A row's parameters as the kernels use them.
struct DevRow {
  float scale;  // 1 / T rounded to f32 (full-row rows)
  float top_p, min_p, rep, presence;
  int32_t k;         // candidates select_sorted looks at (greedy: 1)
  int32_t mode;      // RowMode
  int32_t top_k_on;  // select_sorted renormalizes over the k
};
struct RowChunk {
  DevRow r[kParamRows];
};

__global__ void store_rows_kernel(RowChunk c, int n, DevRow* __restrict__ dst /* [n] */) {
  if (int(threadIdx.x) < n) dst[threadIdx.x] = c.r[threadIdx.x];
}

__global__ void __launch_bounds__(kPenaltyThreads)
    penalties_kernel(const float* __restrict__ x /* [B, ldx] */, int64_t ldx, float* z /* [B, ldz] or null */,
                     int64_t ldz, int64_t v, const int64_t* __restrict__ indptr /* [B + 1] */,
                     const int32_t* __restrict__ hist /* [nnz] */, int64_t nnz, const DevRow* __restrict__ rows,
                     int32_t* bad /* [B] */) {
  const int64_t row = blockIdx.x;
  const int64_t lo = indptr[row], hi = indptr[row + 1];
  if (lo < 0 || hi < lo || hi > nnz) {
    if (threadIdx.x == 0) bad[row] = 1;
    return;
  }
  const DevRow r = rows[row];
  const bool on = z != nullptr && (r.rep != 1.0f || r.presence != 0.0f);
  for (int64_t i = lo + threadIdx.x; i < hi; i += kPenaltyThreads) {
    const int32_t t = hist[i];
    if (t < 0 || t >= v) {
      bad[row] = 1;  // every writer stores 1
      continue;
    }
    if (on) z[row * ldz + t] = penalize(x[row * ldx + t], r.rep, r.presence);
  }
}

// One warp per row: the warp stages the row's k candidates in shared memory
// (coalesced), then lane 0 runs select_sorted on them, so its sequential loops
// wait on shared-memory loads, not on L2. Returns depend on the warp's row
// only and the kernel syncs with __syncwarp alone.
__global__ void __launch_bounds__(kSelectRows * 32)
    select_kernel(int64_t rows_n, int64_t k_all, const float* __restrict__ probs /* [B, k_all] */,
                  const int32_t* __restrict__ idx /* [B, k_all] */, const DevRow* __restrict__ rows,
                  const int32_t* __restrict__ bad /* [B] or null */, uint64_t seed, uint64_t step,
                  int32_t* __restrict__ tokens /* [B] */) {
  __shared__ float sp[kSelectRows][kSampleTopkCap];
  __shared__ int32_t si[kSelectRows][kSampleTopkCap];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kSelectRows + warp;
  if (row >= rows_n) return;
  const DevRow r = rows[row];
  if (r.mode == kFull) return;
  if (bad != nullptr && bad[row] != 0) {
    if (lane == 0) tokens[row] = kSampleBadHistory;
    return;
  }
  // softmax_topk writes NaN probabilities for a row whose softmax is undefined
  // (a NaN, a +inf, all -inf); any other row's first probability is in
  // (0, 1]. Not its row_max: max / T can overflow to +-inf for a valid row at a
  // tiny T (T = 1e-38, max logit 5), whose probabilities are finite.
  if (probs[row * k_all] != probs[row * k_all]) {
    if (lane == 0) tokens[row] = kSampleRowUndefined;
    return;
  }
  for (int j = lane; j < r.k; j += 32) {  // r.k <= k_all <= kSampleTopkCap (checked by the API layer)
    sp[warp][j] = probs[row * k_all + j];
    si[warp][j] = idx[row * k_all + j];
  }
  __syncwarp();
  if (lane == 0)
    tokens[row] = select_sorted(sp[warp], si[warp], r.k, r.top_k_on != 0, r.top_p, r.min_p,
                                uniform01(seed, step, uint64_t(row)));
}

__global__ void __launch_bounds__(kFullThreads)
    full_row_kernel(const float* __restrict__ z /* [B, ld] */, int64_t ld, int64_t v, const DevRow* __restrict__ rows,
                    const int32_t* __restrict__ bad /* [B] or null */, uint64_t seed, uint64_t step,
                    int32_t* __restrict__ tokens /* [B] */) {
  __shared__ double sums[kSampleFullChunks];
  __shared__ float warp_max[kFullThreads / 32];
  __shared__ unsigned warp_flag[kFullThreads / 32];
  const int64_t row = blockIdx.x;
  const DevRow r = rows[row];
  // Both early returns depend on the row only: uniform over the block.
  if (r.mode != kFull) return;
  if (bad != nullptr && bad[row] != 0) {
    if (threadIdx.x == 0) tokens[row] = kSampleBadHistory;
    return;
  }
  const float* x = z + row * ld;
  const int c = threadIdx.x;
  const int64_t lo = full_chunk_begin(v, c), hi = full_chunk_begin(v, c + 1);
  float m = -__builtin_huge_valf();
  unsigned flag = 0;
  for (int64_t j = lo; j < hi; ++j) {
    const float f = x[j];
    flag |= unsigned(f != f || f == __builtin_huge_valf());
    m = fmaxf(m, f);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    flag |= __shfl_xor_sync(0xffffffffu, flag, o);
  }
  if (c % 32 == 0) {
    warp_max[c / 32] = m;
    warp_flag[c / 32] = flag;
  }
  __syncthreads();
  m = warp_max[0];
  flag = warp_flag[0];
  for (int w = 1; w < kFullThreads / 32; ++w) {
    m = fmaxf(m, warp_max[w]);
    flag |= warp_flag[w];
  }
  if (flag != 0 || m == -__builtin_huge_valf()) {  // same values in every thread: uniform
    if (c == 0) tokens[row] = kSampleRowUndefined;
    return;
  }
  sums[c] = full_chunk_sum(x, lo, hi, m, r.scale);
  __syncthreads();
  if (c == 0) tokens[row] = full_pick(x, v, sums, m, r.scale, uniform01(seed, step, uint64_t(row)));
}

// Host side.

void check_logits(const char* fn, const char* what, const TensorView& t) {
  LLMK_CHECK_ARG(t.ndim == 2 && t.dtype == DType::f32 && t.device == Device::cuda, fn, what, t.describe(),
                 "must be f32 [B, V] on a CUDA device");
  check_rows_view(fn, what, t);  // the kernels read a row's V logits as consecutive floats
  LLMK_CHECK_ARG(reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0, fn, what, t.describe(),
                 "data must be 4-byte aligned");
}

void check_common(const char* fn, const TensorView& logits, const SamplingParams* params, const DeviceTokenHistory& h) {
  check_logits(fn, "logits", logits);
  const int64_t rows = logits.rows();
  LLMK_CHECK_ARG(rows == 0 || params != nullptr, fn, "params", params, "must not be null");
  for (int64_t b = 0; b < rows; ++b) validate(params[b], fn, row_at(b));
  if (h.indptr == nullptr) {
    LLMK_CHECK_ARG(h.tokens == nullptr && h.nnz == 0, fn, "history.indptr", h.indptr,
                   "is null (no history) but tokens / nnz are set");
  } else {
    LLMK_CHECK_ARG(h.nnz >= 0, fn, "history.nnz", h.nnz, "must be >= 0");
    LLMK_CHECK_ARG(h.nnz == 0 || h.tokens != nullptr, fn, "history.tokens", h.tokens, "null with nnz > 0");
  }
}

int64_t align256(int64_t n) { return (n + 255) / 256 * 256; }

using Workspace = cuda::StreamBuffer;

void upload_rows(const SamplingParams* params, int64_t rows, int64_t v, DevRow* dst, cudaStream_t s) {
  for (int64_t b0 = 0; b0 < rows; b0 += kParamRows) {
    RowChunk c{};
    const int n = int(std::min<int64_t>(kParamRows, rows - b0));
    for (int i = 0; i < n; ++i) {
      const SamplingParams& p = params[b0 + i];
      const RowPlan rp = plan_row(p, v);
      c.r[i] = DevRow{p.temperature > 0 ? 1.0f / p.temperature : 1.0f,
                      p.top_p,
                      p.min_p,
                      p.repetition_penalty,
                      p.presence_penalty,
                      rp.k,
                      rp.mode,
                      rp.top_k_on ? 1 : 0};
    }
    LLMK_LAUNCH(1, kParamRows, 0, s, store_rows_kernel)(c, n, dst + b0);
    LLMK_CUDA_CHECK(cudaGetLastError());
  }
}

// dst[r, :v] = src[r, :v] for r < b. One cudaMemcpy2DAsync, unless a pitch is
// above the device's maximum (cudaDevAttrMaxPitch, 2^31 - 1 bytes on current
// GPUs), which it refuses: then one copy a row.
void copy_rows(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t v, int64_t b, cudaStream_t s) {
  int dev = 0, max_pitch = 0;
  LLMK_CUDA_CHECK(cudaGetDevice(&dev));
  LLMK_CUDA_CHECK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, dev));
  if (std::max(ldd, lds) * 4 <= int64_t(max_pitch)) {
    LLMK_CUDA_CHECK(cudaMemcpy2DAsync(dst, size_t(ldd) * 4, src, size_t(lds) * 4, size_t(v) * 4, size_t(b),
                                      cudaMemcpyDeviceToDevice, s));
    return;
  }
  for (int64_t r = 0; r < b; ++r)
    LLMK_CUDA_CHECK(cudaMemcpyAsync(dst + r * ldd, src + r * lds, size_t(v) * 4, cudaMemcpyDeviceToDevice, s));
}

// Zeroes bad, copies the logits into z when z is set, then applies the penalties.
void launch_penalties(const TensorView& x, float* z, int64_t ldz, const DeviceTokenHistory& h, const DevRow* rows,
                      int32_t* bad, cudaStream_t s) {
  const int64_t b = x.rows(), v = x.cols(), ldx = x.row_stride();
  LLMK_CUDA_CHECK(cudaMemsetAsync(bad, 0, size_t(b) * sizeof(int32_t), s));
  if (z) copy_rows(z, ldz, static_cast<const float*>(x.data), b > 1 ? ldx : v, v, b, s);
  LLMK_LAUNCH(unsigned(b), kPenaltyThreads, 0, s, penalties_kernel)
  (static_cast<const float*>(x.data), ldx, z, ldz, v, h.indptr, h.tokens, h.nnz, rows, bad);
  LLMK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace llmk::sampling

namespace llmk {

void penalize_cuda(const TensorView& logits, const SamplingParams* params, const DeviceTokenHistory& history,
                   const TensorView& out, int32_t* bad_rows, Stream stream) {
  using namespace sampling;
  const char* fn = "penalize_cuda";
  check_common(fn, logits, params, history);
  LLMK_CHECK_ARG(history.indptr != nullptr, fn, "history.indptr", history.indptr, "must not be null");
  check_logits(fn, "out", out);
  const int64_t rows = logits.rows(), v = logits.cols();
  LLMK_CHECK_ARG(out.rows() == rows && out.cols() == v, fn, "out", out.describe(),
                 "must have the logits' shape " + logits.describe());
  LLMK_CHECK_ARG(rows == 0 || bad_rows != nullptr, fn, "bad_rows", bad_rows, "must not be null");
  if (rows == 0) return;
  LLMK_CHECK_ARG(!views_overlap(out, logits), fn, "out", out.describe(), "must not overlap the logits");
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  Workspace ws(size_t(rows) * sizeof(DevRow), s);
  upload_rows(params, rows, v, ws.at<DevRow>(0), s);
  launch_penalties(logits, static_cast<float*>(out.data), out.rows() > 1 ? out.row_stride() : v, history,
                   ws.at<DevRow>(0), bad_rows, s);
  ws.release();
}

void sample_cuda(const TensorView& logits, const SamplingParams* params, const DeviceTokenHistory& history,
                 uint64_t seed, uint64_t step, int32_t* tokens, Stream stream, const SampleCudaOptions& opt) {
  using namespace sampling;
  const char* fn = "sample_cuda";
  check_common(fn, logits, params, history);
  const int64_t rows = logits.rows(), v = logits.cols();
  LLMK_CHECK_ARG(rows == 0 || tokens != nullptr, fn, "tokens", tokens, "must not be null");
  for (int64_t b = 0; b < rows && v > 1024; ++b)
    LLMK_CHECK_ARG(plan_row(params[b], v).k <= 1024, fn, "top_k (row " + std::to_string(b) + ")", params[b].top_k,
                   "must be <= 1024 on CUDA when V > 1024");
  const SampleCudaPlan plan = sample_cuda_plan(params, rows, v);
  const int64_t k = plan.k;
  if (k > 0 && opt.topk_config == TopkCudaConfig::warp_per_row)
    LLMK_CHECK_ARG(v <= 1024, fn, "options.topk_config", "warp_per_row", "needs V <= 1024");
  LLMK_CHECK_ARG(opt.topk_splits == 0 || opt.topk_config == TopkCudaConfig::split_row, fn, "options.topk_splits",
                 opt.topk_splits, "must be 0 unless options.topk_config is split_row");
  if (k > 0 && opt.topk_config == TopkCudaConfig::split_row) {
    const int64_t most = std::min<int64_t>({32, 4096 / k, v});
    LLMK_CHECK_ARG(most >= 2, fn, "options.topk_config", "split_row", "needs min(32, 4096 / K, V) >= 2");
    LLMK_CHECK_ARG(opt.topk_splits == 0 || (opt.topk_splits >= 2 && opt.topk_splits <= most), fn, "options.topk_splits",
                   opt.topk_splits, "must be 0 or in [2, min(32, 4096 / K, V)]");
  }
  if (rows == 0) return;

  // Workspace: rows | bad | probs | indices | z (each 256-byte aligned).
  const bool have_hist = history.indptr != nullptr, copy = have_hist && plan.penalties;
  const int64_t ldz = (v + 3) / 4 * 4;  // 16-byte aligned scratch rows
  const int64_t o_bad = align256(rows * int64_t(sizeof(DevRow)));
  const int64_t o_probs = o_bad + (have_hist ? align256(rows * 4) : 0);
  const int64_t o_idx = o_probs + align256(rows * k * 4);
  const int64_t o_z = o_idx + align256(rows * k * 4);
  const int64_t total = o_z + (copy ? rows * ldz * 4 : 0);
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  Workspace ws(size_t(total), s);
  auto* drows = ws.at<DevRow>(0);
  int32_t* bad = have_hist ? ws.at<int32_t>(o_bad) : nullptr;
  upload_rows(params, rows, v, drows, s);

  const float* src = static_cast<const float*>(logits.data);
  int64_t ld = rows > 1 ? logits.row_stride() : v;
  if (have_hist) {
    float* z = copy ? ws.at<float>(o_z) : nullptr;
    launch_penalties(logits, z, ldz, history, drows, bad, s);
    if (copy) {
      src = z;
      ld = ldz;
    }
  }
  if (k > 0) {
    auto* probs = ws.at<float>(o_probs);
    auto* idx = ws.at<int32_t>(o_idx);
    for (size_t r = 0; r < plan.topk_runs.size(); ++r) {
      const auto [first, end] = plan.topk_runs[r];
      softmax_topk_cuda(TensorView::matrix(src + first * ld, DType::f32, end - first, v, ld, Device::cuda), k,
                        plan.run_temperature[r], {probs + first * k, idx + first * k, nullptr, nullptr}, stream,
                        opt.topk_config, opt.topk_splits);
    }
    LLMK_LAUNCH(unsigned((rows + kSelectRows - 1) / kSelectRows), kSelectRows * 32, 0, s, select_kernel)
    (rows, k, probs, idx, drows, bad, seed, step, tokens);
    LLMK_CUDA_CHECK(cudaGetLastError());
  }
  if (plan.full) {
    LLMK_LAUNCH(unsigned(rows), kFullThreads, 0, s, full_row_kernel)(src, ld, v, drows, bad, seed, step, tokens);
    LLMK_CUDA_CHECK(cudaGetLastError());
  }
  ws.release();
}

}  // namespace llmk
