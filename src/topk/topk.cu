// CUDA softmax + top-k: one read of the logits from global memory, three
// launch configurations (chosen by softmax_topk_cuda_config, forcible for
// tests), and the API layer that validates and launches on a stream.
//
//  warp_per_row (V <= 1024, MoE routing): a 128-thread block serves 4 rows,
//    one warp each. A warp loads its row once (coalesced), keeps the keys in
//    its own slice of shared memory ([4][n2] u64, n2 = pow2 >= max(V, 32)),
//    reduces (max, sum) by shuffles, bitonic-sorts its slice and writes its
//    row. Warps touch only their own slice and row and sync with __syncwarp,
//    so rows never mix; a warp past the last row returns at once.
//  block_per_row: a 256-thread block per row (or per part of a row), 16-byte
//    loads (4 f32 / 8 f16 or bf16 per thread per step, after a scalar head up
//    to 16-byte alignment and before a scalar tail; each thread keeps kAhead
//    steps' loads in flight in registers). Each element updates the
//    thread's online (max, sum). For K <= 8 each thread keeps its best 8 keys
//    sorted in registers, and at the end the block selects and sorts the
//    best K of its 2048 (finish_pool). Otherwise each element is offered to a
//    shared pool of kPool keys when its key beats the threshold (0 at first;
//    then just below the bucket of the K-th best key at the last select). A
//    warp reserves pool slots with one atomicAdd for all its offers. Between
//    steps, if a full step might not fit, a radix select (select_top) keeps
//    the keys in or above the K-th best's bucket (at most K + 256) and raises
//    the threshold; it sorts nothing. At the end the pool is selected down to
//    at most max(64, 2K') keys (K' = K up to a power of two) and those are
//    sorted; the top K are the row's. (max, sum) is merged by shuffles, then
//    across the 8 warps in a fixed order by thread 0.
//  split_row (small B): the same kernel over `splits` parts per row, each
//    writing (state, its K best keys) to a workspace; a merge kernel (one block
//    per row) selects and sorts the best K of the splits * K keys and merges
//    the states in part order. The best K of a row are among the union of its
//    parts' best K: exact.
#include <algorithm>

#include "core/cuda_check.cuh"
#include "topk/topk_device.cuh"
#include "topk/topk_internal.hpp"

