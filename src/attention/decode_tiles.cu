// token_tiles and token_tiles_mma, the CUDA decode kernels for an int8 / int4
// cache (K and V the same type): K scored from 32-row tiles copied to shared
// memory, a lane per token (token_tiles) or by tensor-core MMAs
// (token_tiles_mma), P.V a run of elements a lane (llmk/attention.hpp,
// DecodeCudaKernel; docs/kv_cache.md). Their own file so that nvcc and the
// emulator's compiler build them beside attention.cu's kernels.
#include <cuda_fp16.h>

#include <cfloat>
#include <type_traits>

#include "attention/attn_decode.cuh"
#include "core/cuda_check.cuh"
#include "core/cuda_mma.cuh"

namespace llmk::attn {
namespace {

// Byte e of w as a float: a permute and an integer convert (I2FP), where
// nvcc makes float(w & 255) a byte convert (I2F.U8) on the conversion unit.
__device__ __forceinline__ float byte_f(uint32_t w, int e) { return float(__byte_perm(w, 0u, 0x4440u | uint32_t(e))); }

// Shared memory of decode_tiles_kernel, in bytes: q [NG][D], (int4) the sums
// of q over each 32-group [NG][ceil(D / 32)] and (kMma) the heads' scales
// fq [NG]; (kMma) q's MMA fragments [D / 16][32 lanes] of uint4; then per warp
// a tile of kTile K rows and its weights [kTile][NG]. The warps' merge reuses
// the tiles (from area_floats on).
struct TilesSmem {
  int64_t q_floats, frag_bytes, area_floats, warp_bytes, tile_bytes, total;
};
__host__ __device__ inline TilesSmem tiles_smem(int NG, int64_t D, int64_t krow, bool mma) {
  TilesSmem t{};
  t.q_floats = (NG * D + NG * ((D + 31) / 32) + NG + 3) / 4 * 4;  // 16-byte multiple
  t.frag_bytes = mma ? D / 16 * 32 * 16 : 0;
  t.area_floats = t.q_floats + t.frag_bytes / 4;
  t.tile_bytes = (kTile * krow + 15) / 16 * 16;
  t.warp_bytes = t.tile_bytes + kTile * NG * 4;
  const int64_t merge = int64_t(kWarps) * NG * (D + 2) * 4;
  t.total = t.area_floats * 4 + (kWarps * t.warp_bytes > merge ? kWarps * t.warp_bytes : merge);
  return t;
}

// f16 pairs as 32-bit words, the lower index in the low half (as mma reads them).
__device__ __forceinline__ uint32_t h2_bits(__half lo, __half hi) {
  return uint32_t(__half_as_ushort(lo)) | uint32_t(__half_as_ushort(hi)) << 16;
}
// The shift s that puts amax 2^s in [2^14, 2^15) (0 for a zero or non-finite
// amax; within +-100): values up to amax, times 2^s, then split by
// split_f16, keep ~22 bits and no part of the largest ones is subnormal.
__device__ __forceinline__ int f16_shift(float amax) {
  const int e = amax > 0.0f && amax <= FLT_MAX ? ilogbf(amax) : 14;
  return min(100, max(-100, 14 - e));
}
// x0 and x1 as the f16 pair of their high parts (hi) and of what rounding to
// f16 left (lo): x = hi + lo within ~2^-22 |x|.
__device__ __forceinline__ void split_f16(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __half h0 = __float2half_rn(x0), h1 = __float2half_rn(x1);
  hi = h2_bits(h0, h1);
  lo = h2_bits(__float2half_rn(x0 - __half2float(h0)), __float2half_rn(x1 - __half2float(h1)));
}
// Bytes (0, 1) (sel 0x4140) or (2, 3) (sel 0x4342) of w as the f16 pair
// (1024 + byte) - bias: exact, a byte in the mantissa of 1024 (0x6400).
__device__ __forceinline__ uint32_t bytes_h2(uint32_t w, uint32_t sel, uint32_t bias) {
  const uint32_t x = __byte_perm(w, 0x64646464u, sel);
  const __half2 r = __hsub2(__halves2half2(__ushort_as_half(uint16_t(x)), __ushort_as_half(uint16_t(x >> 16))),
                            __halves2half2(__ushort_as_half(uint16_t(bias)), __ushort_as_half(uint16_t(bias >> 16))));
  return h2_bits(__low2half(r), __high2half(r));
}

// token_tiles_mma's scores, by tensor-core MMAs (m16n8k16, f16 in, f32
// accumulators): per 32-group, A = the tile's 32 rows of quants (two m-tiles
// of 16 tokens; as f16 they are exact: int8 -128..127, int4 0..15) and B = the
// NG queries (columns; 8 - NG of them 0), each split into two f16 parts
// q 2^s = hi + lo (s per head so that max |q 2^s| is in [2^14, 2^15); within
// ~2^-22 of q), two MMAs each, so every product is exact and only the f32
// sums round. The group's MMA sums times the row's scale d, over the groups,
// times 2^-s, plus (int4) the row's min times the group's sum of q, give the
// scores, written to out [kTile][NG]. Lane (g = lane / 4, t = lane % 4) reads
// of rows g, g + 8 (+ 16) the 4 bytes of quants 4t .. 4t + 3 (int8: and 16 +
// 4t ..; int4: their high nibbles are elements 16 + 4t ..): k-step 0 of a
// group takes elements 4t, 4t + 1 at k = 2t, 2t + 1 and 4t + 2, 4t + 3 at k =
// 2t + 8, 2t + 9, k-step 1 the same 16 higher; qfrag holds B in that order.
template <int T, int E, int NG>
__device__ __forceinline__ void score_mma(const uint8_t* tile, uint32_t krow, const uint4* qfrag, const float* fq,
                                          const float* qsum, int D, int ngrp, float* out) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr bool kQ8 = T == int(KvType::int8);
  constexpr uint32_t kBias = kQ8 ? 0x64806480u : 0x64006400u;  // 1024 + 128 (int8 stored + 128), 1024
  float sc[2][4] = {}, um[2][4] = {};  // [m-tile][row g col 2t, 2t + 1; row g + 8 col 2t, 2t + 1]
#pragma unroll
  for (int c = 0; c < E; ++c) {  // 32-groups (E >= ngrp)
    if (c >= ngrp) break;
    const int nk = D - 32 * c >= 32 ? 2 : 1;  // k-steps: 1 in a last half group
    const uint4 b0 = qfrag[2 * c * 32 + lane], b1 = nk == 2 ? qfrag[(2 * c + 1) * 32 + lane] : uint4{0, 0, 0, 0};
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      uint32_t w[2][2];  // [row g, g + 8][k-step]: 4 quants a byte (int8 + 128)
      float d[2], mn[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint8_t* row = tile + uint32_t(16 * mt + 8 * h + g) * krow;
        if constexpr (kQ8) {
          const uint16_t* q0 = reinterpret_cast<const uint16_t*>(row + sizeof(BlockQ8) * c + 2 + 4 * t);
          const uint16_t* q1 = q0 + 8;  // quants 16 + 4t ..
          w[h][0] = (uint32_t(q0[0]) | uint32_t(q0[1]) << 16) ^ 0x80808080u;
          w[h][1] = (uint32_t(q1[0]) | uint32_t(q1[1]) << 16) ^ 0x80808080u;
          d[h] = f16f(*reinterpret_cast<const uint16_t*>(row + sizeof(BlockQ8) * c)), mn[h] = 0.0f;
        } else {
          const uint32_t q = *reinterpret_cast<const uint32_t*>(row + sizeof(BlockQ4) * c + 4 + 4 * t);
          w[h][0] = q & 0x0f0f0f0fu, w[h][1] = (q >> 4) & 0x0f0f0f0fu;
          const uint32_t dm = *reinterpret_cast<const uint32_t*>(row + sizeof(BlockQ4) * c);
          d[h] = f16f(uint16_t(dm & 0xffffu)), mn[h] = f16f(uint16_t(dm >> 16));
        }
      }
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        if (k >= nk) break;
        const uint32_t af[4] = {bytes_h2(w[0][k], 0x4140u, kBias), bytes_h2(w[1][k], 0x4140u, kBias),
                                bytes_h2(w[0][k], 0x4342u, kBias), bytes_h2(w[1][k], 0x4342u, kBias)};
        const uint4 bq = k == 0 ? b0 : b1;
        const uint32_t hi[2] = {bq.x, bq.y}, lo[2] = {bq.z, bq.w};
        cuda::mma_16816(acc, af, hi);
        cuda::mma_16816(acc, af, lo);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sc[mt][i] = fmaf(d[i / 2], acc[i], sc[mt][i]);
        if constexpr (!kQ8) {
          const int col = 2 * t + i % 2;
          if (col < NG) um[mt][i] = fmaf(mn[i / 2], qsum[col * ngrp + c], um[mt][i]);
        }
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = 2 * t + i % 2;
      if (col < NG) out[(16 * mt + 8 * (i / 2) + g) * NG + col] = fmaf(sc[mt][i], fq[col], um[mt][i]);
    }
}

// token_tiles_mma's P.V for head_dim <= 128, by MMAs: per 32-group of V
// and k-step of 16 tokens, A = V^T (elements x tokens, the quants exact in
// f16) and B = the weights times the rows' scale d (tokens x heads), each
// split into two f16 parts after a scale 2^sg (the tile's largest d of the
// group times 2^sg is in [2^14, 2^15); w <= 1), so no product w d falls into
// f16's subnormals; the MMA sums times 2^-sg join pacc. An m-tile (2 a group)
// is 16 elements: rows r and r + 8 of lane (g = r) come from one load a token:
// int4 m-tile h: the low and high nibble of byte 8h + r (elements 8h + r and
// 16 + 8h + r of the group); int8 m-tile h: the two bytes at 16h + 2r
// (elements 16h + 2r, + 1). int4's min term sum w m is summed per head and
// group in pmin (lane l holds head l / 4's) and added per element at the end.
// vrow: lane t's token's pool row (the tile's first past nv, weight 0);
// wts [kTile][NG] the tile's weights. Every lane of the warp calls it.
template <int T, int E, int NG>
__device__ __forceinline__ void pv_mma(const DecodeArgs& a, uint32_t vrow, const float* wts, int D, int ngrp,
                                       float (&pacc)[2 * E][4], float (&pmin)[E]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr bool kQ8 = T == int(KvType::int8);
  constexpr uint32_t kBias = kQ8 ? 0x64806480u : 0x64006400u;
  constexpr int kGroupBytes = kQ8 ? int(sizeof(BlockQ8)) : int(sizeof(BlockQ4));
  // the lane's tokens: k-step kt, slot j -> token 16 kt + 2t + (j & 1) + 8 (j >> 1)
  const uint8_t* vr[2][4];
  float wv[2][4];
#pragma unroll
  for (int kt = 0; kt < 2; ++kt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tok = 16 * kt + 2 * t + (j & 1) + 8 * (j >> 1);
      vr[kt][j] = a.v + uint64_t(__shfl_sync(0xffffffffu, vrow, tok)) * a.vrow;
      wv[kt][j] = g < NG ? wts[tok * NG + g] : 0.0f;  // head g's weight
    }
#pragma unroll
  for (int c = 0; c < E; ++c) {  // 32-groups (E >= ngrp)
    if (c >= ngrp) break;
    float dv[2][4], mv[2][4], dmax = 0.0f;
#pragma unroll
    for (int kt = 0; kt < 2; ++kt)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint8_t* gb = vr[kt][j] + kGroupBytes * c;
        if constexpr (kQ8) {
          dv[kt][j] = f16f(*reinterpret_cast<const uint16_t*>(gb)), mv[kt][j] = 0.0f;
        } else {
          const uint32_t dm = *reinterpret_cast<const uint32_t*>(gb);
          dv[kt][j] = f16f(uint16_t(dm & 0xffffu)), mv[kt][j] = f16f(uint16_t(dm >> 16));
        }
        dmax = fmaxf(dmax, fabsf(dv[kt][j]));
      }
    // lanes t = 0..3 hold the tile's 32 tokens between them
    dmax = fmaxf(dmax, __shfl_xor_sync(0xffffffffu, dmax, 1));
    dmax = fmaxf(dmax, __shfl_xor_sync(0xffffffffu, dmax, 2));
    const int sg = f16_shift(dmax);
    const float up = ldexpf(1.0f, sg), down = ldexpf(1.0f, -sg);
    uint32_t bh[2][2], bl[2][2];  // [k-step][b0, b1]: (w d 2^sg) as hi and lo f16 parts
#pragma unroll
    for (int kt = 0; kt < 2; ++kt)
#pragma unroll
      for (int p = 0; p < 2; ++p)
        split_f16(wv[kt][2 * p] * dv[kt][2 * p] * up, wv[kt][2 * p + 1] * dv[kt][2 * p + 1] * up, bh[kt][p], bl[kt][p]);
    if constexpr (!kQ8) {
      float sm = 0.0f;  // head g's sum of w m over the lane's 8 tokens, then the tile's
#pragma unroll
      for (int kt = 0; kt < 2; ++kt)
#pragma unroll
        for (int j = 0; j < 4; ++j) sm = fmaf(wv[kt][j], mv[kt][j], sm);
      sm += __shfl_xor_sync(0xffffffffu, sm, 1);
      sm += __shfl_xor_sync(0xffffffffu, sm, 2);
      pmin[c] += sm;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // m-tiles: int4 bytes 8h .., int8 bytes 16h ..
      if (32 * c + (kQ8 ? 16 : 8) * h >= D) break;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kt = 0; kt < 2; ++kt) {
        uint32_t x[2];  // tokens (2t, 2t + 1) and (2t + 8, 2t + 9): one load each, in the low and high half
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          if constexpr (kQ8) {
            const int o = kGroupBytes * c + 2 + 16 * h + 2 * g;
            x[p] = (uint32_t(*reinterpret_cast<const uint16_t*>(vr[kt][2 * p] + o)) |
                    uint32_t(*reinterpret_cast<const uint16_t*>(vr[kt][2 * p + 1] + o)) << 16) ^
                   0x80808080u;
          } else {
            const int o = kGroupBytes * c + 4 + 8 * h + g;
            x[p] = uint32_t(vr[kt][2 * p][o]) | uint32_t(vr[kt][2 * p + 1][o]) << 16;
          }
        }
        uint32_t af[4];  // rows g (a0, a2) and g + 8 (a1, a3)
        if constexpr (kQ8) {
          af[0] = bytes_h2(x[0], 0x4240u, kBias), af[1] = bytes_h2(x[0], 0x4341u, kBias);
          af[2] = bytes_h2(x[1], 0x4240u, kBias), af[3] = bytes_h2(x[1], 0x4341u, kBias);
        } else {
#pragma unroll
          for (int p = 0; p < 2; ++p) {  // low nibbles: row g; high: row g + 8
            af[2 * p] = bytes_h2(x[p] & 0x0f0f0f0fu, 0x4240u, kBias);
            af[2 * p + 1] = bytes_h2((x[p] >> 4) & 0x0f0f0f0fu, 0x4240u, kBias);
          }
        }
        cuda::mma_16816(acc, af, bh[kt]);
        cuda::mma_16816(acc, af, bl[kt]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) pacc[2 * c + h][i] = fmaf(acc[i], down, pacc[2 * c + h][i]);
    }
  }
}

