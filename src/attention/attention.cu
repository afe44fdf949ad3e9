// CUDA kernels of the paged KV cache (llmk/attention.hpp):
//  - kv_append_kernel: quantizes K/V rows into the pools through the slot
//    map, one warp per 32-value group (lane j = element j of the group), with
//    the reference quantizer's exact arithmetic (f16 scale rounded first,
//    x * (1/d) rounded half-to-even), so device and host caches hold the same bits;
//  - decode_kernel<T, E, NG>: one CTA of 4 warps per (sequence, kv-head,
//    NG = 1, 4 or 8 query heads of its group, context split). The heads'
//    queries sit in registers; each warp walks every 4th run of kUnroll tokens
//    of the split, loading kUnroll K and V rows at once (lane j holds
//    elements j, j+32, .., so for int8/int4 lane j reads quant j of each
//    32-group), dequantizing in registers. A run's NG x kUnroll scores are
//    summed over the warp by one butterfly, a lane then does the online
//    softmax of one score, and the weights are broadcast for P.V. The 4 warps
//    merge in shared memory; with one split the CTA writes out, otherwise
//    (m, l, acc) partials that merge_kernel combines with the exact
//    log-sum-exp merge. docs/kv_cache.md counts its instructions. This is
//    the lane_per_element kernel; token_tiles and token_tiles_mma, for int8 /
//    int4 caches, are in decode_tiles.cu, and all share attn_decode.cuh.
//  - hadamard_rows_kernel: the Hadamard rotation of K rows before an append
//    and of the queries before decode when the cache stores rotated K
//    (KvLayerView::k_rotated), bitwise like the host's hadamard_transform.
// The split count aims at >= 2 CTAs per SM when sequences x kv-heads are few.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <type_traits>
#include <vector>

#include "attention/attn_decode.cuh"
#include "core/cuda_check.cuh"
#include "llmk/attention.hpp"

