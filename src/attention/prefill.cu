// CUDA varlen causal prefill over the paged, quantized KV cache
// (attention_prefill_cuda, llmk/attention.hpp): the CPU attention_prefill's
// semantics on the device, a simple kernel on the CUDA cores (no tensor cores).
//
// Work. For one kv head hk, sequence b's queries form qo_len(b) * G rows,
// token-major: row r is token r / G, query head hk * G + r % G. One CTA of 4
// warps takes R consecutive rows of one sequence and one kv head (R = 16, 32
// or 64: the launch configuration), so the G query heads of the kv head and
// ~R/G consecutive tokens share every K/V tile the CTA loads.
// Grid: y = kv head; x = tile slots. Sequence b's tiles start at slot
// c_b = b + floor(qo_indptr[b] * G / R): c is strictly increasing and
// c_{b+1} - c_b >= ceil(qo_len(b) * G / R), so B + floor(T * G / R) slots hold
// every tile with no host-side scan of the (device) qo_indptr. A CTA finds its
// sequence by binary search over c and leaves, before any barrier, when its
// slot is a gap (at most B such CTAs).
//
// Per CTA: q rows (times scale) in shared memory; then for each tile of 32
// keys [k0, k0 + 32) below its last row's position + 1:
//  - load: warp w dequantizes rows w, w+4, .. of K and V into f32 shared
//    tiles, lane j holding elements j, j+32, .. (for int8 / int4 lane j reads
//    quant j of each 32-group: int4 low nibble of qs[j] for j < 16, high nibble
//    of qs[j-16] otherwise, as kv_dequantize_row); keys past the tile's end are 0;
//  - scores: lane j computes key j's score for its warp's RW = R/4 rows
//    (float4 loads: q rows broadcast, K rows padded to D+4 floats so 8 lanes'
//    16-byte loads hit distinct banks);
//  - online softmax in f32 per row (warp max / sum), P to shared memory;
//  - P V: lane j accumulates elements j, j+32, .. of its rows in registers.
// Causality: row r sees key p iff p <= pos(r) = kv_len - qo_len + token(r).
// Other keys get score -inf and weight exactly 0, and their V is never read
// (a warp-uniform branch on the weight), so nothing a row may not see, not
// even a NaN, reaches its output; other sequences' blocks are never loaded.
//
// Resources (D = head_dim, E = 2, 3, 4, 8 elements per lane for D <= 64, 96,
// 128, 256): shared memory R*D + 32*(D+4) + 32*D + R*32 floats (Q, K, V, P):
// R=64 D=128 72.5 KiB, R=32 D=256 100.5 KiB, R=16 D=256 82.5 KiB. Registers:
// acc [RW][E] + RW scores, m, l per thread; `nvcc -Xptxas -v` (sm_90, CUDA 13)
// reports 96-247 registers and at most 64 B spilled over the 11 instances;
// RW*E > 64 (R=64 at D > 128) is not compiled. The launcher offers a configuration only
// when its shared memory fits the device's opt-in limit (cudaDevAttr
// MaxSharedMemoryPerBlockOptin: 227 KiB on sm_90, all fit; 99 KiB on sm_86/89,
// R=32 at D=256 does not) and throws when none fits.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "attention/attn_cuda.cuh"
#include "attention/kv_checks.hpp"
#include "core/cuda_check.cuh"
#include "llmk/attention.hpp"
#include "llmk/error.hpp"
#include "llmk/tensor.hpp"

