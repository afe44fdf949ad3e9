// token_tiles, the CUDA decode kernel for an int8 / int4 cache (K and V the
// same type): K scored a lane per token from 32-row tiles copied to shared
// memory, P.V a run of elements a lane (llmk/attention.hpp, DecodeCudaKernel;
// docs/kv_cache.md). Its own file so that nvcc and the emulator's compiler
// build it beside attention.cu's kernels.
#include <cuda_fp16.h>

#include <type_traits>

#include "attention/attn_decode.cuh"
#include "core/cuda_check.cuh"

namespace llmk::attn {
namespace {

// Byte e of w as a float: a permute and an integer convert (I2FP), where
// nvcc makes float(w & 255) a byte convert (I2F.U8) on the conversion unit.
__device__ __forceinline__ float byte_f(uint32_t w, int e) { return float(__byte_perm(w, 0u, 0x4440u | uint32_t(e))); }

// Shared memory of decode_tiles_kernel, in bytes: q [NG][D] and (int4) the
// sums of q over each 32-group [NG][ceil(D / 32)], then per warp a tile of
// kTile K rows and its weights [kTile][NG]; the warps' merge reuses the tiles.
struct TilesSmem {
  int64_t q_floats, warp_bytes, tile_bytes, total;
};
__host__ __device__ inline TilesSmem tiles_smem(int NG, int64_t D, int64_t krow) {
  TilesSmem t{};
  t.q_floats = (NG * D + NG * ((D + 31) / 32) + 3) / 4 * 4;  // 16-byte multiple
  t.tile_bytes = (kTile * krow + 15) / 16 * 16;
  t.warp_bytes = t.tile_bytes + kTile * NG * 4;
  const int64_t merge = int64_t(kWarps) * NG * (D + 2) * 4;
  t.total = t.q_floats * 4 + (kWarps * t.warp_bytes > merge ? kWarps * t.warp_bytes : merge);
  return t;
}

// Decode with an int8 / int4 K (= V type T) scored a lane per token: each warp
// takes tiles of kTile = 32 tokens, copies their K rows (whole runs of a
// block's consecutive rows, 16 bytes a lane at a time) into its shared memory,
// and lane t scores token t against the NG queries (read from shared memory,
// the same address in every lane): per 32-group, the integer quants times q
// summed in f32, times the group's scale (int4: plus min x the group's sum of
// q). No score needs a reduction over lanes, and each scale is read once a
// row. The tile's softmax is a warp max and sum per head; the weights go to
// shared memory, and in P.V each lane holds a run of consecutive elements of
// a V row, inside one 32-group, so a token costs it one load of quants and one
// of the group's scale, 4 tokens at a time. Tiles start at multiples of
// 32 tokens (the splits' chunks are multiples of 32), so with block_tokens
// dividing 32 or a multiple of it a tile is whole runs of blocks, each run
// 16-byte aligned (decode_cuda_token_tiles_fit).
template <int T, int E, int NG>
__global__ void __launch_bounds__(kWarps * 32) decode_tiles_kernel(DecodeArgs a) {
  static_assert(T == int(KvType::int8) || T == int(KvType::int4), "token tiles take an int8 or int4 K");
  LLMK_DYNAMIC_SMEM(float, smem);
  const int64_t b = blockIdx.x, hk = blockIdx.y / a.groups, split = blockIdx.z;
  const int64_t G = a.Hq / a.Hkv, g0 = (blockIdx.y % a.groups) * NG;
  const int ng = int(min(int64_t(NG), G - g0));
  const int D = int(a.D), ngrp = (D + 31) / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const TilesSmem lay = tiles_smem(NG, D, a.krow);
  float* qs = smem;                // [NG][D], heads past ng 0
  float* qsum = smem + NG * D;     // [NG][ngrp] (int4)
  uint8_t* area = reinterpret_cast<uint8_t*>(smem + lay.q_floats) + warp * lay.warp_bytes;
  uint4* ktile = reinterpret_cast<uint4*>(area);                  // kTile rows of krow bytes
  float* wts = reinterpret_cast<float*>(area + lay.tile_bytes);   // [kTile][NG]
  load_queries(a, qs, NG, ng, b, hk, g0);
  __syncthreads();
  if constexpr (T == int(KvType::int4)) {
    for (int i = threadIdx.x; i < NG * ngrp; i += blockDim.x) {
      const int g = i / ngrp, c = i % ngrp;
      float x = 0.0f;
      for (int j = 32 * c; j < min(D, 32 * c + 32); ++j) x += qs[g * D + j];
      qsum[i] = x;
    }
    __syncthreads();
  }

  const SplitRange range = split_range(a, b, split, kTile);
  const int64_t k0 = range.k0, k1 = range.k1;
  const int32_t* blocks = range.blocks;
  const uint32_t bt = uint32_t(a.bt), hkv = uint32_t(a.Hkv), hk32 = uint32_t(hk);
  const int run = int(min(int64_t(kTile), a.bt));  // rows of one block in a tile

  // P.V's layout: lane l holds elements C l .. C l + C - 1 (C = 2, 4, 8 for
  // head_dim <= 64, 128, 256; head_dim <= 96 takes runs of 4 over 24 lanes),
  // in group vgrp at offset vofs. A lane past D reads element 0 (its sums are
  // never written: merge_warps).
  constexpr int C = E == 3 ? 4 : E;
  const int vj = C * lane < D ? C * lane : 0, vgrp = vj / 32, vofs = vj % 32;
  float m[NG], l[NG], acc[NG][C], accm[NG];  // accm: int4's sum of w x min
#pragma unroll
  for (int g = 0; g < NG; ++g) {
    m[g] = -INFINITY, l[g] = 0.0f, accm[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < C; ++i) acc[g][i] = 0.0f;
  }

  for (int64_t p0 = k0 + int64_t(warp) * kTile; p0 < k1; p0 += kWarps * kTile) {
    const int nv = int(min(int64_t(kTile), k1 - p0));  // the tile's tokens
    // lane t's token p0 + t (lanes past nv: the tile's first), its pool row
    const int64_t p = p0 + (lane < nv ? lane : 0), blk = p / a.bt;
    const uint32_t row = (uint32_t(blocks[blk]) * hkv + hk32) * bt + uint32_t(p - blk * a.bt);
    __syncwarp();  // the previous tile's reads of ktile and wts are done
    for (int r0 = 0; r0 < nv; r0 += run) {  // one run of consecutive rows at a time
      const uint4* src = reinterpret_cast<const uint4*>(a.k + uint64_t(__shfl_sync(0xffffffffu, row, r0)) * a.krow);
      uint4* dst = ktile + int64_t(r0) * a.krow / 16;
      // rounded up to 16 bytes: past the last row only in a partial run, still inside its block
      const int chunks = int((int64_t(min(run, nv - r0)) * a.krow + 15) / 16);
      for (int c = lane; c < chunks; c += 32) dst[c] = src[c];
    }
    __syncwarp();

    float s[NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) s[g] = 0.0f;
    const uint8_t* kr = reinterpret_cast<const uint8_t*>(ktile) + lane * a.krow;
#pragma unroll
    for (int c = 0; c < E; ++c) {  // 32-groups (E >= ngrp)
      if (c >= ngrp) break;
      const int nq = min(32, D - 32 * c);  // 32, or 16 in a last half group
      float part[NG];
#pragma unroll
      for (int g = 0; g < NG; ++g) part[g] = 0.0f;
      if constexpr (T == int(KvType::int8)) {
        const BlockQ8* blk8 = reinterpret_cast<const BlockQ8*>(kr) + c;
        const uint16_t* qh = reinterpret_cast<const uint16_t*>(blk8->qs);  // 2-byte aligned pairs
#pragma unroll
        for (int k = 0; k < 8; ++k) {  // quants 4k .. 4k + 3
          if (4 * k >= nq) break;
          const uint32_t w0 = qh[2 * k], w1 = qh[2 * k + 1];
          const float x0 = float(int8_t(w0 & 0xff)), x1 = float(int8_t(w0 >> 8));
          const float x2 = float(int8_t(w1 & 0xff)), x3 = float(int8_t(w1 >> 8));
#pragma unroll
          for (int g = 0; g < NG; ++g) {
            const float4 q4 = *reinterpret_cast<const float4*>(qs + g * D + 32 * c + 4 * k);
            part[g] = fmaf(q4.x, x0, fmaf(q4.y, x1, fmaf(q4.z, x2, fmaf(q4.w, x3, part[g]))));
          }
        }
        const float d = f16f(blk8->d);
#pragma unroll
        for (int g = 0; g < NG; ++g) s[g] = fmaf(d, part[g], s[g]);
      } else {
        const BlockQ4* blk4 = reinterpret_cast<const BlockQ4*>(kr) + c;
        const uint32_t* qw = reinterpret_cast<const uint32_t*>(blk4->qs);  // 4-byte aligned
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // bytes 4k .. 4k + 3: elements 4k + b (low), 16 + 4k + b (high)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            if (16 * half >= nq) break;
            const uint32_t w = (qw[k] >> (4 * half)) & 0x0f0f0f0fu;  // the 4 nibbles, a byte each
            const float x0 = byte_f(w, 0), x1 = byte_f(w, 1), x2 = byte_f(w, 2), x3 = byte_f(w, 3);
#pragma unroll
            for (int g = 0; g < NG; ++g) {
              const float4 q4 = *reinterpret_cast<const float4*>(qs + g * D + 32 * c + 16 * half + 4 * k);
              part[g] = fmaf(q4.x, x0, fmaf(q4.y, x1, fmaf(q4.z, x2, fmaf(q4.w, x3, part[g]))));
            }
          }
        }
        const float d = f16f(blk4->d), mn = f16f(blk4->m);
#pragma unroll
        for (int g = 0; g < NG; ++g) s[g] = fmaf(d, part[g], fmaf(mn, qsum[g * ngrp + c], s[g]));
      }
    }