namespace llmk::topk {
namespace {

using namespace dev;

constexpr int kWarpRows = 4;  // rows (warps) per block in warp_per_row
constexpr int kBlock = 256;   // threads per block in block_per_row / split_row
constexpr int kPool = 4096;   // shared pool (32 KiB of keys) >= K + one step (256 * 8)
constexpr int kMaxBlockK = 1024;
constexpr int kRegK = 8;  // K <= kRegK: per-thread register top-k instead of the pool
// 16-byte loads in flight a thread in block_per_row / split_row. At B = 256 on
// a 132-SM GPU about 2 blocks (512 threads) run a SM: one load a thread in
// flight is 8 KiB a SM, where Little's law wants about 4.8 TB/s / 132 SMs *
// ~0.7 us latency = ~25 KiB (an estimate: not yet measured on a device).
constexpr int kAhead = 4;
static_assert(kBlock * kRegK <= kPool, "the register lists of a block must fit the pool");

struct Out {
  float* probs;      // [B, K]
  int32_t* indices;  // [B, K]
  float* row_max;    // [B] or null
  float* lse;        // [B] or null
};

template <class T>
__global__ void __launch_bounds__(kWarpRows * 32)
    warp_row_kernel(const T* __restrict__ logits /* [B, ld] */, int64_t rows, int64_t ld, int v, int k, int n2,
                    float scale, Out out) {
  LLMK_DYNAMIC_SMEM(uint64_t, smem);  // [kWarpRows][n2]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kWarpRows + warp;
  if (row >= rows) return;
  uint64_t* keys = smem + warp * n2;
  const T* x = logits + row * ld;
  RowState st = empty_state();
  for (int j = lane; j < n2; j += 32) {
    uint64_t key = 0;
    if (j < v) {
      const float f = to_float(x[j]);
      state_add(st, f, scale);
      if (f == f) key = make_key(f, j);
    }
    keys[j] = key;
  }
  warp_merge(st, scale);
  __syncwarp();
  if (st.flags == 0 && st.m != -kInf) warp_bitonic_sort(keys, n2, lane);
  write_row(st, keys, k, scale, row, out.probs, out.indices, out.row_max, out.lse, lane, 32);
}

struct Pool {
  uint64_t keys[kPool];
  int n;
  uint64_t thr;
  int hist[kBlock];  // select_top: one bin a thread (8-bit digits)
  uint64_t prefix;   // select_top: the digits of the k-th best key found so far
  int above;         // select_top: keys in higher buckets than the prefix's
  int done;
  RowState warp_state[kBlock / 32];
  RowState total;
};
static_assert(kBlock == 256, "select_top keeps one histogram bin a thread");

// Appends the keys of the lanes that want to (the whole warp calls this) with
// one atomicAdd for the warp. Returns, in lane 0, the pool's count just after
// the warp's reservation; 0 where nothing was appended or in other lanes.
__device__ __forceinline__ int push_warp(Pool& p, bool want, uint64_t key) {
  const unsigned ballot = __ballot_sync(0xffffffffu, want);
  if (ballot == 0) return 0;
  const int lane = threadIdx.x % 32;
  int base = 0;
  if (lane == 0) base = atomicAdd(&p.n, __popc(ballot));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (want) p.keys[base + __popc(ballot & ((1u << lane) - 1u))] = key;
  return lane == 0 ? base + __popc(ballot) : 0;
}

// Every thread of the block calls this with a uniform trip count; `valid`
// marks a real element. Offers x (index j) to the pool when its key beats thr.
// `end` (lane 0): the pool's count just after its warp's last reservation.
__device__ __forceinline__ void offer(Pool& p, RowState& st, bool valid, float x, int64_t j, float scale, uint64_t thr,
                                      int& end) {
  bool want = false;
  uint64_t key = 0;
  if (valid) {
    state_add(st, x, scale);
    key = make_key(x, j);
    want = x == x && key > thr;
  }
  if (const int e = push_warp(p, want, key)) end = e;
}

// Between two steps of offers (every thread): whether one more step might not
// fit the pool. Each warp's `end` (0 in a warp that reserved nothing since the
// last select) is at most the pool's count, and the warp that reserved last
// holds the count itself, so one barrier answers (reading p.n would take two: one
// before the read, one before anyone reserves again).
__device__ __forceinline__ bool pool_full(int end) { return __syncthreads_or(end > kPool - kBlock * 8); }

// Small K: each thread keeps its best kRegK keys sorted in registers (r[0]
// largest). A key above r[kRegK - 1] replaces it and one unrolled
// compare-exchange pass moves it into place; most elements cost one compare.
template <int KR>
__device__ __forceinline__ void reg_push(uint64_t (&r)[KR], uint64_t key) {
  if (key <= r[KR - 1]) return;
  r[KR - 1] = key;
#pragma unroll
  for (int i = KR - 1; i > 0; --i) {
    const uint64_t a = r[i - 1], b = r[i];
    r[i - 1] = a > b ? a : b;
    r[i] = a > b ? b : a;
  }
}

// Keeps the pool's keys at or above the bucket of its k-th best key and
// raises thr to just below that bucket, unsorted (every thread, after a
// barrier that follows the last offer). The bucket is found by a radix select
// from the top, one 8-bit digit a pass: a histogram of the digit over the keys
// that share the digits found so far (warp-aggregated by __match_any_sync, as
// a step's keys often share their top digits), then the bin where the count
// from the top reaches k. It stops once the bucket and those above it hold at
// most `keep` keys (keys are distinct, so 8 digits isolate the k-th). Nothing
// of the best k is lost: they are all >= the bucket's smallest key (`prefix`,
// its lower digits 0), which is what stays, and later offers need key > thr =
// prefix - 1. Pool keys are > 0 (0 pads a split's short list in merge_kernel;
// dropped here, as a pad is never among a row's best).
__device__ void select_top(Pool& p, int k, int keep) {
  const int n = p.n;
  if (n <= keep) return;
  const int lane = threadIdx.x % 32;
  uint64_t prefix = 0;
  int above = 0, fixed = 64;  // bits >= fixed of the k-th best key are prefix's
  while (fixed > 0) {         // at most 8 passes (shift 0 sets done)
    const int shift = max(fixed - 8, 0);
    const uint64_t hi = fixed == 64 ? 0 : ~uint64_t(0) << fixed;
    p.hist[threadIdx.x] = 0;
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += kBlock) {  // a uniform trip count: the match needs the whole warp
      const int i = i0 + threadIdx.x;
      const uint64_t key = i < n ? p.keys[i] : 0;
      const int digit = i < n && (key & hi) == prefix ? int(key >> shift) & 255 : -1;
      const unsigned same = __match_any_sync(0xffffffffu, digit);
      if (digit >= 0 && lane == __ffs(int(same)) - 1) atomicAdd(&p.hist[digit], __popc(same));
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l: bins 255 - 8 l down to 248 - 8 l
      int c[8], sum = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) sum += c[b] = p.hist[255 - 8 * lane - b];
      int incl = sum;  // keys in this lane's bins and above
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
      }
      const int need = k - above;  // 1 <= need <= the keys sharing prefix
      int run = incl - sum;
      if (run < need && need <= incl) {  // one lane
        for (int b = 0; b < 8; ++b) {
          if (run + c[b] >= need) {
            // bits [shift, fixed) are 0 in prefix; where shift + 8 > fixed the
            // digit's upper bits are prefix's own (every counted key shares them)
            p.prefix = prefix | uint64_t(255 - 8 * lane - b) << shift;
            p.above = above + run;
            p.done = above + run + c[b] <= keep || shift == 0;
            break;
          }
          run += c[b];
        }
      }
    }
    __syncthreads();
    prefix = p.prefix;
    above = p.above;
    fixed = shift;
    if (p.done) break;  // the same in every thread
  }
  // Compact: each thread takes its keys >= prefix, then push_warp packs them.
  constexpr int kPer = kPool / kBlock;
  uint64_t mine[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + j * kBlock;
    mine[j] = i < n && p.keys[i] >= prefix ? p.keys[i] : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    p.n = 0;
    if (prefix > 0) p.thr = max(p.thr, prefix - 1);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPer; ++j) push_warp(p, mine[j] != 0, mine[j]);
  __syncthreads();
}