namespace llmk::attn {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kKeys = 32;  // keys per tile: one per lane
constexpr int kRows[] = {16, 32, 64};

struct PrefillArgs {
  const float* q;            // [T, Hq, D]
  const int64_t* qo_indptr;  // [B+1]
  const uint8_t* k;          // [num_blocks][Hkv][bt] rows of krow bytes
  const uint8_t* v;          // [num_blocks][Hkv][bt] rows of vrow bytes
  const int64_t* indptr;     // [B+1] page table
  const int32_t* indices;    // [indptr[B]]
  const int32_t* last_len;   // [B]
  float* out;                // [T, Hq, D]
  int64_t B, T, Hq, Hkv, G, D, bt, krow, vrow;
  int64_t rows;  // R, query rows per CTA
  float scale;
  KvType kt, vt;
};

__device__ __forceinline__ int64_t first_slot(const PrefillArgs& a, int64_t b) {
  return b + a.qo_indptr[b] * a.G / a.rows;
}

// E: elements per lane (D <= 32 * E); RW: rows per warp (R = 4 * RW).
template <int E, int RW>
__global__ void __launch_bounds__(kThreads) prefill_kernel(PrefillArgs a) {
  LLMK_DYNAMIC_SMEM(float4, smem4);
  const int64_t D = a.D, R = int64_t(RW) * kWarps, G = a.G;
  // this slot's sequence: the largest b with first_slot(b) <= slot
  const int64_t slot = blockIdx.x;
  int64_t lo = 0, hi = a.B - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (first_slot(a, mid) <= slot) lo = mid;
    else hi = mid - 1;
  }
  const int64_t b = lo, q0 = a.qo_indptr[b], qo = a.qo_indptr[b + 1] - q0;
  const int64_t r0 = (slot - first_slot(a, b)) * R;
  const int64_t r1 = min(r0 + R, min(qo, a.T - q0) * G);  // rows past num_tokens are never touched
  if (r0 < 0 || r0 >= r1) return;                         // a gap slot: the whole CTA, before any barrier

  const int64_t hk = blockIdx.y;
  const int64_t nb = a.indptr[b + 1] - a.indptr[b];
  const int64_t kv_len = nb == 0 ? 0 : (nb - 1) * a.bt + a.last_len[b];
  const int64_t base = kv_len - qo + r0 / G;            // position of the CTA's first token
  const int64_t kend = kv_len - qo + (r1 - 1) / G + 1;  // keys [0, kend) of its last row
  const int32_t* blocks = a.indices + a.indptr[b];

  float* qs = reinterpret_cast<float*>(smem4);  // [R][D]  q * scale
  float* ks = qs + R * D;                       // [32][D + 4]
  float* vs = ks + kKeys * (D + 4);             // [32][D]
  float* ps = vs + kKeys * D;                   // [R][32] softmax weights of the tile
  for (int64_t e = threadIdx.x; e < R * D; e += kThreads) {
    const int64_t r = r0 + e / D;
    qs[e] = r < r1 ? a.q[((q0 + r / G) * a.Hq + hk * G + r % G) * D + e % D] * a.scale : 0.0f;
  }

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int na = int(max(int64_t(0), min(int64_t(RW), r1 - r0 - int64_t(warp) * RW)));  // live rows of the warp
  int tok[RW];  // row's token minus the CTA's first token: row rr sees positions <= base + tok[rr]
  float m[RW], l[RW], acc[RW][E];
#pragma unroll
  for (int rr = 0; rr < RW; ++rr) {
    tok[rr] = int((r0 % G + warp * RW + rr) / G);
    m[rr] = -INFINITY, l[rr] = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) acc[rr][i] = 0.0f;
  }

  for (int64_t k0 = 0; k0 < kend; k0 += kKeys) {  // kend is CTA-uniform: the barriers are too
    __syncthreads();                              // q is stored (first tile); every warp is done with the previous tile
    for (int j = warp; j < kKeys; j += kWarps) {
      const int64_t p = k0 + j;
      const uint8_t *kr = nullptr, *vr = nullptr;
      if (p < kend) {
        const int64_t row = kv_pool_row<int64_t>(blocks[p / a.bt], a.Hkv, hk, a.bt, p % a.bt);
        kr = a.k + row * a.krow, vr = a.v + row * a.vrow;
      }
#pragma unroll
      for (int i = 0; i < E; ++i) {
        const int d = lane + 32 * i;
        if (d < D) {
          ks[j * (D + 4) + d] = kr ? load_elem(a.kt, kr, i, lane) : 0.0f;
          vs[j * D + d] = vr ? load_elem(a.vt, vr, i, lane) : 0.0f;
        }
      }
    }
    __syncthreads();

    float s[RW];
#pragma unroll
    for (int rr = 0; rr < RW; ++rr) s[rr] = 0.0f;
    const float4* k4 = reinterpret_cast<const float4*>(ks + lane * (D + 4));
    const float4* q4 = reinterpret_cast<const float4*>(qs + int64_t(warp) * RW * D);
    const int64_t D4 = D / 4;
#pragma unroll 2
    for (int64_t d4 = 0; d4 < D4; ++d4) {
      const float4 kx = k4[d4];
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) {
        const float4 qx = q4[rr * D4 + d4];
        s[rr] = fmaf(qx.w, kx.w, fmaf(qx.z, kx.z, fmaf(qx.y, kx.y, fmaf(qx.x, kx.x, s[rr]))));
      }
    }
    const int64_t off = k0 + lane - base;  // key k0 + lane is visible to row rr iff off <= tok[rr]
