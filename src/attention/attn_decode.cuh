// Shared by the CUDA decode kernels: attention.cu (lane_per_element, the
// launcher, the split merge) and decode_tiles.cu (token_tiles): the launch
// arguments and the device helpers both use. Internal to src/attention.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/attn_cuda.cuh"
#include "attention/kv_checks.hpp"
#include "llmk/attention.hpp"

namespace llmk::attn {

constexpr int kWarps = 4;                // warps a decode CTA
constexpr int kUnroll = 4;               // tokens a warp loads at once (lane_per_element; token_tiles' P.V)
constexpr int kTile = int(kDecodeTile);  // tokens a warp scores at once in token_tiles

struct DecodeArgs {
  const float* q;    // [B, Hq, D]
  const uint8_t* k;  // pools, see KvLayerView
  const uint8_t* v;
  const int64_t* indptr;    // [B+1]
  const int32_t* indices;   // [indptr[B]]
  const int32_t* last_len;  // [B]
  float* out;               // [B, Hq, D]
  float* part;              // [B, Hq, splits, D + 2] when splits > 1
  int64_t Hq, Hkv, D, bt;
  uint32_t krow, vrow;  // row bytes
  int groups;           // CTAs per kv head: ceil(G / NG)
  int splits;
  int64_t window;  // AttentionOptions::window (0 = none)
  float scale;
  KvType kt, vt;
};

// Query heads a CTA takes for G query heads a kv head: MHA 1; GQA 4 (G = 2 ..
// 4: SmolLM2 3, Llama-3-8B 4) or 8 (G > 4: 7 Qwen2.5-7B, 8 Llama-3-70B, 16
// over two CTAs).
inline int heads_per_cta(int64_t G) { return G == 1 ? 1 : G <= 4 ? 4 : 8; }

// Calls launch.template operator()<E, NG>() for a's compiled layout: E
// elements a lane (head_dim <= 64, 96, 128, 256: 2, 3, 4, 8) and NG query
// heads a CTA (heads_per_cta).
template <int NG, class F>
cudaError_t by_head_dim(const DecodeArgs& a, F& launch) {
  if (a.D <= 64) return launch.template operator()<2, NG>();
  if (a.D <= 96) return launch.template operator()<3, NG>();
  if (a.D <= 128) return launch.template operator()<4, NG>();
  return launch.template operator()<8, NG>();
}
template <class F>
cudaError_t by_layout(const DecodeArgs& a, F&& launch) {
  switch (heads_per_cta(a.Hq / a.Hkv)) {
    case 1: return by_head_dim<1>(a, launch);
    case 4: return by_head_dim<4>(a, launch);
    default: return by_head_dim<8>(a, launch);
  }
}

// Launches token_tiles' kernel (decode_tiles.cu; mma: token_tiles_mma) for
// a.kt = a.vt, int8 or int4; the split merge, when a.splits > 1, is the caller's.
cudaError_t launch_decode_tiles(const DecodeArgs& a, int64_t B, bool mma, cudaStream_t s);

namespace {

// T < 0: the type is read from the arguments at run time.
template <int T>
__device__ __forceinline__ float load_any(KvType rt, const uint8_t* row, int i, int lane) {
  if constexpr (T < 0) return load_elem(rt, row, i, lane);
  else return load_elem<KvType(T)>(row, i, lane);
}

// The CTA's NG query heads (from g0 of kv head hk; those past ng are 0) into
// qs [NG][D] of shared memory, times scale * log2 e: scores are in log2 units,
// so a weight is one exp2, and the running max, the split partials' max and
// the merges are in those units.
__device__ __forceinline__ void load_queries(const DecodeArgs& a, float* qs, int NG, int ng, int64_t b, int64_t hk,
                                             int64_t g0) {
  const int D = int(a.D);
  const int64_t G = a.Hq / a.Hkv;
  const float qscale = a.scale * 1.44269504088896341f;
  for (int i = threadIdx.x; i < NG * D; i += blockDim.x)
    qs[i] = i / D < ng ? a.q[(b * a.Hq + hk * G + g0 + i / D) * D + i % D] * qscale : 0.0f;
}

// Sequence b's tokens [k0, k1) in context split `split`, and its block
// table. The splits cut [a, len) into chunks of a multiple of `align`
// tokens, a = lo rounded down to `align`, lo the window's first position (0
// without a window): blocks before a are never read. Positions in [k0, lo)
// (the first split's first partial tile) are read but not seen: the kernels
// mask them. A split wholly before lo is empty (k0 = k1).
struct SplitRange {
  int64_t k0, k1, lo;
  const int32_t* blocks;
};
__device__ __forceinline__ SplitRange split_range(const DecodeArgs& a, int64_t b, int64_t split, int64_t align) {
  const int64_t nb = a.indptr[b + 1] - a.indptr[b];
  const int64_t len = nb == 0 ? 0 : (nb - 1) * a.bt + a.last_len[b];
  const int64_t lo = a.window > 0 ? max(int64_t(0), len - a.window) : 0, a0 = lo / align * align;
  const int64_t chunk = ((len - a0 + a.splits - 1) / a.splits + align - 1) / align * align;
  int64_t k0 = min(len, a0 + split * chunk);
  const int64_t k1 = min(len, a0 + (split + 1) * chunk);
  if (k1 <= lo) k0 = k1;
  return {k0, k1, lo, a.indices + a.indptr[b]};
}

// The end of a decode CTA, once each warp has written its (m, l, acc) per
// head to ws ([kWarps][NG][D + 2] floats of shared memory): the CTA's threads
// merge the warps by log-sum-exp and write out (one split) or the split's
// partial.
template <int NG>
__device__ __forceinline__ void merge_stored(const DecodeArgs& a, const float* ws, int ng, int64_t g0, int64_t split) {
  const int64_t b = blockIdx.x, hk = blockIdx.y / a.groups, G = a.Hq / a.Hkv;
  const int D = int(a.D);
  __syncthreads();
  for (int x = threadIdx.x; x < ng * D; x += blockDim.x) {
    const int g = x / D, j = x % D;
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, ws[(w * NG + g) * (D + 2)]);
    float L = 0.0f, o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float* p = ws + (w * NG + g) * (D + 2);
      if (p[1] == 0.0f) continue;  // a warp that saw no token
      const float s = exp2f(p[0] - M);
      L += s * p[1];
      o += s * p[2 + j];
    }
    const int64_t h = hk * G + g0 + g;
    if (a.splits == 1) {
      a.out[(b * a.Hq + h) * D + j] = o / L;
    } else {
      float* pp = a.part + ((b * a.Hq + h) * a.splits + split) * (D + 2);
      if (j == 0) pp[0] = M, pp[1] = L;
      pp[2 + j] = o;
    }
  }
}

// The end of a decode CTA: each warp writes its (m, l, acc) per head to ws,
// then merge_stored. acc[g][i] is element lane + 32 i of head g, or with kRuns
// element E lane + i (a lane holds a run of E consecutive elements:
// token_tiles' P.V).
template <int E, int NG, bool kRuns = false>
__device__ __forceinline__ void merge_warps(const DecodeArgs& a, float* ws, const float (&m)[NG], const float (&l)[NG],
                                            const float (&acc)[NG][E], int ng, int64_t g0, int64_t split) {
  const int D = int(a.D), lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int g = 0; g < NG; ++g) {  // static indices keep acc in registers
    if (g >= ng) break;
    float* w = ws + (warp * NG + g) * (D + 2);
    if (lane == 0) w[0] = m[g], w[1] = l[g];
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int j = kRuns ? E * lane + i : lane + 32 * i;
      if (j < D) w[2 + j] = acc[g][i];
    }
  }
  merge_stored<NG>(a, ws, ng, g0, split);
}

}  // namespace
}  // namespace llmk::attn