// The pool's best k keys, sorted descending, at its front (every thread, after
// the last offer): a select down to at most max(64, 2 k') keys, k' = k rounded
// up to a power of two, then a bitonic sort of those (0-padded).
__device__ void finish_pool(Pool& p, int k) {
  __syncthreads();
  int k2 = 1;
  while (k2 < k) k2 <<= 1;
  select_top(p, k, max(64, 2 * k2));
  const int n = p.n;
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  for (int i = n + threadIdx.x; i < max(n2, k); i += blockDim.x) p.keys[i] = 0;
  __syncthreads();
  block_bitonic_sort(p.keys, n2);
}

// Scans part `blockIdx.x % splits` of row `blockIdx.x / splits`. splits == 1:
// writes the row's outputs; else writes (state, K best keys, 0-padded) to ws.
// KR > 0 (K <= KR): candidates in per-thread registers, the block's 256 * KR
// keys cut to the best K at the end (finish_pool); KR == 0: the
// threshold-filtered pool.
template <class T, int KR>
__global__ void __launch_bounds__(kBlock)
    block_row_kernel(const T* __restrict__ logits /* [B, ld] */, int64_t ld, int v, int k, int splits, float scale,
                     Out out, RowState* ws_state /* [B * splits] */, uint64_t* ws_keys /* [B * splits, K] */) {
  constexpr int E = 16 / sizeof(T);
  __shared__ Pool p;
  const int64_t unit = blockIdx.x, row = unit / splits, part = unit % splits;
  const int64_t lo = int64_t(v) * part / splits, hi = int64_t(v) * (part + 1) / splits;
  const T* x = logits + row * ld;
  if (threadIdx.x == 0) {
    p.n = 0;
    p.thr = 0;
  }
  __syncthreads();
  RowState st = empty_state();
  int end = 0;  // KR == 0: see offer
  uint64_t rk[KR > 0 ? KR : 1];
#pragma unroll
  for (int i = 0; i < (KR > 0 ? KR : 1); ++i) rk[i] = 0;
  // Every thread calls visit with a uniform trip count (offer's ballot needs the whole warp).
  auto visit = [&](bool valid, float f, int64_t j, uint64_t thr) {
    if constexpr (KR > 0) {
      if (valid) {
        state_add(st, f, scale);
        if (f == f) reg_push(rk, make_key(f, j));
      }
    } else {
      offer(p, st, valid, f, j, scale, thr, end);
    }
  };
  // Head: scalar up to the first 16-byte aligned element (fewer than E elements).
  const int64_t mis = int64_t(reinterpret_cast<uintptr_t>(x + lo) % 16) / int64_t(sizeof(T));
  const int64_t a = min(hi, lo + (mis ? E - mis : 0));
  visit(lo + threadIdx.x < a, lo + threadIdx.x < a ? to_float(x[lo + threadIdx.x]) : 0.0f, lo + threadIdx.x, p.thr);
  // Body: step s reads the 16-byte words s * kBlock + threadIdx.x. Each thread
  // holds its next kAhead words in registers (w[u] is step s's when s % kAhead
  // == u) and asks for step s + kAhead's as it takes step s's: kAhead loads in
  // flight a thread, also across a pool flush's barriers.
  const int64_t nvec = (hi - a) / E, body_end = a + nvec * E;
  const uint4* xw = reinterpret_cast<const uint4*>(x + a);
  uint4 w[kAhead] = {};
#pragma unroll
  for (int u = 0; u < kAhead; ++u)
    if (int64_t(u) * kBlock + threadIdx.x < nvec) w[u] = xw[int64_t(u) * kBlock + threadIdx.x];
  for (int64_t s0 = 0; s0 < nvec; s0 += kAhead * kBlock) {
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t s = s0 + int64_t(u) * kBlock;  // the same in every thread: the break and flush are uniform
      if (s >= nvec) break;
      if constexpr (KR == 0)
        if (pool_full(end)) {
          select_top(p, k, k + kBlock);
          end = 0;
        }
      const uint64_t thr = p.thr;
      const int64_t vi = s + threadIdx.x, ahead = vi + kAhead * kBlock;
      const bool valid = vi < nvec;
      float f[E];
      unpack16<T>(w[u], f);
      if (ahead < nvec) w[u] = xw[ahead];
#pragma unroll
      for (int e = 0; e < E; ++e) visit(valid, valid ? f[e] : 0.0f, a + vi * E + e, thr);
    }
  }
  if constexpr (KR == 0)
    if (pool_full(end)) select_top(p, k, k + kBlock);
  // Tail: scalar, fewer than E elements.
  const int64_t j = body_end + threadIdx.x;
  visit(j < hi, j < hi ? to_float(x[j]) : 0.0f, j, p.thr);
  if constexpr (KR > 0) {
#pragma unroll
    for (int i = 0; i < KR; ++i) p.keys[threadIdx.x * KR + i] = rk[i];
    if (threadIdx.x == 0) p.n = kBlock * KR;  // finish_pool syncs before reading it
  }
  finish_pool(p, k);

  warp_merge(st, scale);
  if (threadIdx.x % 32 == 0) p.warp_state[threadIdx.x / 32] = st;
  __syncthreads();
  if (threadIdx.x == 0) {
    RowState t = p.warp_state[0];
    for (int w = 1; w < kBlock / 32; ++w) state_merge(t, p.warp_state[w], scale);
    p.total = t;
  }
  __syncthreads();
  if (splits == 1) {
    write_row(p.total, p.keys, k, scale, row, out.probs, out.indices, out.row_max, out.lse, threadIdx.x, kBlock);
    return;
  }
  for (int i = threadIdx.x; i < k; i += kBlock) ws_keys[unit * k + i] = i < p.n ? p.keys[i] : 0;
  if (threadIdx.x == 0) ws_state[unit] = p.total;
}