namespace llmk::attn {
namespace {

constexpr int ilog2(int n) { return n <= 1 ? 0 : 1 + ilog2(n / 2); }
// The lane holding score k of a step's N after decode_kernel's butterfly: the
// offset 16 >> t is set where bit N >> (t + 1) of k is.
constexpr int lane_of(int k, int N) {
  int lane = 0;
  for (int t = 0; (N >> (t + 1)) > 0; ++t)
    if (k & (N >> (t + 1))) lane |= 16 >> t;
  return lane;
}

// The butterfly of decode_kernel's step, one offset O a call (H values kept
// of 2H), then the plain all-reduce over the offsets left: v[0] ends as the
// warp's sum of score idx. Recursion keeps every index static (v in registers).
template <int N, int H = N / 2, int O = 16>
__device__ __forceinline__ void butterfly(float (&v)[N], int lane) {
  if constexpr (H >= 1) {
    const bool hi = lane & O;
#pragma unroll
    for (int k = 0; k < H; ++k) {
      const float send = hi ? v[k] : v[k + H], keep = hi ? v[k + H] : v[k];
      v[k] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    butterfly<N, H / 2, O / 2>(v, lane);
  } else {
#pragma unroll
    for (int o = O; o > 0; o /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
  }
}

// T: the K and V type, or -1 for mixed types read at run time. E: elements
// per lane (head_dim <= 32 * E). NG: query heads a CTA takes (1, 4 or 8; the
// last CTA of a kv head may take fewer), so queries and accumulators in
// registers scale with the group and the head size.
template <int T, int E, int NG>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(DecodeArgs a) {
  LLMK_DYNAMIC_SMEM(float, smem);  // q: [NG][D]; then per warp: [NG][D + 2]
  const int64_t b = blockIdx.x, hk = blockIdx.y / a.groups, split = blockIdx.z;
  const int64_t G = a.Hq / a.Hkv, g0 = (blockIdx.y % a.groups) * NG;
  const int ng = int(min(int64_t(NG), G - g0));
  const int D = int(a.D);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int dl = D - lane;  // element lane + 32 i is in the head iff 32 i < dl
  float* qs = smem;
  load_queries(a, qs, NG, ng, b, hk, g0);
  __syncthreads();
  const SplitRange range = split_range(a, b, split, 16);
  const int64_t k0 = max(range.k0, range.lo), k1 = range.k1;  // any start works here: no masked positions
  const int32_t* blocks = range.blocks;

  float qr[NG][E];
#pragma unroll
  for (int g = 0; g < NG; ++g)
#pragma unroll
    for (int i = 0; i < E; ++i) qr[g][i] = (g < ng && 32 * i < dl) ? qs[g * D + lane + 32 * i] : 0.0f;
  // A step's N = NG x kUnroll scores (index g * kUnroll + u) are summed over
  // the warp by a butterfly: at offsets 16, 8, .. (kLog of them) each lane
  // sends half of the values it holds and adds the other half's partner, so a
  // lane ends holding the sum of score idx (lane_of inverts it), and the rest
  // of the offsets are a plain all-reduce. That is N - 1 + 5 - kLog shuffles
  // a step, not 5 N. The lane then does the online softmax of that score's
  // head (m_own, l_own: replicated in the kUnroll lanes of the head), and the
  // weights are broadcast for P.V.
  constexpr int N = NG * kUnroll, kLog = ilog2(N);
  static_assert(kUnroll == 4, "the u bits of idx are its two lowest");
  int idx = 0;
#pragma unroll
  for (int t = 0; t < kLog; ++t)
    if (lane & (16 >> t)) idx |= N >> (t + 1);
  constexpr int ou0 = 16 >> (kLog - 1), ou1 = 16 >> (kLog - 2);  // the offsets of idx bits 0 and 1
  float m_own = -INFINITY, l_own = 0.0f, acc[NG][E];
#pragma unroll
  for (int g = 0; g < NG; ++g)
#pragma unroll
    for (int i = 0; i < E; ++i) acc[g][i] = 0.0f;

  // One step: the warp's tokens p0 .. p0 + kUnroll - 1, their rows found by
  // walking the block table from p0 (one division a step). Rows are 32-bit
  // (the pool has < 2^32 rows: decode_cuda checks). kFull: all kUnroll are
  // before k1, so no token needs a check (every step but a warp's last).
  const uint32_t bt = uint32_t(a.bt), hkv = uint32_t(a.Hkv), hk32 = uint32_t(hk);
  const auto step = [&](int64_t p0, auto full) {
    constexpr bool kFull = decltype(full)::value;
    float kx[kUnroll][E], vx[kUnroll][E];
    bool valid[kUnroll];
    const int64_t blk0 = p0 / a.bt;
    int blk = 0;
    uint32_t off = uint32_t(p0 - blk0 * a.bt);
    uint32_t row = kv_pool_row(uint32_t(blocks[blk0]), hkv, hk32, bt, off);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      valid[u] = kFull || p0 + u < k1;
      if (u > 0 && valid[u]) {
        if (++off == bt) off = 0, row = kv_pool_row(uint32_t(blocks[blk0 + ++blk]), hkv, hk32, bt, 0u);
        else ++row;
      }
      const uint8_t* kr = a.k + uint64_t(row) * a.krow;
      const uint8_t* vr = a.v + uint64_t(row) * a.vrow;
#pragma unroll
      for (int i = 0; i < E; ++i) {
        const bool e = valid[u] && 32 * i < dl;
        kx[u][i] = e ? load_any<T>(a.kt, kr, i, lane) : 0.0f;
        vx[u][i] = e ? load_any<T>(a.vt, vr, i, lane) : 0.0f;
      }
    }
    float v[N];  // score g * kUnroll + u, this lane's share of it
#pragma unroll
    for (int g = 0; g < NG; ++g)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) d = fmaf(qr[g][i], kx[u][i], d);
        v[g * kUnroll + u] = d;
      }
    butterfly<N>(v, lane);
    const float sc = (kFull || p0 + idx % kUnroll < k1) ? v[0] : -INFINITY;
    float mt = fmaxf(sc, __shfl_xor_sync(0xffffffffu, sc, ou0));
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, ou1));
    const float mn = fmaxf(m_own, mt);
    // every score so far -inf: those keys get weight 0 (2^(-inf - 0)), not
    // 2^(-inf + inf) = NaN; alpha is 0 then, on acc and l still 0
    const float mu = mn == -INFINITY ? 0.0f : mn;
    const float alpha = exp2_fast(m_own - mu), p = exp2_fast(sc - mu);
    float psum = p + __shfl_xor_sync(0xffffffffu, p, ou0);
    psum += __shfl_xor_sync(0xffffffffu, psum, ou1);
    l_own = l_own * alpha + psum;
    m_own = mn;
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      const float al = __shfl_sync(0xffffffffu, alpha, lane_of(g * kUnroll, N));
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) w[u] = __shfl_sync(0xffffffffu, p, lane_of(g * kUnroll + u, N));
#pragma unroll
      for (int i = 0; i < E; ++i) {
        float x = acc[g][i] * al;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) x = fmaf(w[u], vx[u][i], x);
        acc[g][i] = x;
      }
    }
  };
  int64_t p0 = k0 + int64_t(warp) * kUnroll;
  for (; p0 + kUnroll <= k1; p0 += kWarps * kUnroll) step(p0, std::true_type{});
  if (p0 < k1) step(p0, std::false_type{});

  float mg[NG], lg[NG];  // each head's (m, l), from a lane holding it