// pv_mma's element of m-tile mt, row r (0 .. 15).
template <int T>
__device__ __forceinline__ int pv_mma_elem(int mt, int r) {
  const int c = mt / 2, h = mt % 2;
  if constexpr (T == int(KvType::int8)) return 32 * c + 16 * h + 2 * (r % 8) + r / 8;
  return 32 * c + 8 * h + r % 8 + 16 * (r / 8);
}

// token_tiles_mma's B fragments (score_mma): for k-step ks (group ks / 2,
// elements 16 (ks % 2) ..) and lane l (column n = l / 4, t = l % 4), query n's
// elements 4t, 4t + 1 and 4t + 2, 4t + 3 of the k-step, times 2^s, as f16 hi
// parts and lo parts (x - hi rounded); fq[n] = 2^-s. Run by the whole CTA.
template <int NG>
__device__ __forceinline__ void mma_queries(const float* qs, int D, float* fq, uint4* qfrag) {
  if (threadIdx.x < NG) {
    const int n = int(threadIdx.x);
    float amax = 0.0f;
    for (int j = 0; j < D; ++j) amax = fmaxf(amax, fabsf(qs[n * D + j]));
    fq[n] = ldexpf(1.0f, -f16_shift(amax));
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D / 16 * 32; i += blockDim.x) {
    const int ks = i / 32, n = i % 32 / 4, e0 = 32 * (ks / 2) + 16 * (ks % 2) + 4 * (i % 4);
    uint32_t hi[2] = {0, 0}, lo[2] = {0, 0};
    if (n < NG)
      for (int p = 0; p < 2; ++p) {
        const float* x = qs + n * D + e0 + 2 * p;
        split_f16(x[0] / fq[n], x[1] / fq[n], hi[p], lo[p]);  // exact: fq is a power of 2
      }
    qfrag[i] = uint4{hi[0], hi[1], lo[0], lo[1]};
  }
  __syncthreads();
}

