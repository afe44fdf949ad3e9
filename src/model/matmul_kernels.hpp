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
#include <iterator>
#include <type_traits>

#include "llmk/matmul.hpp"
#include "model/matmul_decode.hpp"
#include "model/quant_blocks.hpp"
#include "core/simd.hpp"

namespace llmk::mm {

struct Args {
  const float* x;  // [M, ldx] f32 (float weights)
  int64_t ldx;
  const ActQ8* xq;  // [M, K/32] quantized x (quantized weights)
  WeightView w;     // [N, K]
  float* y;         // [M, ldy]
  int64_t ldy;
  int64_t M;
};
using RowsFn = void (*)(const Args&, int64_t n0, int64_t n1);

// Everything below but the entry points is defined in each translation unit
// that includes this header (matmul.cpp, matmul_avx2.cpp, matmul_avx512.cpp),
// each with its own ISA flags: the unnamed namespace keeps their copies apart
// (docs/CONTRIBUTING.md, tests/core/check_isa_leaks.py).
namespace {
inline constexpr int kTile = 4;         // rows of x sharing a weight row
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
// Byte j = 0x10 where bit j of the 32 bits at p is set, else 0 (Q5 fifth bits).
inline __m256i bits_to_0x10(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(v)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}
// Bytes of 32 consecutive values >> shift (shift < 8), each masked to `mask`.
inline __m256i shifted_bits(const uint8_t* p, int shift, int mask) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(char(mask)));
}

// The 32 codes of chunk c of block blk, one per byte (element order), as the kernel
// dots them: unsigned codes, or signed ones for the types with Decode<B>::kSigned.
// S (the ISA struct) only names the instantiation after its path (tests/core/check_isa_leaks.py).
template <class S, class B>
inline __m256i codes_of(const B& blk, int c) {
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
  } else if constexpr (std::is_same_v<B, BlockQ4_0> || std::is_same_v<B, BlockQ4_1>) {
    return unpack_q4(blk.qs);
  } else if constexpr (std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>) {
    return _mm256_or_si256(unpack_q4(blk.qs), bits_to_0x10(blk.qh));
  } else if constexpr (std::is_same_v<B, BlockQ2_K>) {
    return shifted_bits(blk.qs + 32 * (c / 4), 2 * (c % 4), 3);
  } else if constexpr (std::is_same_v<B, BlockQ3_K>) {
    const __m256i lo = shifted_bits(blk.qs + 32 * (c / 4), 2 * (c % 4), 3);
    const __m256i hi = shifted_bits(blk.hmask, 4 * (c / 4) + c % 4, 1);  // 1: no offset
    return _mm256_sub_epi8(lo, _mm256_andnot_si256(_mm256_slli_epi16(hi, 2), _mm256_set1_epi8(4)));
  } else if constexpr (std::is_same_v<B, BlockQ4_K>) {
    return shifted_bits(blk.qs + 32 * (c / 2), 4 * (c & 1), 15);
  } else if constexpr (std::is_same_v<B, BlockQ5_K>) {
    const __m256i hi = shifted_bits(blk.qh, c, 1);
    return _mm256_or_si256(shifted_bits(blk.qs + 32 * (c / 2), 4 * (c & 1), 15), _mm256_slli_epi16(hi, 4));
  } else {
    static_assert(std::is_same_v<B, BlockQ6_K>);
    const int h = c / 4, j = c % 4;
    const __m256i lo = shifted_bits(blk.ql + 64 * h + 32 * (j & 1), 4 * (j >> 1), 15);
    const __m256i hi = shifted_bits(blk.qh + 32 * h, 2 * j, 3);
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
  }
}

// Software prefetch of the weight stream, kPrefetchAhead bytes ahead of the block in use,
// every line of `bytes`: a decode step reads each weight once, and the hardware prefetcher
// alone leaves the load of each new block's scales exposed (the tile's hottest instruction
// in a profile at 8B). Rows are contiguous, so past a row's end it fetches the next row.
inline constexpr int64_t kPrefetchAhead = 1024;
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p) + kPrefetchAhead;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