// One block per row: the best K of the splits' K best, states merged in part order.
__global__ void __launch_bounds__(kBlock)
    merge_kernel(int k, int splits, float scale, Out out, const RowState* ws_state, const uint64_t* ws_keys) {
  __shared__ Pool p;
  const int64_t row = blockIdx.x;
  const int n = splits * k;
  for (int i = threadIdx.x; i < n; i += kBlock) p.keys[i] = ws_keys[row * n + i];
  if (threadIdx.x == 0) {
    p.n = n;
    RowState t = ws_state[row * splits];
    for (int s = 1; s < splits; ++s) state_merge(t, ws_state[row * splits + s], scale);
    p.total = t;
  }
  finish_pool(p, k);
  write_row(p.total, p.keys, k, scale, row, out.probs, out.indices, out.row_max, out.lse, threadIdx.x, kBlock);
}

int device_sms() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 132;
  }
  return sms;
}

int max_splits(int64_t v, int64_t k) { return int(std::max<int64_t>(1, std::min<int64_t>({32, kPool / k, v / 4096}))); }

template <class T>
cudaError_t launch(const T* x, int64_t rows, int64_t ld, int v, int k, float scale, Out out, TopkCudaConfig config,
                   int splits, cudaStream_t s) {
  if (config == TopkCudaConfig::warp_per_row) {
    int n2 = 32;
    while (n2 < v) n2 <<= 1;
    const size_t smem = size_t(kWarpRows) * n2 * sizeof(uint64_t);
    const int64_t blocks = (rows + kWarpRows - 1) / kWarpRows;
    LLMK_LAUNCH(unsigned(blocks), kWarpRows * 32, smem, s, warp_row_kernel<T>)(x, rows, ld, v, k, n2, scale, out);
    return cudaGetLastError();
  }
  if (config == TopkCudaConfig::block_per_row) splits = 1;
  auto* kernel = k <= kRegK ? block_row_kernel<T, kRegK> : block_row_kernel<T, 0>;
  if (splits == 1) {
    LLMK_LAUNCH(unsigned(rows), kBlock, 0, s, kernel)(x, ld, v, k, 1, scale, out, nullptr, nullptr);
    return cudaGetLastError();
  }
  void* ws = nullptr;
  const size_t state_bytes = size_t(rows) * splits * sizeof(RowState);
  LLMK_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&ws, state_bytes + size_t(rows) * splits * k * sizeof(uint64_t), s));
  auto* st = static_cast<RowState*>(ws);
  auto* keys = reinterpret_cast<uint64_t*>(static_cast<char*>(ws) + state_bytes);
  LLMK_LAUNCH(unsigned(rows * splits), kBlock, 0, s, kernel)(x, ld, v, k, splits, scale, out, st, keys);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) {
    LLMK_LAUNCH(unsigned(rows), kBlock, 0, s, merge_kernel)(k, splits, scale, out, st, keys);
    e = cudaGetLastError();
  }
  const cudaError_t f = cudaFreeAsync(ws, s);
  return e != cudaSuccess ? e : f;
}

}  // namespace
}  // namespace llmk::topk