#pragma unroll
  for (int g = 0; g < NG; ++g) {
    mg[g] = __shfl_sync(0xffffffffu, m_own, lane_of(g * kUnroll, N));
    lg[g] = __shfl_sync(0xffffffffu, l_own, lane_of(g * kUnroll, N));
  }
  merge_warps<E, NG>(a, smem + NG * D, mg, lg, acc, ng, g0, split);
}

// out[b, h, :] from the splits' partials (exact log-sum-exp merge).
__global__ void merge_kernel(const float* part, int splits, int64_t D, float* out) {
  const int64_t bh = blockIdx.x;
  const float* p = part + bh * splits * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s)
    if (p[s * (D + 2) + 1] > 0.0f) M = fmaxf(M, p[s * (D + 2)]);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    float L = 0.0f, o = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float* ps = p + s * (D + 2);
      if (ps[1] == 0.0f) continue;
      const float w = exp2f(ps[0] - M);
      L += w * ps[1];
      o += w * ps[2 + j];
    }
    out[bh * D + j] = o / L;
  }
}

// One warp per (token, kv-head, 32-group) of K or V.
template <KvType T>
__device__ void quantize_group(const float* x, int n, uint8_t* dst, int lane) {
  const float v = lane < n ? x[lane] : 0.0f;
  if constexpr (T == KvType::f32) {
    if (lane < n) reinterpret_cast<float*>(dst)[lane] = v;
  } else if constexpr (T == KvType::f16) {
    // NaN: sign and payload kept, quiet (as llmk::f32_to_f16_bits; __float2half_rn gives 0x7fff)
    const uint32_t u = __float_as_uint(v), au = u & 0x7fffffffu;
    const uint16_t h = au > 0x7f800000u ? uint16_t(((u >> 16) & 0x8000u) | 0x7e00u | ((au >> 13) & 0x3ffu))
                                        : __half_as_ushort(__float2half_rn(v));
    if (lane < n) reinterpret_cast<uint16_t*>(dst)[lane] = h;
  } else if constexpr (T == KvType::bf16) {
    // round to nearest even, NaN kept quiet (as llmk::f32_to_bf16_bits)
    uint32_t u = __float_as_uint(v);
    const uint16_t r = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u)
                                                       : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    if (lane < n) reinterpret_cast<uint16_t*>(dst)[lane] = r;
  } else if constexpr (T == KvType::int8) {
    BlockQ8* b = reinterpret_cast<BlockQ8*>(dst);
    if (__any_sync(0xffffffffu, lane < n && !isfinite(v))) {  // NaN scale, quants 0 (as the host)
      b->qs[lane] = 0;
      if (lane == 0) b->d = 0x7e00;
      return;
    }
    const float amax = warp_max(fabsf(v));
    const uint16_t db = __half_as_ushort(__float2half_rn(amax / 127.0f));
    const float d = f16f(db), id = d > 0.0f ? 1.0f / d : 0.0f;
    const float q = fminf(fmaxf(rintf(__fmul_rn(v, id)), -127.0f), 127.0f);
    b->qs[lane] = lane < n ? int8_t(q) : int8_t(0);
    if (lane == 0) b->d = db;
  } else {
    BlockQ4* b = reinterpret_cast<BlockQ4*>(dst);
    if (__any_sync(0xffffffffu, lane < n && !isfinite(v))) {  // NaN scale and min, quants 0 (as the host)
      if (lane < 16) b->qs[lane] = 0;
      if (lane == 0) b->d = b->m = 0x7e00;
      return;
    }
    // + 0: a zero min / max is stored as +0 whichever zero the tree kept (as the host)
    const float lo = __fadd_rn(warp_min(lane < n ? v : INFINITY), 0.0f);
    const float hi = __fadd_rn(warp_max(lane < n ? v : -INFINITY), 0.0f);
    const uint16_t db = __half_as_ushort(__float2half_rn(__fdiv_rn(__fsub_rn(hi, lo), 15.0f)));
    const uint16_t mb = __half_as_ushort(__float2half_rn(lo));
    const float d = f16f(db), m = f16f(mb), id = d > 0.0f ? 1.0f / d : 0.0f;
    const int q = lane < n ? int(fminf(fmaxf(rintf(__fmul_rn(__fsub_rn(v, m), id)), 0.0f), 15.0f)) : 0;
    const int hiq = __shfl_down_sync(0xffffffffu, q, 16);
    if (lane < 16) b->qs[lane] = uint8_t(q | (hiq << 4));
    if (lane == 0) b->d = db, b->m = mb;
  }
}