#pragma unroll
    for (int rr = 0; rr < RW; ++rr) {
      const bool ok = rr < na && off <= tok[rr];
      const float sc = ok ? s[rr] : -INFINITY;
      const float mn = fmaxf(m[rr], warp_max(sc));
      const float mu = mn == -INFINITY ? 0.0f : mn;  // a row that has seen no key yet
      const float alpha = expf(m[rr] - mu);
      // -0 marks a key the row may not see (expf never returns -0): its V is never
      // multiplied in, while a visible key whose weight underflows to +0 still is
      // (0 x a NaN / inf V gives NaN, as on the CPU and in decode)
      const float p = ok ? expf(sc - mu) : -0.0f;
      l[rr] = l[rr] * alpha + warp_sum(p);
      m[rr] = mn;
      ps[(warp * RW + rr) * kKeys + lane] = p;
#pragma unroll
      for (int i = 0; i < E; ++i) acc[rr][i] *= alpha;
    }
    __syncwarp();
    const int nk = int(min(int64_t(kKeys), kend - k0));
    for (int j = 0; j < nk; ++j) {
      float vx[E];
#pragma unroll
      for (int i = 0; i < E; ++i) vx[i] = lane + 32 * i < D ? vs[j * D + lane + 32 * i] : 0.0f;
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) {
        const float p = ps[(warp * RW + rr) * kKeys + j];  // broadcast: the branch is warp-uniform
        if (!signbit(p)) {
#pragma unroll
          for (int i = 0; i < E; ++i) acc[rr][i] = fmaf(p, vx[i], acc[rr][i]);
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < RW; ++rr) {
    if (rr >= na) break;
    const int64_t r = r0 + int64_t(warp) * RW + rr;
    float* o = a.out + ((q0 + r / G) * a.Hq + hk * G + r % G) * D;
#pragma unroll
    for (int i = 0; i < E; ++i)
      if (lane + 32 * i < D) o[lane + 32 * i] = acc[rr][i] / l[rr];
  }
}

int64_t elems_per_lane(int64_t D) { return D <= 64 ? 2 : D <= 96 ? 3 : D <= 128 ? 4 : 8; }
bool compiled(int64_t R, int64_t D) { return R / kWarps * elems_per_lane(D) <= 64; }
size_t smem_bytes(int64_t R, int64_t D) {
  return size_t(R * D + kKeys * (D + 4) + kKeys * D + R * kKeys) * sizeof(float);
}

template <int E, int RW>
cudaError_t launch(const PrefillArgs& a, dim3 grid, size_t smem, cudaStream_t s) {
  if constexpr (RW * E > 64) {
    return cudaErrorInvalidConfiguration;  // never offered (compiled() is false)
  } else {
    LLMK_CUDA_RETURN_IF_ERROR(cuda::allow_dynamic_smem(prefill_kernel<E, RW>, smem));
    LLMK_LAUNCH(grid, kThreads, smem, s, prefill_kernel<E, RW>)(a);
    return cudaGetLastError();
  }
}

