// The matmul kernels (include/llmk/matmul.hpp), written once:
//  - float weights (f32/f16/bf16) as a template over the ISA struct S of
//    src/core/simd.hpp (S::load converts f16/bf16 in registers);
//  - quantized weights on 256-bit integer ops (AVX2, also compiled into the
//    AVX-512 translation units, whose flags imply AVX2: without VNNI the 512-bit
//    form would only halve the loop count of an already issue-bound loop; with
//    VNNI, matmul_avx512vnni.cpp, each 32-byte dot is one vpdpbusd).
// A tile of R <= 4 rows of x is dotted against one weight row at a time, so a
// weight block is loaded and unpacked once for R activations. Work is split
// by the caller over output rows [n0, n1).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "llmk/matmul.hpp"
#include "model/quant_blocks.hpp"
#include "core/simd.hpp"

namespace llmk::mm {

struct Args {
  const float* x;     // [M, ldx] f32 (float weights)
  int64_t ldx;
  const ActQ8* xq;    // [M, K/32] quantized x (quantized weights)
  WeightView w;       // [N, K]
  float* y;           // [M, ldy]
  int64_t ldy;
  int64_t M;
};
using RowsFn = void (*)(const Args&, int64_t n0, int64_t n1);

// Everything below but the entry points is defined in each translation unit
// that includes this header (matmul.cpp, matmul_avx2.cpp, matmul_avx512.cpp),
// each with its own ISA flags: the unnamed namespace keeps their copies apart
// (docs/CONTRIBUTING.md, tests/core/check_isa_leaks.py).
namespace {
inline constexpr int kTile = 4;     // rows of x sharing a weight row
inline constexpr int64_t kNChunk = 32;  // weight rows kept hot while the x tiles sweep them
// Note: every row of x is summed in the same order whatever the tile size R, the
// thread count or the other rows of the batch: two accumulator chains per row.
// So a token's result never depends on what it was batched with (batched and
// one-by-one generation, cached and uncached logits, agree bit for bit).

// Runs tile(R, m0, n) over [n0, n1) x [0, M) with R = min(kTile, M - m0),
// weight rows in chunks so they stay in L1/L2 across the x tiles.
template <class Tile>
inline void sweep(const Args& a, int64_t n0, int64_t n1, Tile&& tile) {
  for (int64_t c = n0; c < n1; c += kNChunk) {
    const int64_t ce = std::min(n1, c + kNChunk);
    for (int64_t m0 = 0; m0 < a.M; m0 += kTile) {
      const int r = int(std::min<int64_t>(kTile, a.M - m0));
      for (int64_t n = c; n < ce; ++n) tile(r, m0, n);
    }
  }
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <class S, int R, class T>
inline void float_tile(const Args& a, int64_t m0, int64_t n) {
  using V = typename S::V;
  constexpr int W = S::kWidth, U = 2;  // 2 chains per row, for every R (see the note above sweep)
  const int64_t K = a.w.cols;
  const T* wr = reinterpret_cast<const T*>(static_cast<const char*>(a.w.data) + n * a.w.row_bytes);
  const float* x = a.x + m0 * a.ldx;
  V acc[R][U];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) acc[r][u] = S::zero();
  int64_t k = 0;
  for (; k + U * W <= K; k += U * W)
    for (int u = 0; u < U; ++u) {
      const V wv = S::load(wr + k + u * W);
      for (int r = 0; r < R; ++r) acc[r][u] = S::fmadd(wv, S::load(x + r * a.ldx + k + u * W), acc[r][u]);
    }
  for (; k + W <= K; k += W) {
    const V wv = S::load(wr + k);
    for (int r = 0; r < R; ++r) acc[r][0] = S::fmadd(wv, S::load(x + r * a.ldx + k), acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = S::add(acc[r][0], acc[r][u]);
    float s = S::hsum(acc[r][0]);
    for (int64_t kk = k; kk < K; ++kk) s += to_f32(wr[kk]) * x[r * a.ldx + kk];
    a.y[(m0 + r) * a.ldy + n] = s;
  }
}

// 32 unsigned nibbles of a Q4 block: bytes 0..15 the low nibbles, 16..31 the high
// (the 16 bytes in both halves, the high half shifted by 4: 3 instructions).
inline __m256i unpack_q4(const uint8_t* qs) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
}

template <int R, class B>
inline void quant_tile(const Args& a, int64_t m0, int64_t n) {
  constexpr int U = 2;  // alternate two accumulators across blocks, for every R (see the note above sweep)
  constexpr bool kQ8 = std::is_same_v<B, BlockQ8_0>, kQ41 = std::is_same_v<B, BlockQ4_1>;
  const int64_t nb = a.w.cols / kQBlock;
  const B* wb = reinterpret_cast<const B*>(static_cast<const char*>(a.w.data) + n * a.w.row_bytes);
  const ActQ8* xq = a.xq + m0 * nb;
  __m256 acc[R][U];
  __m128 mterm[R];  // Q4_1: lane 1 sums m_w * s_x over the blocks (lane 0 is unused)
  float bias[R] = {};  // Q4_0: -8 d_w s_x summed
  for (int r = 0; r < R; ++r) {
    for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
    mterm[r] = _mm_setzero_ps();
  }
  // Block b goes to accumulator u = b % U, u a constant in each call (a runtime
  // index kept acc in memory: a load and a store a block and row).
  const auto block = [&](int64_t b, auto uc) __attribute__((always_inline)) {
    constexpr int u = decltype(uc)::value;
    // The block's f16 scales as f32 lanes in one conversion (F16C): [d_w, m_w, 0, 0]
    // for Q4_1 (d and m are adjacent), [d_w, 0, 0, 0] otherwise.
    uint32_t bits = wb[b].d;
    if constexpr (kQ41) std::memcpy(&bits, &wb[b].d, 4);
    const __m128 ws = _mm_cvtph_ps(_mm_cvtsi32_si128(int(bits)));
    __m256i wv;
    if constexpr (kQ8) {
      wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs));
    } else {
      wv = unpack_q4(wb[b].qs);
    }
    const __m256i wabs = kQ8 ? _mm256_sign_epi8(wv, wv) : wv;
    for (int r = 0; r < R; ++r) {
      const ActQ8& xa = xq[r * nb + b];
      __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa.qs));
      if constexpr (kQ8) xv = _mm256_sign_epi8(xv, wv);  // move w's sign onto x
      const __m256 d = _mm256_cvtepi32_ps(simd::dot_u8s8(wabs, xv));
      if constexpr (kQ41) {
        // [d_w d_x, m_w s_x, 0, 0] in one multiply: x's d and s are adjacent too
        const __m128 p = _mm_mul_ps(ws, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(&xa.d))));
        acc[r][u] = _mm256_fmadd_ps(d, _mm256_broadcastss_ps(p), acc[r][u]);
        mterm[r] = _mm_add_ps(mterm[r], p);
      } else {
        const float dw = _mm_cvtss_f32(ws);
        acc[r][u] = _mm256_fmadd_ps(d, _mm256_set1_ps(dw * xa.d), acc[r][u]);
        if constexpr (std::is_same_v<B, BlockQ4_0>) bias[r] -= 8.0f * dw * xa.s;
      }
    }
  };
  static_assert(U == 2, "the loop below alternates two accumulators");
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    block(b, std::integral_constant<int, 0>{});
    block(b + 1, std::integral_constant<int, 1>{});
  }
  if (b < nb) block(b, std::integral_constant<int, 0>{});
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r][0]), _mm256_extractf128_ps(acc[r][0], 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    if constexpr (kQ41) bias[r] = _mm_cvtss_f32(_mm_movehdup_ps(mterm[r]));
    a.y[(m0 + r) * a.ldy + n] = _mm_cvtss_f32(s) + bias[r];
  }
}