// One warp per (token, kv-head, 32-group, K or V).
__global__ void kv_append_kernel(const float* k, const float* v, const int64_t* slots, int64_t T, int64_t H, int64_t D,
                                 int64_t bt, int64_t num_slots, KvType kt, KvType vt, int64_t krow, int64_t vrow,
                                 uint8_t* kp, uint8_t* vp) {
  const int64_t G = (D + 31) / 32;
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= T * H * G * 2) return;  // whole warps exit together
  const int kv = int(w % 2);
  const int64_t g = w / 2 % G, h = w / 2 / G % H, t = w / 2 / G / H;
  const int64_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;  // a padding slot (-1) or out of the pool: skipped (warp-uniform)
  const int64_t row = kv_pool_row(slot / bt, H, h, bt, slot % bt);
  const float* x = (kv ? v : k) + (t * H + h) * D + g * 32;
  const int n = int(min(int64_t(32), D - g * 32));
  uint8_t* dst = kv ? vp + row * vrow : kp + row * krow;
  switch (kv ? vt : kt) {  // warp-uniform
    case KvType::f32: quantize_group<KvType::f32>(x, n, dst + g * 32 * 4, lane); break;
    case KvType::f16: quantize_group<KvType::f16>(x, n, dst + g * 32 * 2, lane); break;
    case KvType::bf16: quantize_group<KvType::bf16>(x, n, dst + g * 32 * 2, lane); break;
    case KvType::int8: quantize_group<KvType::int8>(x, n, dst + g * sizeof(BlockQ8), lane); break;
    case KvType::int4: quantize_group<KvType::int4>(x, n, dst + g * sizeof(BlockQ4), lane); break;
  }
}