template <int E>
cudaError_t launch_rows(const PrefillArgs& a, dim3 grid, size_t smem, cudaStream_t s) {
  switch (a.rows) {
    case 16: return launch<E, 4>(a, grid, smem, s);
    case 32: return launch<E, 8>(a, grid, smem, s);
    default: return launch<E, 16>(a, grid, smem, s);
  }
}

int64_t grid_slots(int64_t B, int64_t T, int64_t G, int64_t R) { return B + T * G / R; }

// The row counts this device can run for head_dim D, the pick first: the
// largest R (most K/V reuse per load) that still gives >= 2 CTAs per SM, else
// the smallest (most CTAs).
std::vector<int> configs(int64_t D, int64_t G, int64_t Hkv, int64_t T, int64_t B) {
  int dev = 0, optin = 0, sms = 0;
  LLMK_CUDA_CHECK(cudaGetDevice(&dev));
  LLMK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  LLMK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  std::vector<int> ok;
  for (int R : kRows)
    if (compiled(R, D) && smem_bytes(R, D) <= size_t(optin)) ok.push_back(R);
  if (ok.empty())
    throw RuntimeError("attention_prefill_cuda: head_dim " + std::to_string(D) + " needs " +
                       std::to_string(smem_bytes(kRows[0], D)) + " B of shared memory per CTA; this device allows " +
                       std::to_string(optin));
  int pick = ok.front();
  for (int R : ok)
    if (grid_slots(B, T, G, R) * Hkv >= 2 * int64_t(sms)) pick = R;
  std::vector<int> v{pick};
  for (int R : ok)
    if (R != pick) v.push_back(R);
  return v;
}

}  // namespace
}  // namespace llmk::attn