// The tile for block types: per 32-value chunk, lane-wise int dots of the codes with the
// int8 activation (8 int32 lanes: lanes 0..3 the chunk's first 16 values, 4..7 the
// others), converted to f32 and scaled by [fw0 x4, fw1 x4] * d_x; the offset fo * s_x and
// (Q2_K) the mins' dots on the side. Decode<B> (matmul_decode.hpp) holds the scales.
template <class S, int R, class B>
inline void quant_tile(const Args& a, int64_t m0, int64_t n) {
  using D = Decode<B>;
  constexpr int C = D::kChunks;
  const int64_t nbx = a.w.cols / kQBlock, nblk = nbx / C;
  const B* wb = reinterpret_cast<const B*>(static_cast<const char*>(a.w.data) + n * a.w.row_bytes);
  const ActQ8* xq = a.xq + m0 * nbx;
  __m256 acc[R][2];
  float bias[R] = {};
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  typename D::Scales sc;
  // Chunk g = b * C + c goes to accumulator g % 2, a constant in each call (a runtime
  // index kept acc in memory: a load and a store a chunk and row).
  const auto chunk = [&](int64_t b, int c, auto uc) __attribute__((always_inline)) {
    constexpr int u = decltype(uc)::value;
    const __m256i w = codes_of<S>(wb[b], c);
    const __m256i wabs = D::kSigned ? _mm256_sign_epi8(w, w) : w;
    const __m256 fw = _mm256_setr_m128(_mm_set1_ps(sc.fw[c][0]), _mm_set1_ps(sc.fw[c][1]));
    __m256i mins = _mm256_setzero_si256();
    if constexpr (D::kMins) mins = _mm256_setr_m128i(_mm_set1_epi8(char(sc.m[c][0])), _mm_set1_epi8(char(sc.m[c][1])));
    for (int r = 0; r < R; ++r) {
      const ActQ8& xa = xq[r * nbx + b * C + c];
      __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa.qs));
      if constexpr (D::kMins)
        acc[r][u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(simd::dot_u8s8(mins, xv)), _mm256_set1_ps(sc.fm * xa.d),
                                    acc[r][u]);
      if constexpr (D::kSigned) xv = _mm256_sign_epi8(xv, w);  // move w's sign onto x
      const __m256 dot = _mm256_cvtepi32_ps(simd::dot_u8s8(wabs, xv));
      acc[r][u] = _mm256_fmadd_ps(dot, _mm256_mul_ps(fw, _mm256_set1_ps(xa.d)), acc[r][u]);
      if constexpr (D::kOffset) bias[r] += sc.fo[c] * xa.s;
    }
  };
  using Z = std::integral_constant<int, 0>;
  using O = std::integral_constant<int, 1>;
  if constexpr (C == 1) {
    int64_t b = 0;
    for (; b + 2 <= nblk; b += 2) {
      prefetch_ahead(wb + b, 2 * sizeof(B));
      D::scales(wb[b], sc);
      chunk(b, 0, Z{});
      D::scales(wb[b + 1], sc);
      chunk(b + 1, 0, O{});
    }
    if (b < nblk) {
      D::scales(wb[b], sc);
      chunk(b, 0, Z{});
    }
  } else {
    static_assert(C % 2 == 0, "chunks alternate between two accumulators");
    for (int64_t b = 0; b < nblk; ++b) {
      prefetch_ahead(wb + b, sizeof(B));
      D::scales(wb[b], sc);
      for (int c = 0; c < C; c += 2) {
        chunk(b, c, Z{});
        chunk(b, c + 1, O{});
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m256 t = _mm256_add_ps(acc[r][0], acc[r][1]);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
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

template <class S, class T>
void float_rows(const Args& a, int64_t n0, int64_t n1) {
  sweep(a, n0, n1, [&](int r, int64_t m0, int64_t n) {
    by_rows(r, [&](auto R) { float_tile<S, decltype(R)::value, T>(a, m0, n); });
  });
}
template <class S, class B>
void quant_rows(const Args& a, int64_t n0, int64_t n1) {
  sweep(a, n0, n1, [&](int r, int64_t m0, int64_t n) {
    by_rows(r, [&](auto R) { quant_tile<S, decltype(R)::value, B>(a, m0, n); });
  });
}
// The kernels of every storage type, in WType order (the CPU side of the traits table).
template <class S>
constexpr RowsFn kRows[] = {float_rows<S, float>,     float_rows<S, f16>,       float_rows<S, bf16>,
                            quant_rows<S, BlockQ8_0>, quant_rows<S, BlockQ4_0>, quant_rows<S, BlockQ4_1>,
                            quant_rows<S, BlockQ5_0>, quant_rows<S, BlockQ5_1>, quant_rows<S, BlockQ2_K>,
                            quant_rows<S, BlockQ3_K>, quant_rows<S, BlockQ4_K>, quant_rows<S, BlockQ5_K>,
                            quant_rows<S, BlockQ6_K>};
template <class S>
void rows(const Args& a, int64_t n0, int64_t n1) {
  static_assert(std::size(kRows<S>) == size_t(kWTypeCount), "one kernel per WType");
  kRows<S>[int(a.w.type)](a, n0, n1);
}
#endif

}  // namespace

void rows_scalar(const Args& a, int64_t n0, int64_t n1);
void rows_avx2(const Args& a, int64_t n0, int64_t n1);
void rows_avx512(const Args& a, int64_t n0, int64_t n1);
void rows_avx512vnni(const Args& a, int64_t n0, int64_t n1);

}  // namespace llmk::mm