// y[rows][D] = x[rows][D] with each block of `block` values rotated: the
// operations of hadamard_transform (llmk/kv_quant.hpp) in its order (stages
// h = 1, 2, .. ascending, a + b and a - b rounded to nearest, then times c), so
// the bits equal the host's. One warp per row; lane l holds elements l + 32 i
// (i < E, D <= 32 E). Stages h < 32 pair lane l with lane l ^ h: the lane
// with bit h clear keeps a + b (its own value + the partner's), the other
// a - b (the partner's - its own). Stages h >= 32 pair registers i and
// i + h / 32 of the same lane. Blocks are aligned to multiples of `block`, so a
// stage h < block never crosses one. Elements >= D are 0 and never stored.
template <int E>
__global__ void hadamard_rows_kernel(const float* x, float* y, int64_t rows, int64_t D, int block, float c) {
  const int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;  // whole warps exit together (blockDim is a multiple of 32)
  float v[E];
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] = lane + 32 * i < D ? x[r * D + lane + 32 * i] : 0.0f;
#pragma unroll
  for (int h = 1; h < 32; h <<= 1) {
    if (h >= block) break;
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const float p = __shfl_xor_sync(0xffffffffu, v[i], h);
      v[i] = (lane & h) ? __fsub_rn(p, v[i]) : __fadd_rn(v[i], p);
    }
  }
#pragma unroll
  for (int hh = 1; hh < E; hh <<= 1) {
    if (32 * hh >= block) break;
#pragma unroll
    for (int i = 0; i < E; ++i)
      if (!(i & hh) && i + hh < E) {
        const float a = v[i], b = v[i + hh];
        v[i] = __fadd_rn(a, b);
        v[i + hh] = __fsub_rn(a, b);
      }
  }
#pragma unroll
  for (int i = 0; i < E; ++i)
    if (lane + 32 * i < D) y[r * D + lane + 32 * i] = __fmul_rn(v[i], c);
}

template <int T>
cudaError_t launch_decode_g(const DecodeArgs& a, int64_t B, cudaStream_t s) {
  return by_layout(a, [&]<int E, int NG>() {
    const dim3 grid(unsigned(B), unsigned(a.Hkv * a.groups), unsigned(a.splits));
    const size_t smem = size_t(NG * a.D + kWarps * NG * (a.D + 2)) * sizeof(float);
    LLMK_CUDA_RETURN_IF_ERROR(cuda::allow_dynamic_smem(decode_kernel<T, E, NG>, smem));
    LLMK_LAUNCH(grid, kWarps * 32, smem, s, decode_kernel<T, E, NG>)(a);
    return cudaGetLastError();
  });
}

// lane_per_element: compiled per type when K and V share it, else one
// run-time-typed kernel.
cudaError_t launch_lanes(const DecodeArgs& a, int64_t B, cudaStream_t s) {
  if (a.kt != a.vt) return launch_decode_g<-1>(a, B, s);
  switch (a.kt) {
    case KvType::f32: return launch_decode_g<int(KvType::f32)>(a, B, s);
    case KvType::f16: return launch_decode_g<int(KvType::f16)>(a, B, s);
    case KvType::bf16: return launch_decode_g<int(KvType::bf16)>(a, B, s);
    case KvType::int8: return launch_decode_g<int(KvType::int8)>(a, B, s);
    case KvType::int4: return launch_decode_g<int(KvType::int4)>(a, B, s);
  }
  return cudaErrorInvalidValue;
}

// The chosen kernel (token_tiles*: decode_cuda_token_tiles_fit holds), then
// the split merge.
cudaError_t dispatch_decode(const DecodeArgs& a, int64_t B, DecodeCudaKernel kernel, cudaStream_t s) {
  LLMK_CUDA_RETURN_IF_ERROR(kernel == DecodeCudaKernel::lane_per_element
                                ? launch_lanes(a, B, s)
                                : launch_decode_tiles(a, B, kernel == DecodeCudaKernel::token_tiles_mma, s));
  if (a.splits > 1) {
    LLMK_LAUNCH(unsigned(B * a.Hq), 128, 0, s, merge_kernel)(a.part, a.splits, a.D, a.out);
    LLMK_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return cudaSuccess;
}

// The current device's SM count (each device's, asked once), or 132 (an
// H100 / H200) where the device does not answer.
int sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return (cudaGetLastError(), 132);
  static std::mutex mu;
  static std::vector<int> by_device;
  const std::lock_guard<std::mutex> lock(mu);
  if (by_device.size() <= size_t(dev)) by_device.resize(size_t(dev) + 1, 0);
  int& n = by_device[size_t(dev)];
  if (n == 0) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
      return (cudaGetLastError(), 132);
    n = sms;
  }
  return n;
}

}  // namespace