namespace llmk {

TopkCudaConfig softmax_topk_cuda_config(int64_t rows, int64_t vocab, int64_t k) {
  const char* fn = "softmax_topk_cuda_config";
  LLMK_CHECK_ARG(rows >= 0, fn, "rows", rows, "must be >= 0");
  LLMK_CHECK_ARG(vocab >= 1, fn, "vocab", vocab, "must be >= 1");
  LLMK_CHECK_ARG(k >= 1, fn, "k", k, "must be >= 1");
  if (vocab <= 1024) return TopkCudaConfig::warp_per_row;
  // Fewer rows than SMs: split rows so that about two blocks run per SM.
  if (rows < topk::device_sms() && topk::max_splits(vocab, k) >= 2) return TopkCudaConfig::split_row;
  return TopkCudaConfig::block_per_row;
}

void softmax_topk_cuda(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out, Stream stream,
                       TopkCudaConfig config, int splits) {
  const char* fn = "softmax_topk";
  topk::validate(fn, logits, k, temperature, out, false);
  LLMK_CHECK_ARG(logits.device == Device::cuda, fn, "logits", logits.describe(), "must be on a CUDA device");
  // the kernels' 16-byte loads start at a row's first aligned element, which needs whole elements
  LLMK_CHECK_ARG(reinterpret_cast<uintptr_t>(logits.data) % dtype_size(logits.dtype) == 0, fn, "logits",
                 logits.describe(), "data must be aligned to its element size");
  const int64_t rows = logits.rows(), v = logits.cols();
  LLMK_CHECK_ARG(v <= 1024 || k <= topk::kMaxBlockK, fn, "k", k, "must be <= 1024 on CUDA when V > 1024");
  LLMK_CHECK_ARG(config == TopkCudaConfig::auto_pick || config == TopkCudaConfig::warp_per_row ||
                     config == TopkCudaConfig::block_per_row || config == TopkCudaConfig::split_row,
                 fn, "config", int(config), "is not a TopkCudaConfig (0 auto_pick .. 3 split_row)");
  LLMK_CHECK_ARG(splits == 0 || config == TopkCudaConfig::split_row, fn, "splits", splits,
                 "must be 0 unless config is split_row (auto_pick may not pick it)");
  if (config == TopkCudaConfig::auto_pick) config = softmax_topk_cuda_config(rows, v, k);
  LLMK_CHECK_ARG(config != TopkCudaConfig::warp_per_row || v <= 1024, fn, "config", topk_cuda_config_name(config),
                 "warp_per_row needs V <= 1024");
  LLMK_CHECK_ARG(config == TopkCudaConfig::warp_per_row || k <= topk::kMaxBlockK, fn, "k", k,
                 "must be <= 1024 for the block configurations");
  if (config == TopkCudaConfig::split_row) {
    const int most = topk::max_splits(v, k);
    const int64_t r = std::max<int64_t>(rows, 1);  // B = 0 picks too (and returns below): no division by 0
    if (splits == 0) splits = std::max(2, std::min(most, int((2 * topk::device_sms() + r - 1) / r)));
    LLMK_CHECK_ARG(splits >= 2 && splits <= std::min<int64_t>({32, topk::kPool / k, v}), fn, "splits", splits,
                   "must be in [2, min(32, 4096 / k, V)]");
  }
  // one block a row (a split of a row; warp_per_row: 4 rows a block) in gridDim.x
  const int64_t grid = config == TopkCudaConfig::warp_per_row ? (rows + topk::kWarpRows - 1) / topk::kWarpRows
                       : config == TopkCudaConfig::split_row  ? rows * splits
                                                              : rows;
  LLMK_CHECK_ARG(grid <= INT32_MAX, fn, "logits", logits.describe(),
                 std::string("has more rows than one launch of ") + topk_cuda_config_name(config) + " takes (" +
                     std::to_string(grid) + " blocks > 2^31 - 1)");
  if (rows == 0) return;
  const topk::Out o{out.probs, out.indices, out.row_max, out.lse};
  const float scale = 1.0f / temperature;
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  const int64_t ld = logits.row_stride();
  cudaError_t e;
  switch (logits.dtype) {
    case DType::f16:
      e = topk::launch(logits.ptr<const f16>(), rows, ld, int(v), int(k), scale, o, config, splits, s);
      break;
    case DType::bf16:
      e = topk::launch(logits.ptr<const bf16>(), rows, ld, int(v), int(k), scale, o, config, splits, s);
      break;
    default: e = topk::launch(logits.ptr<const float>(), rows, ld, int(v), int(k), scale, o, config, splits, s);
  }
  LLMK_CUDA_CHECK(e);
}

}  // namespace llmk