template <class Fn>
inline void by_rows(int r, Fn&& fn) {
  switch (r) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    default: fn(std::integral_constant<int, 4>{}); break;
  }
}

template <class S>
void rows(const Args& a, int64_t n0, int64_t n1) {
  auto run = [&](auto tile_of) {
    sweep(a, n0, n1, [&](int r, int64_t m0, int64_t n) { by_rows(r, [&](auto R) { tile_of(R, m0, n); }); });
  };
  switch (a.w.type) {
    case WType::f32: run([&](auto R, int64_t m0, int64_t n) { float_tile<S, decltype(R)::value, float>(a, m0, n); }); break;
    case WType::f16: run([&](auto R, int64_t m0, int64_t n) { float_tile<S, decltype(R)::value, f16>(a, m0, n); }); break;
    case WType::bf16: run([&](auto R, int64_t m0, int64_t n) { float_tile<S, decltype(R)::value, bf16>(a, m0, n); }); break;
    case WType::q8_0: run([&](auto R, int64_t m0, int64_t n) { quant_tile<decltype(R)::value, BlockQ8_0>(a, m0, n); }); break;
    case WType::q4_0: run([&](auto R, int64_t m0, int64_t n) { quant_tile<decltype(R)::value, BlockQ4_0>(a, m0, n); }); break;
    case WType::q4_1: run([&](auto R, int64_t m0, int64_t n) { quant_tile<decltype(R)::value, BlockQ4_1>(a, m0, n); }); break;
  }
}
#endif

}  // namespace

void rows_scalar(const Args& a, int64_t n0, int64_t n1);
void rows_avx2(const Args& a, int64_t n0, int64_t n1);
void rows_avx512(const Args& a, int64_t n0, int64_t n1);
void rows_avx512vnni(const Args& a, int64_t n0, int64_t n1);

}  // namespace llmk::mm