cudaError_t hadamard_rows_cuda(const float* x, float* y, int64_t rows, int64_t D, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const int block = int(kv_rotation_block(D));
  const float c = float(1.0 / std::sqrt(double(block)));  // as hadamard_transform
  const unsigned grid = unsigned((rows + 7) / 8);         // 8 warps (rows) per CTA
  if (D <= 64) LLMK_LAUNCH(grid, 256, 0, s, hadamard_rows_kernel<2>)(x, y, rows, D, block, c);
  else if (D <= 96) LLMK_LAUNCH(grid, 256, 0, s, hadamard_rows_kernel<3>)(x, y, rows, D, block, c);
  else if (D <= 128) LLMK_LAUNCH(grid, 256, 0, s, hadamard_rows_kernel<4>)(x, y, rows, D, block, c);
  else LLMK_LAUNCH(grid, 256, 0, s, hadamard_rows_kernel<8>)(x, y, rows, D, block, c);
  return cudaGetLastError();
}

size_t rotated_queries_bytes(const KvLayerView& kv, int64_t rows) {
  return kv.k_rotated ? size_t(rows * kv.head_dim) * sizeof(float) : 0;
}

const float* queries_for_cuda(const float* q, const KvLayerView& kv, int64_t rows, cudaStream_t s, float* scratch) {
  if (!kv.k_rotated) return q;
  LLMK_CUDA_CHECK(hadamard_rows_cuda(q, scratch, rows, kv.head_dim, s));
  return scratch;
}

int decode_cuda_splits(int64_t work, int64_t max_kv_len) {
  const int64_t want = (2 * int64_t(sm_count()) + work - 1) / work;  // >= 2 CTAs per SM
  return int(std::clamp<int64_t>(std::min(want, (max_kv_len + 255) / 256), 1, 256));
}

void decode_cuda(const float* q, const KvLayerView& kv, const PageTableView& p, int64_t Hq, float scale, float* out,
                 int splits, int64_t window, DecodeCudaKernel kernel, Stream stream) {
  DecodeArgs a{};
  a.q = q, a.k = static_cast<const uint8_t*>(kv.k), a.v = static_cast<const uint8_t*>(kv.v);
  a.indptr = p.indptr, a.indices = p.indices, a.last_len = p.last_len, a.out = out;
  a.Hq = Hq, a.Hkv = kv.n_kv_heads, a.D = kv.head_dim, a.bt = kv.block_tokens;
  a.krow = uint32_t(kv_row_bytes(kv.k_type, kv.head_dim)), a.vrow = uint32_t(kv_row_bytes(kv.v_type, kv.head_dim));
  const int NG = heads_per_cta(Hq / kv.n_kv_heads);
  a.groups = int((Hq / kv.n_kv_heads + NG - 1) / NG);
  a.splits = splits, a.window = window, a.scale = scale, a.kt = kv.k_type, a.vt = kv.v_type;
  // this launch's scratch: the split partials, then the rotated queries
  const cudaStream_t s = cudaStream_t(stream);
  const size_t part_bytes = splits > 1 ? size_t(p.num_seqs * Hq * splits * (kv.head_dim + 2)) * sizeof(float) : 0;
  const size_t part_aligned = (part_bytes + 255) / 256 * 256;
  cuda::StreamBuffer ws(part_aligned + rotated_queries_bytes(kv, p.num_seqs * Hq), s);
  if (splits > 1) a.part = ws.at<float>(0);
  a.q = queries_for_cuda(q, kv, p.num_seqs * Hq, s, ws.at<float>(int64_t(part_aligned)));  // H q against rotated K
  LLMK_CUDA_CHECK(dispatch_decode(a, p.num_seqs, kernel, s));
  ws.release();
}

}  // namespace llmk::attn