// token_tiles' scores on the CUDA cores: lane t scores token t (row kr of the
// tile) against the NG queries qs [NG][D], per 32-group the integer quants
// times q summed in f32, times the group's scale (int4: plus min x qsum).
template <int T, int E, int NG>
__device__ __forceinline__ void score_simt(const uint8_t* kr, const float* qs, const float* qsum, int D, int ngrp,
                                           float (&s)[NG]) {
#pragma unroll
  for (int g = 0; g < NG; ++g) s[g] = 0.0f;
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
}

// Decode with an int8 / int4 K (= V type T): each warp takes tiles of kTile =
// 32 tokens, copies their K rows (whole runs of a block's consecutive rows, 16
// bytes a lane at a time) into its shared memory, and scores them against the
// NG queries: lane t scores token t (score_simt: per 32-group, the integer
// quants times q summed in f32, times the group's scale; int4: plus min x the
// group's sum of q), or with kMma the warp's tensor-core MMAs score the tile
// (score_mma) and lane t reads token t's scores back from shared memory. No
// score needs a reduction over lanes, and each scale is read once a row (on
// the CUDA cores). The tile's softmax is a warp max and sum per head; the weights go to
// shared memory, and in P.V each lane holds a run of consecutive elements of
// a V row, inside one 32-group, so a token costs it one load of quants and one
// of the group's scale, 4 tokens at a time. Tiles start at multiples of
// 32 tokens (the splits' chunks are multiples of 32), so with block_tokens
// dividing 32 or a multiple of it a tile is whole runs of blocks, each run
// 16-byte aligned (decode_cuda_token_tiles_fit).
template <int T, int E, int NG, bool kMma>
__global__ void __launch_bounds__(kWarps * 32) decode_tiles_kernel(DecodeArgs a) {
  static_assert(T == int(KvType::int8) || T == int(KvType::int4), "token tiles take an int8 or int4 K");
  LLMK_DYNAMIC_SMEM(float, smem);
  const int64_t b = blockIdx.x, hk = blockIdx.y / a.groups, split = blockIdx.z;
  const int64_t G = a.Hq / a.Hkv, g0 = (blockIdx.y % a.groups) * NG;
  const int ng = int(min(int64_t(NG), G - g0));
  const int D = int(a.D), ngrp = (D + 31) / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const TilesSmem lay = tiles_smem(NG, D, a.krow, kMma);
  float* qs = smem;                                              // [NG][D], heads past ng 0
  float* qsum = smem + NG * D;                                   // [NG][ngrp] (int4)
  float* fq = qsum + NG * ngrp;                                  // [NG] (kMma)
  uint4* qfrag = reinterpret_cast<uint4*>(smem + lay.q_floats);  // (kMma)
  uint8_t* area = reinterpret_cast<uint8_t*>(smem + lay.area_floats) + warp * lay.warp_bytes;
  uint4* ktile = reinterpret_cast<uint4*>(area);                 // kTile rows of krow bytes
  float* wts = reinterpret_cast<float*>(area + lay.tile_bytes);  // [kTile][NG]
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
  if constexpr (kMma) mma_queries<NG>(qs, D, fq, qfrag);

  const SplitRange range = split_range(a, b, split, kTile);
  const int64_t k0 = range.k0, k1 = range.k1, lo = range.lo;
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
  // token_tiles_mma with 4 or 8 heads a CTA up to head_dim 128: P.V by MMAs
  // (pv_mma) into pacc, int4's min term into pmin. One head (MHA) keeps the
  // runs (the MMAs' B would be 1 column of 8, and pv_mma's SASS a token is
  // more than the runs'), as does head_dim > 128 (2E m-tiles of 4 floats
  // would be 64 registers a lane).
  constexpr bool kMmaPv = kMma && E <= 4 && NG > 1;
  float pacc[2 * E][4] = {}, pmin[E] = {};
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
    const uint32_t row = kv_pool_row(uint32_t(blocks[blk]), hkv, hk32, bt, uint32_t(p - blk * a.bt));
    // tokens before the window's first (tlo of them: the first tile of a
    // window) are scored -inf, and P.V reads token tlo's V row for them and
    // for the lanes past nv (weight 0), never their own or the tile's first,
    // which may hold a NaN
    const int tlo = int(max(int64_t(0), min(int64_t(nv - 1), lo - p0)));
    const uint32_t rlo = __shfl_sync(0xffffffffu, row, tlo), prow = lane < tlo || lane >= nv ? rlo : row;
    __syncwarp();                           // the previous tile's reads of ktile and wts are done
    for (int r0 = 0; r0 < nv; r0 += run) {  // one run of consecutive rows at a time
      const uint4* src = reinterpret_cast<const uint4*>(a.k + uint64_t(__shfl_sync(0xffffffffu, row, r0)) * a.krow);
      uint4* dst = ktile + int64_t(r0) * a.krow / 16;
      // rounded up to 16 bytes: past the last row only in a partial run, still inside its block
      const int chunks = int((int64_t(min(run, nv - r0)) * a.krow + 15) / 16);
      for (int c = lane; c < chunks; c += 32) dst[c] = src[c];
    }
    __syncwarp();

    float s[NG];  // lane t's scores of token p0 + t, in log2 units
    if constexpr (kMma) {
      score_mma<T, E, NG>(reinterpret_cast<const uint8_t*>(ktile), a.krow, qfrag, fq, qsum, D, ngrp, wts);
      __syncwarp();
#pragma unroll
      for (int g = 0; g < NG; ++g) s[g] = wts[lane * NG + g];
    } else {
      score_simt<T, E, NG>(reinterpret_cast<const uint8_t*>(ktile) + lane * a.krow, qs, qsum, D, ngrp, s);
    }

    // the tile's online softmax, head by head (m, l the same in every lane)
    float alpha[NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      const float sc = lane < nv && lane >= tlo ? s[g] : -INFINITY;
      const float mn = fmaxf(m[g], warp_max(sc));
      // every score so far -inf: weight 0 (2^(-inf - 0)), not NaN; alpha 0 on acc and l still 0
      const float mu = mn == -INFINITY ? 0.0f : mn;
      alpha[g] = exp2_fast(m[g] - mu);
      const float w = exp2_fast(sc - mu);
      l[g] = l[g] * alpha[g] + warp_sum(w);
      m[g] = mn;
      wts[lane * NG + g] = w;
    }
    if constexpr (kMmaPv) {
      // pacc's columns are heads 2t and 2t + 1, pmin's head g (lane = 4 g + t)
      float a0 = 1.0f, a1 = 1.0f, ag = 1.0f;
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        if (g == 2 * (lane % 4)) a0 = alpha[g];
        if (g == 2 * (lane % 4) + 1) a1 = alpha[g];
        if (g == lane / 4) ag = alpha[g];
      }
#pragma unroll
      for (int mt = 0; mt < 2 * E; ++mt) pacc[mt][0] *= a0, pacc[mt][1] *= a1, pacc[mt][2] *= a0, pacc[mt][3] *= a1;
#pragma unroll
      for (int c = 0; c < E; ++c) pmin[c] *= ag;
      __syncwarp();
      pv_mma<T, E, NG>(a, prow, wts, D, ngrp, pacc, pmin);
    } else {
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
          const uint8_t* vb = a.v + uint64_t(__shfl_sync(0xffffffffu, prow, t & 31)) * a.vrow;
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
  }
  if constexpr (T == int(KvType::int4)) {
#pragma unroll
    for (int g = 0; g < NG; ++g)
#pragma unroll
      for (int i = 0; i < C; ++i) acc[g][i] += accm[g];
  }
  __syncthreads();  // every warp is done with its tile before the merge reuses the space
  if constexpr (kMmaPv) {
    // pacc (rows: pv_mma_elem; columns 2t, 2t + 1) plus int4's min term (head
    // h's in lanes 4h ..) to the warp's (m, l, acc) in shared memory
    float* ws = smem + lay.area_floats;
    const int t = lane % 4;
    float pm0[E], pm1[E];
#pragma unroll
    for (int c = 0; c < E; ++c) {
      pm0[c] = __shfl_sync(0xffffffffu, pmin[c], 4 * (2 * t));
      pm1[c] = __shfl_sync(0xffffffffu, pmin[c], 4 * (2 * t + 1));
    }
#pragma unroll
    for (int g = 0; g < NG; ++g)
      if (g < ng && lane == 0) ws[(warp * NG + g) * (D + 2)] = m[g], ws[(warp * NG + g) * (D + 2) + 1] = l[g];
#pragma unroll
    for (int mt = 0; mt < 2 * E; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int col = 2 * t + i % 2, j = pv_mma_elem<T>(mt, lane / 4 + 8 * (i / 2));
        const float mterm = T == int(KvType::int4) ? (i % 2 ? pm1[mt / 2] : pm0[mt / 2]) : 0.0f;
        if (col < ng && j < D) ws[(warp * NG + col) * (D + 2) + 2 + j] = pacc[mt][i] + mterm;
      }
    merge_stored<NG>(a, ws, ng, g0, split);
  } else {
    merge_warps<C, NG, true>(a, smem + lay.area_floats, m, l, acc, ng, g0, split);
  }
}

template <int T, bool kMma>
cudaError_t launch_tiles_g(const DecodeArgs& a, int64_t B, cudaStream_t s) {
  return by_layout(a, [&]<int E, int NG>() {
    const dim3 grid(unsigned(B), unsigned(a.Hkv * a.groups), unsigned(a.splits));
    const size_t smem = size_t(tiles_smem(NG, a.D, a.krow, kMma).total);
    LLMK_CUDA_RETURN_IF_ERROR(cuda::allow_dynamic_smem(decode_tiles_kernel<T, E, NG, kMma>, smem));
    LLMK_LAUNCH(grid, kWarps * 32, smem, s, decode_tiles_kernel<T, E, NG, kMma>)(a);
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t launch_decode_tiles(const DecodeArgs& a, int64_t B, bool mma, cudaStream_t s) {
  if (a.kt == KvType::int8)
    return mma ? launch_tiles_g<int(KvType::int8), true>(a, B, s) : launch_tiles_g<int(KvType::int8), false>(a, B, s);
  return mma ? launch_tiles_g<int(KvType::int4), true>(a, B, s) : launch_tiles_g<int(KvType::int4), false>(a, B, s);
}

}  // namespace llmk::attn