    // the tile's online softmax, head by head (m, l the same in every lane)
    float alpha[NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      const float sc = lane < nv ? s[g] : -INFINITY;
      const float mn = fmaxf(m[g], warp_max(sc));
      // every score so far -inf: weight 0 (2^(-inf - 0)), not NaN; alpha 0 on acc and l still 0
      const float mu = mn == -INFINITY ? 0.0f : mn;
      alpha[g] = exp2_fast(m[g] - mu);
      const float w = exp2_fast(sc - mu);
      l[g] = l[g] * alpha[g] + warp_sum(w);
      m[g] = mn;
      wts[lane * NG + g] = w;
    }
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      accm[g] *= alpha[g];
#pragma unroll
      for (int i = 0; i < C; ++i) acc[g][i] *= alpha[g];
    }
    __syncwarp();

    // P.V: lane l holds the run of C consecutive elements C l .. C l + C - 1
    // of each V row, inside one 32-group, kUnroll V rows at a time. A token
    // costs the lane one load of its C quants and one of the group's scale
    // (int4: scale and min in one 32-bit word), and the FMAs take the quants
    // themselves: acc += (w d) q, and for int4 accm += w m once a head, added
    // to acc at the end (value = q d + m). Tokens past nv load the tile's
    // first row and weigh 0.
    const auto pv = [&](int t0, auto full) {
      constexpr bool kFull = decltype(full)::value;  // t0 + kUnroll <= nv
      float x[kUnroll][C], w[kUnroll][NG], d[kUnroll], mn[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = t0 + u;
        const bool ok = kFull || t < nv;
        const uint8_t* vb = a.v + uint64_t(__shfl_sync(0xffffffffu, row, t & 31)) * a.vrow;
        if constexpr (T == int(KvType::int8)) {
          const uint8_t* blk = vb + sizeof(BlockQ8) * vgrp;  // {d, qs[32]}: its quants 2-byte aligned
          const uint16_t* qh = reinterpret_cast<const uint16_t*>(blk + 2 + vofs);
#pragma unroll
          for (int k = 0; k < C / 2; ++k) {
            const uint32_t h = qh[k];
            x[u][2 * k] = float(int8_t(h & 0xff)), x[u][2 * k + 1] = float(int8_t(h >> 8));
          }
          d[u] = f16f(*reinterpret_cast<const uint16_t*>(blk)), mn[u] = 0.0f;
        } else {
          const uint8_t* blk = vb + sizeof(BlockQ4) * vgrp;  // {d, m, qs[16]}: 4-byte aligned
          const uint32_t dm = *reinterpret_cast<const uint32_t*>(blk);
          const uint8_t* qb = blk + 4 + vofs % 16;  // elements 16.. are the high nibbles of qs[0..]
          const int sh = vofs >= 16 ? 4 : 0;
          if constexpr (C == 2) {
            const uint32_t h = (uint32_t(*reinterpret_cast<const uint16_t*>(qb)) >> sh) & 0x0f0fu;
            x[u][0] = byte_f(h, 0), x[u][1] = byte_f(h, 1);
          } else {
#pragma unroll
            for (int k = 0; k < C / 4; ++k) {
              const uint32_t q = (reinterpret_cast<const uint32_t*>(qb)[k] >> sh) & 0x0f0f0f0fu;  // a nibble a byte
#pragma unroll
              for (int e = 0; e < 4; ++e) x[u][4 * k + e] = byte_f(q, e);
            }
          }
          d[u] = f16f(uint16_t(dm & 0xffffu)), mn[u] = f16f(uint16_t(dm >> 16));
        }
        if constexpr (NG % 4 == 0) {
#pragma unroll
          for (int g = 0; g < NG; g += 4) {
            const float4 w4 = ok ? *reinterpret_cast<const float4*>(wts + t * NG + g) : float4{0, 0, 0, 0};
            w[u][g] = w4.x, w[u][g + 1] = w4.y, w[u][g + 2] = w4.z, w[u][g + 3] = w4.w;
          }
        } else {
#pragma unroll
          for (int g = 0; g < NG; ++g) w[u][g] = ok ? wts[t * NG + g] : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int g = 0; g < NG; ++g) {
          const float wd = w[u][g] * d[u];
#pragma unroll
          for (int i = 0; i < C; ++i) acc[g][i] = fmaf(wd, x[u][i], acc[g][i]);
          if constexpr (T == int(KvType::int4)) accm[g] = fmaf(w[u][g], mn[u], accm[g]);
        }
    };
    int t0 = 0;
    for (; t0 + kUnroll <= nv; t0 += kUnroll) pv(t0, std::true_type{});
    if (t0 < nv) pv(t0, std::false_type{});
  }
  if constexpr (T == int(KvType::int4)) {
#pragma unroll
    for (int g = 0; g < NG; ++g)
#pragma unroll
      for (int i = 0; i < C; ++i) acc[g][i] += accm[g];
  }
  __syncthreads();  // every warp is done with its tile before the merge reuses the space
  merge_warps<C, NG, true>(a, smem + lay.q_floats, m, l, acc, ng, g0, split);
}

template <int T>
cudaError_t launch_tiles_g(const DecodeArgs& a, int64_t B, cudaStream_t s) {
  return by_layout(a, [&]<int E, int NG>() {
    const dim3 grid(unsigned(B), unsigned(a.Hkv * a.groups), unsigned(a.splits));
    const size_t smem = size_t(tiles_smem(NG, a.D, a.krow).total);
    LLMK_CUDA_RETURN_IF_ERROR(cuda::allow_dynamic_smem(decode_tiles_kernel<T, E, NG>, smem));
    LLMK_LAUNCH(grid, kWarps * 32, smem, s, decode_tiles_kernel<T, E, NG>)(a);
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t launch_decode_tiles(const DecodeArgs& a, int64_t B, cudaStream_t s) {
  if (a.kt == KvType::int8) return launch_tiles_g<int(KvType::int8)>(a, B, s);
  return launch_tiles_g<int(KvType::int4)>(a, B, s);
}

}  // namespace llmk::attn