namespace llmk {
void kv_append_cuda(const KvLayerView& kv, const float* k, const float* v, const int64_t* slots, int64_t T,
                    Stream stream) {
  const char* fn = "kv_append_cuda";
  LLMK_CHECK_ARG(kv.device == Device::cuda, fn, "kv.device", device_name(kv.device), "must be cuda");
  LLMK_CHECK_ARG(kv.k && kv.v, fn, "kv", "null pool", "k and v pools must not be null");
  attn::check_pools_aligned(fn, kv);
  LLMK_CHECK_ARG(kv.head_dim >= 16 && kv.head_dim <= 256 && kv.head_dim % 16 == 0, fn, "kv.head_dim", kv.head_dim,
                 "must be a multiple of 16 in [16, 256]");
  LLMK_CHECK_ARG(int(kv.k_type) < kKvTypeCount, fn, "kv.k_type", int(kv.k_type), "must be a KvType");
  LLMK_CHECK_ARG(int(kv.v_type) < kKvTypeCount, fn, "kv.v_type", int(kv.v_type), "must be a KvType");
  LLMK_CHECK_ARG(kv.block_tokens >= 1 && kv.block_tokens <= (int64_t(1) << 20), fn, "kv.block_tokens", kv.block_tokens,
                 "must be in [1, 2^20]");
  LLMK_CHECK_ARG(kv.n_kv_heads >= 1, fn, "kv.n_kv_heads", kv.n_kv_heads, "must be >= 1");
  LLMK_CHECK_ARG(kv.num_blocks >= 1, fn, "kv.num_blocks", kv.num_blocks, "must be >= 1");
  LLMK_CHECK_ARG(T >= 0, fn, "num_tokens", T, "must be >= 0");
  LLMK_CHECK_ARG(T == 0 || (k && v && slots), fn, "k/v/slots", "null", "must not be null");
  // two warps (K, V) a (token, kv head, 32-group), 8 warps a CTA: the grid must fit 2^31 - 1 CTAs
  LLMK_CHECK_ARG(double(T) * double(kv.n_kv_heads * ((kv.head_dim + 31) / 32)) * 2 / 8 < 2147483647.0, fn, "num_tokens",
                 T, "times n_kv_heads x head_dim / 32 / 4 must be < 2^31 (CTAs of one launch)");
  if (T == 0) return;
  cuda::StreamBuffer ws(kv.k_rotated ? size_t(T * kv.n_kv_heads * kv.head_dim) * sizeof(float) : 0,
                        cudaStream_t(stream));
  if (kv.k_rotated) {  // quantize H k: rotate the rows into this launch's scratch first
    float* kr = ws.at<float>(0);
    LLMK_CUDA_CHECK(attn::hadamard_rows_cuda(k, kr, T * kv.n_kv_heads, kv.head_dim, cudaStream_t(stream)));
    k = kr;
  }
  const int64_t warps = T * kv.n_kv_heads * ((kv.head_dim + 31) / 32) * 2;
  LLMK_LAUNCH(unsigned((warps + 7) / 8), 256, 0, cudaStream_t(stream), attn::kv_append_kernel)
  (k, v, slots, T, kv.n_kv_heads, kv.head_dim, kv.block_tokens, kv.num_blocks * kv.block_tokens, kv.k_type, kv.v_type,
   kv_row_bytes(kv.k_type, kv.head_dim), kv_row_bytes(kv.v_type, kv.head_dim),
   static_cast<uint8_t*>(const_cast<void*>(kv.k)), static_cast<uint8_t*>(const_cast<void*>(kv.v)));
  LLMK_CUDA_CHECK(cudaGetLastError());
  ws.release();
}
}  // namespace llmk