namespace llmk {

std::vector<int> attention_prefill_cuda_configs(const KvLayerView& kv, int64_t n_heads, int64_t num_tokens,
                                                int64_t num_seqs) {
  return attn::configs(kv.head_dim, n_heads / std::max<int64_t>(1, kv.n_kv_heads), kv.n_kv_heads, num_tokens, num_seqs);
}

void attention_prefill_cuda(const float* q, const int64_t* qo_indptr, int64_t T, const KvLayerView& kv,
                            const PageTableView& p, int64_t Hq, float scale, float* out, Stream stream, int cta_rows) {
  const char* fn = "attention_prefill_cuda";
  LLMK_CHECK_ARG(kv.device == Device::cuda, fn, "kv.device", device_name(kv.device), "must be cuda");
  LLMK_CHECK_ARG(p.device == Device::cuda, fn, "pages.device", device_name(p.device), "must be cuda");
  LLMK_CHECK_ARG(kv.k != nullptr && kv.v != nullptr, fn, "kv", "null pool", "k and v pools must not be null");
  LLMK_CHECK_ARG(int(kv.k_type) < kKvTypeCount, fn, "kv.k_type", int(kv.k_type), "must be a KvType");
  LLMK_CHECK_ARG(int(kv.v_type) < kKvTypeCount, fn, "kv.v_type", int(kv.v_type), "must be a KvType");
  attn::check_pools_aligned(fn, kv);
  LLMK_CHECK_ARG(kv.head_dim >= 16 && kv.head_dim <= 256 && kv.head_dim % 16 == 0, fn, "kv.head_dim", kv.head_dim,
                 "must be a multiple of 16 in [16, 256]");
  LLMK_CHECK_ARG(kv.block_tokens >= 1 && kv.block_tokens <= (int64_t(1) << 20), fn, "kv.block_tokens", kv.block_tokens,
                 "must be in [1, 2^20]");
  LLMK_CHECK_ARG(kv.n_kv_heads >= 1 && kv.n_kv_heads <= 65535, fn, "kv.n_kv_heads", kv.n_kv_heads,
                 "must be in [1, 65535] (the grid's y)");
  LLMK_CHECK_ARG(kv.num_blocks >= 1, fn, "kv.num_blocks", kv.num_blocks, "must be >= 1");
  LLMK_CHECK_ARG(Hq >= 1 && Hq % kv.n_kv_heads == 0 && Hq / kv.n_kv_heads <= 256, fn, "n_heads", Hq,
                 "must be a multiple of kv.n_kv_heads = " + std::to_string(kv.n_kv_heads) + " (at most 256x it)");
  LLMK_CHECK_ARG(std::isfinite(scale), fn, "scale", scale, "must be finite");
  LLMK_CHECK_ARG(p.num_seqs >= 1 && p.num_seqs <= (int64_t(1) << 30), fn, "pages.num_seqs", p.num_seqs,
                 "must be in [1, 2^30]");
  LLMK_CHECK_ARG(p.indptr && p.indices && p.last_len, fn, "pages", "null array",
                 "indptr, indices, last_len must be set");
  LLMK_CHECK_ARG(qo_indptr != nullptr, fn, "qo_indptr", qo_indptr, "must not be null");
  LLMK_CHECK_ARG(T >= 0 && T <= (int64_t(1) << 31), fn, "num_tokens", T, "must be in [0, 2^31]");
  if (T == 0) return;
  LLMK_CHECK_ARG(q != nullptr, fn, "q", q, "must not be null");
  LLMK_CHECK_ARG(out != nullptr, fn, "out", out, "must not be null");
  const int64_t G = Hq / kv.n_kv_heads;
  const std::vector<int> cfgs = attention_prefill_cuda_configs(kv, Hq, T, p.num_seqs);
  std::string offered;
  for (int R : cfgs) offered += " " + std::to_string(R);
  LLMK_CHECK_ARG(cta_rows == 0 || std::find(cfgs.begin(), cfgs.end(), cta_rows) != cfgs.end(), fn, "cta_rows", cta_rows,
                 "must be 0 or one of attention_prefill_cuda_configs():" + offered);
  const int64_t R = cta_rows ? cta_rows : cfgs.front();
  const int64_t slots = attn::grid_slots(p.num_seqs, T, G, R);
  LLMK_CHECK_ARG(slots <= int64_t(INT32_MAX), fn, "num_tokens", T,
                 "gives " + std::to_string(slots) + " CTAs per kv head, more than a grid holds");

  attn::PrefillArgs a{};
  cuda::StreamBuffer ws(attn::rotated_queries_bytes(kv, T * Hq), cudaStream_t(stream));
  a.q = attn::queries_for_cuda(q, kv, T * Hq, cudaStream_t(stream), ws.at<float>(0));  // H q against rotated K
  a.qo_indptr = qo_indptr, a.out = out;
  a.k = static_cast<const uint8_t*>(kv.k), a.v = static_cast<const uint8_t*>(kv.v);
  a.indptr = p.indptr, a.indices = p.indices, a.last_len = p.last_len;
  a.B = p.num_seqs, a.T = T, a.Hq = Hq, a.Hkv = kv.n_kv_heads, a.G = G, a.D = kv.head_dim, a.bt = kv.block_tokens;
  a.krow = kv_row_bytes(kv.k_type, kv.head_dim), a.vrow = kv_row_bytes(kv.v_type, kv.head_dim);
  a.rows = R, a.scale = scale, a.kt = kv.k_type, a.vt = kv.v_type;
  const dim3 grid(unsigned(slots), unsigned(kv.n_kv_heads));
  const size_t smem = attn::smem_bytes(R, a.D);
  const cudaStream_t s = cudaStream_t(stream);
  cudaError_t err;
  switch (attn::elems_per_lane(a.D)) {
    case 2: err = attn::launch_rows<2>(a, grid, smem, s); break;
    case 3: err = attn::launch_rows<3>(a, grid, smem, s); break;
    case 4: err = attn::launch_rows<4>(a, grid, smem, s); break;
    default: err = attn::launch_rows<8>(a, grid, smem, s); break;
  }
  LLMK_CUDA_CHECK(err);
}

}  // namespace llmk
