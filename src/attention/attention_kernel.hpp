// The CPU attention kernel, written once over an ISA struct (attn::Scalar,
// simd::Avx2, simd::Avx512) and instantiated in attention.cpp,
// attention_avx2.cpp and attention_avx512.cpp.
//
// One work item = R query rows per KV head (the G heads of a GQA group, times
// the query tokens of a prefill tile) for nh consecutive KV heads, against kv
// positions [k0, k1) of one sequence, each row r also capped causally at
// limit[r]. Positions are walked in tiles of up to kTile = 32 positions in at
// most two runs of rows (the rest of one block, the start of the next:
// TileRows), or 16 inside one block for a float V whose tile of rows would
// pass 16 KiB (attend() says why). Each tile is done for the item's heads in turn before the next
// tile: the pool stores a block's heads one after another
// ([block][head][token]), so decode items, which hold every head of the
// sequence, read each block as one run of nh * block_tokens rows instead of nh
// runs far apart (an item per head read 16-token runs of 8 KiB,
// f32 Llama-3-8B, scattered over the pool: twice the time of a contiguous
// read on this machine; whole blocks: within 20% of it). The next (tile, head)'s K and V rows are
// prefetched into L2 a little at a time while this one is computed (Spread).
// Per tile and head: the scores of the
// tile's K rows against the head's R queries (f16/bf16 rows converted in registers);
// an online-softmax step per row (running max m, sum l, rescale alpha); then
// P.V: the V rows are read once per 4 query rows and dequantized in registers
// (int8/int4: the per-32 scale folded into the weight p * d, the int4 min into
// one term per row and group), accumulated into 4 x 2 register vectors of acc
// that also take the rescale (the scalar path). On AVX2 and AVX-512, int8/int4
// V instead takes the weights p * d as 16-bit integers scaled by a power of two
// per (tile, row, group) and sums quants * weights in int32 (vpdpwssd /
// vpmaddwd: half the multiplies of the FMAs; pv_weights<.., true>,
// pv_int_rows_avx512, pv_q8_rows_avx2, and the error bound in
// docs/kv_cache.md); on AVX2, and compiled with VBMI (attention_avx512vbmi.cpp),
// an int4 V takes 8-bit weights against centered quants (vpmaddubsw two
// positions at a time, pv_q4_rows_avx2; vpdpbusd four at a time,
// pv_q4_rows_avx512vbmi, kPvBytes). Nothing is dequantized to memory. A row's
// arithmetic depends only on its own q, its limit and the positions, never on
// the other rows or heads of the item (a block of 4 rows runs to its longest visible
// count: the others' extra terms have p = 0 exactly and add exact zeros).
//
// Quantized K (int8, int4) is not dequantized: each query row is quantized
// once per item to int8 per 32-group (QuantQ, like llama.cpp's Q8 activations
// against quantized weights), and a score is sum over groups of
// d_k * d_q * (integer dot of the quants) [+ m_k * d_q * sum(q quants) for int4],
// the integer dots done 32 values at a time (attn_simd.hpp; with AVX-512 VNNI
// a whole tile at once, score_tile_avx512vnni, and on AVX2 8 keys at once,
// score_tile_avx2). This changes the
// scores by at most sum_g d_q,g/2 * sum_{c in g} |k_c| (k dequantized): see
// QuantQ and tests/attention.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attention/attn_simd.hpp"
#include "llmk/kv_cache.hpp"

namespace llmk::attn {

struct Item {
  const float* q = nullptr;         // [nh][R][D] queries, already multiplied by the softmax scale
  const int64_t* limit = nullptr;   // [R] last position (inclusive) row r may see (every head)
  int R = 0;                        // rows per head
  int64_t k0 = 0, k1 = 0;           // kv positions to visit
  const int32_t* blocks = nullptr;  // the sequence's block ids
  int64_t h = 0;                    // first kv head
  int nh = 1;                       // kv heads h .. h + nh
  float* m = nullptr;               // [nh][R] running max (in: -inf)
  float* l = nullptr;               // [nh][R] running sum (in: 0)
  float* acc = nullptr;             // [nh][R][D] unnormalized output (in: 0)
};

// Everything else is defined in every translation unit that includes this
// header (attention.cpp for the scalar path, attention_avx2.cpp,
// attention_avx512.cpp), each compiled with its own ISA flags, hence the
// unnamed namespace: each keeps its own copies, so the linker can never hand
// one path a helper compiled for another (tests/core/check_isa_leaks.py).
namespace {

// f(std::integral_constant<int, nr>{}) for the row counts 1..4 a row group can have: the
// compile-time row count the *_rows kernels are instantiated with.
template <class F>
[[gnu::always_inline]] inline void with_rows(int nr, F&& f) {
  switch (nr) {
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 1: f(std::integral_constant<int, 1>{}); break;
  }
}

// f(nr, r) over rows 0..R in blocks of 4 from r = 0, then the last 1..3 rows
// (nr a std::integral_constant, as with_rows).
template <class F>
[[gnu::always_inline]] inline void by_row_blocks(int R, F&& f) {
  int r = 0;
  for (; r + 4 <= R; r += 4) f(std::integral_constant<int, 4>{}, r);
  switch (R - r) {  // not with_rows: a case 4 here would be a second call site of f's 4-row body
    case 3: f(std::integral_constant<int, 3>{}, r); break;
    case 2: f(std::integral_constant<int, 2>{}, r); break;
    case 1: f(std::integral_constant<int, 1>{}, r); break;
  }
}

// f(std::integral_constant<KvType, t>{}): the storage type as a template argument.
template <class F>
[[gnu::always_inline]] inline void with_type(KvType t, F&& f) {
  switch (t) {
    case KvType::f32: f(std::integral_constant<KvType, KvType::f32>{}); break;
    case KvType::f16: f(std::integral_constant<KvType, KvType::f16>{}); break;
    case KvType::bf16: f(std::integral_constant<KvType, KvType::bf16>{}); break;
    case KvType::int8: f(std::integral_constant<KvType, KvType::int8>{}); break;
    case KvType::int4: f(std::integral_constant<KvType, KvType::int4>{}); break;
  }
}

// S is simd::Avx2 or AvxVnni (which the scalar translation unit does not define).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <class S>
inline constexpr bool kIsAvx2 = std::is_same_v<S, simd::Avx2> || kAvxVnni<S>;
#else
template <class S>
inline constexpr bool kIsAvx2 = false;
#endif

inline constexpr int kTile = 32;  // kv tokens per softmax step
inline constexpr int kQTile = 8;  // prefill query tokens per work item

inline int64_t groups_of(int64_t D) { return (D + kKvGroup - 1) / kKvGroup; }
inline constexpr int kKvMaxGroups = 8;  // head_dim <= 256

// int4 V on AVX-512 with VBMI and VNNI: P.V takes 8-bit weights, four
// positions a vpdpbusd (pv_q4_rows_avx512vbmi); at the other AVX-512 levels
// 16-bit ones, two a vpdpwssd. (AVX2 takes 8-bit ones too: int_weights_avx2.)
template <KvType T>
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
inline constexpr bool kPvBytes = T == KvType::int4;
#else
inline constexpr bool kPvBytes = false;
#endif

// Prefetch of the next tile's K or V rows [p, p + bytes) into L2, issued in
// `parts` equal parts as the current tile's work progresses (part() per token
// of the scores, per chunk of P.V; rest() at the end). A tile's 2 x 16 rows
// issued at once (up to 256 lines for f32) fill the core's miss buffers and
// stall the loads of the tile being computed: measured with
// `llmk bench attention`, spreading them took paged f16 decode at ctx 8192
// from ~1.3x the contiguous time to within a few percent. A tile's rows lie
// in at most two runs (TileRows): p[0, bytes) and p2[0, bytes2).
struct Spread {
  uintptr_t next = 0, end = 0, step = 0;  // next line to ask for, one past the run, bytes a part
  uintptr_t next2 = 0, end2 = 0;          // the second run
  Spread(const uint8_t* p, int64_t bytes, const uint8_t* p2, int64_t bytes2, int64_t parts)
      : next(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63)),
        end(reinterpret_cast<uintptr_t>(p) + uintptr_t(bytes)),
        next2(reinterpret_cast<uintptr_t>(p2) & ~uintptr_t(63)),
        end2(reinterpret_cast<uintptr_t>(p2) + uintptr_t(bytes2)) {
    if (bytes2 == 0) next2 = end2 = 0;
    step = ((end - next) / uintptr_t(parts) + 63) & ~uintptr_t(63);
  }
  // The first run a part at a time; the second (a tile over two blocks) all
  // at rest(), still a tile ahead. Taking it over in part() instead cost the
  // float paths 8% (SmolLM2 f32 decode, `llmk bench attention --only
  // smollm2,B1,ctx8192`): the one more test a part kept `next` out of a register.
  [[gnu::always_inline]] void part() {
    const uintptr_t stop = std::min(end, next + step);
    for (; next < stop; next += 64) __builtin_prefetch(reinterpret_cast<const void*>(next), 0, 2);
  }
  void rest() {
    for (; next < end; next += 64) __builtin_prefetch(reinterpret_cast<const void*>(next), 0, 2);
    for (; next2 < end2; next2 += 64) __builtin_prefetch(reinterpret_cast<const void*>(next2), 0, 2);
  }
};

// The rows of a tile's positions: t < n1 in the tile's first block (a, row
// stride `stride`), the rest from the start of the next block the sequence
// holds (b).
struct TileRows {
  const uint8_t* a = nullptr;
  const uint8_t* b = nullptr;
  int n1 = 0;
  int64_t stride = 0;
  const uint8_t* at(int t) const { return t < n1 ? a + t * stride : b + (t - n1) * stride; }
};

// f(t, row t + o, row t + 1 + o) for the position pairs t = 0, 2, .. < nb, run
// by run (a pair across the runs' seam when n1 is odd); an odd last position
// pairs with itself (its weight is 0).
template <class F>
[[gnu::always_inline]] inline void for_pairs(const TileRows& vt, int64_t o, int nb, F&& f) {
  const int64_t st = vt.stride;
  const int m = std::min(nb, vt.n1);
  int t = 0;
  for (const uint8_t* r = vt.a + o; t + 2 <= m; t += 2, r += 2 * st) f(t, r, r + st);
  if (t < m) {  // t = m - 1: the last of run a, with the first of run b or alone
    const uint8_t* r = vt.a + o + t * st;
    f(t, r, t + 1 < nb ? vt.b + o : r);
    t += 2;
  }
  const uint8_t* r = vt.b + o + (t - vt.n1) * st;
  for (; t + 2 <= nb; t += 2, r += 2 * st) f(t, r, r + st);
  if (t < nb) f(t, r, r);
}

// f(t, row of t) for t in [t0, t1), run by run: a pointer step a position,
// no test of which run t is in.
template <class F>
[[gnu::always_inline]] inline void for_rows(const TileRows& vt, int t0, int t1, F&& f) {
  const int m = std::min(t1, vt.n1);
  int t = t0;
  for (const uint8_t* r = vt.a + t * vt.stride; t < m; ++t, r += vt.stride) f(t, r);
  for (const uint8_t* r = vt.b + (t - vt.n1) * vt.stride; t < t1; ++t, r += vt.stride) f(t, r);
}

// Rows of the quantized queries: R rounded up to a multiple of 4, so the
// 4-row integer dots (qdots4) also serve the last rows of an item (the padding
// rows are zero; their lanes are never stored).
inline int quant_rows(int R) { return (R + 3) / 4 * 4; }

// Scratch floats attend<S>() needs for R rows a head and nh heads: the
// scores, the rescaling factors, the P.V weights, int4 min terms and visible
// counts (R rows each, reused head after head), and each head's quantized queries
// (quant_rows(R) rows of groups_of(D) x 32 int8, their scales, sums and integer sums).
inline constexpr int64_t kQuantFloats = kKvGroup / 4 + 3;  // 4-byte words a (row, group) of QuantQ
inline int64_t scratch_floats(int64_t D, int R, int nh) {
  const int64_t ng = groups_of(D);
  return int64_t(R) * (kTile + 1 + kTile * ng + ng + 1) + 2 * ng * kTile +
         int64_t(nh) * quant_rows(R) * ng * kQuantFloats;
}

// The queries of an item quantized for the integer dots against int8/int4 K:
// row r, group g: q8[(r * ng + g) * 32 + j] = round(q / dq) in [-127, 127] with
// dq[g * R + r] = amax / 127 (f32; 0 for an all-zero group), so
// |q - q8 * dq| <= dq / 2 (plus f32 rounding of q / dq, < 2^-23 * 127 * dq);
// qsum = dq * sum_j q8 (int4's min term) and isum = sum_j q8 (the VNNI scores'
// offset). Values past D in the last group are
// 0. R here is quant_rows(item rows): the rows past the item's are all zero.
struct QuantQ {
  int8_t* q8 = nullptr;     // [R][ng][32]
  float* dq = nullptr;      // [ng][R]
  float* qsum = nullptr;    // [ng][R]
  int32_t* isum = nullptr;  // [ng][R]
  int64_t ng = 0, R = 0;
};

inline void quantize_queries(const float* q, int R, int64_t D, QuantQ& qq) {
  for (int64_t r = 0; r < qq.R; ++r)
    for (int64_t g = 0; g < qq.ng; ++g) {
      int8_t* o = qq.q8 + (r * qq.ng + g) * kKvGroup;
      if (r >= R) {  // padding row
        std::fill(o, o + kKvGroup, int8_t(0));
        qq.dq[g * qq.R + r] = qq.qsum[g * qq.R + r] = 0.0f;
        qq.isum[g * qq.R + r] = 0;
        continue;
      }
      const float* x = q + r * D + g * kKvGroup;
      const int64_t n = std::min<int64_t>(kKvGroup, D - g * kKvGroup);
      bool finite = true;
      for (int64_t j = 0; j < n; ++j) finite &= std::isfinite(x[j]);
      if (!finite) {  // a NaN or inf query: NaN scale, so its scores are NaN as with f32 K
        std::fill(o, o + kKvGroup, int8_t(0));
        qq.dq[g * qq.R + r] = qq.qsum[g * qq.R + r] = std::numeric_limits<float>::quiet_NaN();
        qq.isum[g * qq.R + r] = 0;
        continue;
      }
      float amax = 0.0f;
      for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
      int32_t sum = 0;
      for (int64_t j = 0; j < kKvGroup; ++j) {
        o[j] = j < n ? int8_t(std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f)) : int8_t(0);
        sum += o[j];
      }
      qq.dq[g * qq.R + r] = d;
      qq.qsum[g * qq.R + r] = d * float(sum);
      qq.isum[g * qq.R + r] = sum;
    }
}

// The scalar path's quantized-K scores of rows r0..r0+NR (see qdots): one chain per row.
template <KvType T, int NR>
void qdots_scalar(const uint8_t* krow, const QuantQ& qq, int r0, float* out) {
  using S = Scalar;
  typename S::V a[NR];
  float mins[NR] = {};
  for (int i = 0; i < NR; ++i) a[i] = S::zero();
  for (int64_t g = 0; g < qq.ng; ++g) {
    const int8_t* q = qq.q8 + (int64_t(r0) * qq.ng + g) * kKvGroup;  // row r0 + i at q + i * ng * 32
    const int64_t si = g * qq.R + r0;                                // scales of row r0 + i at si + i
    if constexpr (T == KvType::int8) {
      const BlockQ8& b = reinterpret_cast<const BlockQ8*>(krow)[g];
      const float dk = h2f<Isa<S>>(b.d);
      for (int i = 0; i < NR; ++i)
        a[i] = S::fmadd(idot_q8<Isa<S>>(q + i * qq.ng * kKvGroup, b.qs), S::set1(dk * qq.dq[si + i]), a[i]);
    } else {
      const BlockQ4& b = reinterpret_cast<const BlockQ4*>(krow)[g];
      const float dk = h2f<Isa<S>>(b.d), mk = h2f<Isa<S>>(b.m);
      for (int i = 0; i < NR; ++i) {
        a[i] = S::fmadd(idot_q4<Isa<S>>(q + i * qq.ng * kKvGroup, b.qs), S::set1(dk * qq.dq[si + i]), a[i]);
        mins[i] += mk * qq.qsum[si + i];
      }
    }
  }
  for (int i = 0; i < NR; ++i) out[i * kTile] = S::hsum(a[i]) + mins[i];
}

// Scores of one quantized K row (T = int8 | int4) against query rows r0..r0+NR:
// out[i * kTile] = sum_g (d_k d_q) idot + [m_k qsum]. Vector ISAs: the dots of 4
// rows reduced together (qdots4, attn_simd.hpp; rows past NR are QuantQ's zero
// padding), so every row of an item, the last ones too, gets the same
// arithmetic. Scalar: one chain per row.
template <class S, KvType T, int NR>
void qdots(const uint8_t* krow, const QuantQ& qq, int r0, float* out) {
  if constexpr (S::kWidth > 1) {
    qdots4<Isa<S>, T == KvType::int4>(krow, qq.q8 + int64_t(r0) * qq.ng * kKvGroup, qq.dq + r0, qq.qsum + r0, qq.ng,
                                      qq.R, out, kTile, NR);
  } else {
    qdots_scalar<T, NR>(krow, qq, r0, out);
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// score_tile_avx512vnni's work for rows r0 .. r0 + NR and group g, the tile's K
// group transposed in kt (tile16_q8_avx512 / tile16_q4_avx512), its scales dk (and int4
// mins mk) in lanes: s[r * kTile + t] += (dk_t dq) dot_t [after + mk_t qsum].
// Two integer chains a row (integer sums: the split changes nothing).
template <bool Q4, int NR>
[[gnu::always_inline]] inline void rows_avx512vnni(const __m512i* kt, __m512 dk, __m512 mk, const QuantQ& qq, int r0,
                                                   int64_t g, float* s, __mmask16 live) {
  __m512i a[NR][2];
  for (int i = 0; i < NR; ++i) {  // int8: the quants went in as k + 128, so start at -128 sum(q)
    a[i][0] = Q4 ? _mm512_setzero_si512() : _mm512_set1_epi32(-128 * qq.isum[g * qq.R + r0 + i]);
    a[i][1] = _mm512_setzero_si512();
  }
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < NR; ++i) {
      int32_t qd;
      std::memcpy(&qd, qq.q8 + ((r0 + i) * qq.ng + g) * kKvGroup + 4 * j, 4);
      a[i][j & 1] = _mm512_dpbusd_epi32(a[i][j & 1], kt[j], _mm512_set1_epi32(qd));
    }
  for (int i = 0; i < NR; ++i) {
    const int64_t si = g * qq.R + r0 + i;
    float* o = s + (r0 + i) * kTile;
    __m512 f = g == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(live, o);
    if constexpr (Q4) f = _mm512_fmadd_ps(mk, _mm512_set1_ps(qq.qsum[si]), f);
    f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a[i][0], a[i][1])),
                        _mm512_mul_ps(dk, _mm512_set1_ps(qq.dq[si])), f);
    _mm512_mask_storeu_ps(o, live, f);  // the n keys only: a run's tile may end mid-row
  }
}

// score_tile_avx512vnni's 16 keys (n <= 16) at kp.
template <bool Q4>
void score_tile16_avx512vnni(const uint8_t* kp, int64_t kr, int n, const QuantQ& qq, int R, float* s, Spread& pf) {
  constexpr int kTile16 = 16;
  constexpr int64_t blk = Q4 ? int64_t(sizeof(BlockQ4)) : int64_t(sizeof(BlockQ8));
  constexpr int64_t qs_at = Q4 ? 4 : 2;              // offset of qs in the block
  const __mmask16 live = __mmask16((1u << n) - 1u);  // n <= 16
  alignas(64) int32_t off[kTile16];
  for (int t = 0; t < kTile16; ++t) off[t] = int32_t(t < n ? t * kr : 0);
  const __m512i idx = _mm512_load_si512(off);
  const uint8_t* rows[kTile16];
  for (int64_t g = 0; g < qq.ng; ++g) {
    for (int t = 0; t < kTile16; ++t) rows[t] = kp + off[t] + g * blk + qs_at;
    for (int64_t t = g * n / qq.ng; t < (g + 1) * n / qq.ng; ++t) pf.part();
    __m512i kt[8];
    if constexpr (Q4) tile16_q4_avx512(rows, kt);
    else tile16_q8_avx512(rows, kt);
    // the blocks' first 4 bytes: d (low half), and for int4 m (high half)
    const __m512i dm = _mm512_i32gather_epi32(idx, kp + g * blk, 1);
    const __m512 dk = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
    const __m512 mk = Q4 ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))) : _mm512_setzero_ps();
    by_row_blocks(
        R, [&](auto nrc, int r) __attribute__((always_inline)) {
          rows_avx512vnni<Q4, decltype(nrc)::value>(kt, dk, mk, qq, r, g, s, live);
        });
  }
}

// Quantized-K scores of a run of a tile (n <= 32 keys, 16 at a time:
// score_tile16_avx512vnni) against all R rows, with VNNI: per group, the 16
// keys transposed in registers (lane t = key t; keys past n repeat key 0, and
// their lanes are never stored) and their scales gathered, then per row 8
// vpdpbusd with a broadcast query dword: no horizontal sums, and the
// transposition is shared by all the rows (the GQA heads). The same arithmetic as qdots4 per (row, key): the exact
// integer dot of each group, then fma(dot, dk * dq, acc) over the groups in order (int4: fma(mk, qsum, acc) first): the
// same bits as the AVX-512 and AVX2 paths.
template <bool Q4>
void score_tile_avx512vnni(const uint8_t* kp, int64_t kr, int n, const QuantQ& qq, int R, float* s, Spread& pf) {
  for (int h = 0; h * 16 < n; ++h)
    score_tile16_avx512vnni<Q4>(kp + h * 16 * kr, kr, std::min(16, n - h * 16), qq, R, s + h * 16, pf);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// Lanes of an 8-bit mask (bit i: lane i) as an all-ones / zero vector.
inline __m256i lanes_avx2(uint32_t bits) {
  const __m256i b = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int32_t(bits & 255u)), b), b);
}
// tile_scales_avx512 on AVX2, for all kTile positions of a tile: each
// block's first 4 bytes (d, then m for Q4_1) copied by scalar loads (an AVX2
// gather measured no faster), then 8 positions' scales converted at once; 0 from n on.
template <bool Q4, bool kCenter>
inline void tile_scales_avx2(const TileRows& vt, int n, int64_t ng, float* dt, float* mt) {
  constexpr int64_t blk = Q4 ? int64_t(sizeof(BlockQ4)) : int64_t(sizeof(BlockQ8));
  alignas(32) uint32_t raw[kKvMaxGroups][kTile];
  for_rows(
      vt, 0, n, [&](int t, const uint8_t* row) __attribute__((always_inline)) {
        for (int64_t g = 0; g < ng; ++g) std::memcpy(&raw[g][t], row + g * blk, 4);
      });
  for (int64_t g = 0; g < ng; ++g) std::fill(raw[g] + n, raw[g] + kTile, 0u);
  // in each 128-bit lane: the low halves (d) of its 4 dwords, then the high halves (m)
  const __m256i pk = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2,
                                      3, 6, 7, 10, 11, 14, 15);
  for (int64_t g = 0; g < ng; ++g)
    for (int h = 0; h < kTile / 8; ++h) {
      const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(raw[g] + 8 * h));
      const __m256i y = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(x, pk), 0xD8);  // [d of the 8 | m of the 8]
      const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(y));
      _mm256_storeu_ps(dt + g * kTile + 8 * h, d);
      if constexpr (Q4) {
        __m256 m = _mm256_cvtph_ps(_mm256_extracti128_si256(y, 1));
        if constexpr (kCenter) m = _mm256_fmadd_ps(d, _mm256_set1_ps(8.0f), m);  // as tile_scales_avx512
        _mm256_storeu_ps(mt + g * kTile + 8 * h, m);
      }
    }
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// score_tile_avx2's work for rows r0 .. r0 + NR against the 8 keys of kt (one
// group g each, transposed: kt[j] lane t = key t's quant dword j), scales dk
// (int4 mins mk) in lanes: f[i] += (dk dq) dot [after + mk qsum], the
// arithmetic of qdots4 per (row, key). int8: |k| against q with k's sign
// (vpsignb), one vpmaddubsw + vpmaddwd a dword (pair sums <= 2 * 128 * 127 <
// 2^15); int4: the unsigned nibbles against q, vpmaddubsw summed in 16 bits
// over the group (8 pair sums <= 8 * 2 * 15 * 127 < 2^15), widened once.
// AvxVnni: one vpdpbusd a dword, two chains a row, int8 K as k + 128
// (score_tile_avx2) from -128 sum(q), as rows_avx512vnni: the same integer dots.
template <class S, bool Q4, int NR>
[[gnu::always_inline]] inline void rows_avx2(const __m256i* kt, __m256 dk, __m256 mk, const QuantQ& qq, int r0,
                                             int64_t g, __m256* f) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a[NR];
  if constexpr (kAvxVnni<S>) {
    __m256i b[NR];
    for (int i = 0; i < NR; ++i) {
      a[i] = Q4 ? _mm256_setzero_si256() : _mm256_set1_epi32(-128 * qq.isum[g * qq.R + r0 + i]);
      b[i] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; j += 2)
      for (int i = 0; i < NR; ++i) {
        const int8_t* q = qq.q8 + ((r0 + i) * qq.ng + g) * kKvGroup + 4 * j;
        int32_t q0, q1;  // one 4-byte copy each: a broadcast from memory
        std::memcpy(&q0, q, 4);
        std::memcpy(&q1, q + 4, 4);
        a[i] = dpbusd_avxvnni(a[i], _mm256_load_si256(kt + j), _mm256_set1_epi32(q0));
        b[i] = dpbusd_avxvnni(b[i], _mm256_load_si256(kt + j + 1), _mm256_set1_epi32(q1));
      }
    for (int i = 0; i < NR; ++i) a[i] = _mm256_add_epi32(a[i], b[i]);
  } else {
    for (int i = 0; i < NR; ++i) a[i] = _mm256_setzero_si256();
#pragma GCC unroll 2  // fully unrolled, GCC spilled the accumulators
    for (int j = 0; j < 8; ++j) {
      const __m256i k = _mm256_load_si256(kt + j);
      const __m256i u = Q4 ? k : _mm256_sign_epi8(k, k);
      for (int i = 0; i < NR; ++i) {
        int32_t qd;
        std::memcpy(&qd, qq.q8 + ((r0 + i) * qq.ng + g) * kKvGroup + 4 * j, 4);
        const __m256i qb = _mm256_set1_epi32(qd);
        if constexpr (Q4) a[i] = _mm256_add_epi16(a[i], _mm256_maddubs_epi16(u, qb));
        else a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(qb, k)), ones));
      }
    }
  }
  for (int i = 0; i < NR; ++i) {
    const int64_t si = g * qq.R + r0 + i;
    const __m256i d = Q4 && !kAvxVnni<S> ? _mm256_madd_epi16(a[i], ones) : a[i];
    if constexpr (Q4) f[i] = _mm256_fmadd_ps(mk, _mm256_set1_ps(qq.qsum[si]), f[i]);
    f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dk, _mm256_set1_ps(qq.dq[si])), f[i]);
  }
}

// Quantized-K scores of a run of a tile (n <= 32 keys at kp, row stride kr)
// against all R rows on AVX2, 8 keys at a time, with the keys in lanes as in
// score_tile_avx512vnni: per group the 8 keys' quants transposed in registers
// (int8: an 8 x 8 dword transpose; int4: [key i | key i + 4] rows, a 4 x 4
// transpose inside 128-bit lanes, nibbles split), into kt (L1), then each
// block of 4 rows takes the 8 dwords against broadcast query dwords: no
// horizontal sums, and the transposition serves all rows. Keys past n
// repeat key 0; their lanes are never stored. Each (row, key) gets the exact
// integer dot of each group and qdots4's f32 steps in its order (the
// arithmetic of qdots4x2). S: simd::Avx2 or AvxVnni (rows_avx2).
template <class S, bool Q4>
void score_tile_avx2(const uint8_t* kp, int64_t kr, int n, const QuantQ& qq, int R, float* s, Spread& pf) {
  constexpr int64_t blk = Q4 ? int64_t(sizeof(BlockQ4)) : int64_t(sizeof(BlockQ8)), qs_at = Q4 ? 4 : 2;
  const int64_t ng = qq.ng;
  alignas(32) float dt[kKvMaxGroups * kTile], mt[kKvMaxGroups * kTile];
  tile_scales_avx2<Q4, false>(TileRows{kp, kp, n, kr}, n, ng, dt, mt);
  alignas(32) __m256i kt[kKvMaxGroups][8];
  for (int t0 = 0; t0 < n; t0 += 8) {
    const int nk = std::min(8, n - t0);
    const uint8_t* rows[8];
    for (int t = 0; t < 8; ++t) rows[t] = kp + (t < nk ? t0 + t : 0) * kr + qs_at;
    for (int t = 0; t < nk; ++t) pf.part();
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t o = g * blk;
      if constexpr (Q4) {
        __m256i z[4];
        for (int i = 0; i < 4; ++i)
          z[i] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 4] + o)),
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + o)));
        const __m256i t0v = _mm256_unpacklo_epi32(z[0], z[1]), t1v = _mm256_unpackhi_epi32(z[0], z[1]);
        const __m256i t2v = _mm256_unpacklo_epi32(z[2], z[3]), t3v = _mm256_unpackhi_epi32(z[2], z[3]);
        const __m256i u[4] = {_mm256_unpacklo_epi64(t0v, t2v), _mm256_unpackhi_epi64(t0v, t2v),
                              _mm256_unpacklo_epi64(t1v, t3v), _mm256_unpackhi_epi64(t1v, t3v)};
        const __m256i m = _mm256_set1_epi8(15);
        for (int c = 0; c < 4; ++c) {  // dword c: elements 4c.. (low nibbles), 16 + 4c.. (high)
          _mm256_store_si256(&kt[g][c], _mm256_and_si256(u[c], m));
          _mm256_store_si256(&kt[g][4 + c], _mm256_and_si256(_mm256_srli_epi16(u[c], 4), m));
        }
      } else {
        __m256i r[8], t[8], u[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + o));
        for (int i = 0; i < 8; i += 2)
          t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
        for (int i = 0; i < 8; i += 4) {
          u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]), u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
          u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]), u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
        }
        // AvxVnni: k + 128 as u8 (vpdpbusd's unsigned operand)
        const __m256i flip = _mm256_set1_epi8(kAvxVnni<S> ? char(0x80) : 0);
        for (int c = 0; c < 4; ++c) {  // u[c] (keys 0-3), u[4 + c] (keys 4-7): dwords c | 4 + c
          _mm256_store_si256(&kt[g][c], _mm256_xor_si256(_mm256_permute2x128_si256(u[c], u[4 + c], 0x20), flip));
          _mm256_store_si256(&kt[g][4 + c], _mm256_xor_si256(_mm256_permute2x128_si256(u[c], u[4 + c], 0x31), flip));
        }
      }
    }
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const auto block = [&](auto nrc, int r0) __attribute__((always_inline)) {
      constexpr int NR = decltype(nrc)::value;
      __m256 f[NR];
      for (int i = 0; i < NR; ++i) f[i] = _mm256_setzero_ps();
      for (int64_t g = 0; g < ng; ++g)
        rows_avx2<S, Q4, NR>(kt[g], _mm256_load_ps(dt + g * kTile + t0), _mm256_load_ps(mt + g * kTile + t0), qq, r0, g,
                             f);
      for (int i = 0; i < NR; ++i)  // vmaskmovps to memory measured slow on AMD: only for a partial group
        if (nk == 8) _mm256_storeu_ps(s + (r0 + i) * kTile + t0, f[i]);
        else _mm256_maskstore_ps(s + (r0 + i) * kTile + t0, live, f[i]);
    };
    by_row_blocks(R, block);
  }
}
#endif

// Scores of the n keys at kp (row stride kr) against all R rows: s[r * kTile + t].
// AVX-512: two keys at a time, each 4-row block of both in one qdots4x2 (the
// same bits as two qdots4); with VNNI, the whole tile at once
// (score_tile_avx512vnni). AVX2: 8 keys at a time (score_tile_avx2).
template <class S, KvType T>
void score_quantized(const uint8_t* kp, int64_t kr, int n, const QuantQ& qq, int R, float* s, Spread& pf) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (std::is_same_v<S, simd::Avx512>) {
    score_tile_avx512vnni<T == KvType::int4>(kp, kr, n, qq, R, s, pf);
    return;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if constexpr (kIsAvx2<S>) {
    score_tile_avx2<S, T == KvType::int4>(kp, kr, n, qq, R, s, pf);
    return;
  }
#endif
  int t = 0;
  if constexpr (S::kWidth > 1)
    for (; t + 2 <= n; t += 2) {
      pf.part();
      pf.part();
      int r = 0;
      for (; r + 4 <= R; r += 4)
        qdots4x2<Isa<S>, T == KvType::int4>(kp + t * kr, kp + (t + 1) * kr, qq.q8 + int64_t(r) * qq.ng * kKvGroup,
                                            qq.dq + r, qq.qsum + r, qq.ng, qq.R, s + r * kTile + t, kTile, 4);
      if (r < R)  // the last 1..3 rows, with the zero padding rows of QuantQ
        qdots4x2<Isa<S>, T == KvType::int4>(kp + t * kr, kp + (t + 1) * kr, qq.q8 + int64_t(r) * qq.ng * kKvGroup,
                                            qq.dq + r, qq.qsum + r, qq.ng, qq.R, s + r * kTile + t, kTile, R - r);
    }
  for (; t < n; ++t) {
    pf.part();
    by_row_blocks(
        R, [&](auto nrc, int r) __attribute__((always_inline)) {
          qdots<S, T, decltype(nrc)::value>(kp + t * kr, qq, r, s + r * kTile + t);
        });
  }
}

// kWidth values c .. c + kWidth of a row of storage type T, as f32 lanes
// (dequantized in registers; c a multiple of kWidth, so they lie in one group).
template <class S, KvType T>
typename S::V load_row(const uint8_t* row, int64_t c) {
  if constexpr (T == KvType::f32) {
    return S::load(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (T == KvType::f16) {
    return S::load(reinterpret_cast<const f16*>(row) + c);
  } else if constexpr (T == KvType::bf16) {
    return S::load(reinterpret_cast<const bf16*>(row) + c);
  } else if constexpr (T == KvType::int8) {
    return load_i8<Isa<S>>(reinterpret_cast<const BlockQ8*>(row)[c / kKvGroup].qs + c % kKvGroup);
  } else {  // element j of a group: nibble j % 16 of byte j % 16, high for j >= 16
    return load_u4<Isa<S>>(reinterpret_cast<const BlockQ4*>(row)[c / kKvGroup].qs + c % 16, c % kKvGroup >= 16 ? 4 : 0);
  }
}

// out[i * stride + u] = k_u . q[i] for NR query rows and NT keys of storage
// type T (f32, f16, bf16; converted in registers): NR * NT independent FMA
// chains, so the loop is not bound by FMA latency. Each (i, u) is one chain
// over c in order, whatever NR and NT: grouping never changes bits.
template <class S, KvType T, int NR, int NT>
void dots(const uint8_t* const* k, const float* q, int64_t D, float* out, int stride) {
  typename S::V a[NR][NT];
  for (int i = 0; i < NR; ++i)
    for (int u = 0; u < NT; ++u) a[i][u] = S::zero();
  for (int64_t c = 0; c < D; c += S::kWidth) {
    typename S::V x[NT];
    for (int u = 0; u < NT; ++u) x[u] = load_row<S, T>(k[u], c);
    for (int i = 0; i < NR; ++i) {
      const auto qv = S::load(q + i * D + c);
      for (int u = 0; u < NT; ++u) a[i][u] = S::fmadd(x[u], qv, a[i][u]);
    }
  }
  for (int i = 0; i < NR; ++i)
    for (int u = 0; u < NT; ++u) out[i * stride + u] = S::hsum(a[i][u]);
}

// Scores of NT keys against all R query rows: s[r * kTile + u].
template <class S, KvType T, int NT>
void score_keys(const uint8_t* const* k, const float* q, int R, int64_t D, float* s) {
  by_row_blocks(
      R, [&](auto nrc, int r) __attribute__((always_inline)) {
        dots<S, T, decltype(nrc)::value, NT>(k, q + r * D, D, s + r * kTile, kTile);
      });
}

// Scores of the n keys (f32, f16 or bf16) at kp, row stride kr, two at a time.
template <class S, KvType T>
void score_float(const uint8_t* kp, int64_t kr, int n, const float* q, int R, int64_t D, float* s, Spread& pf) {
  int t = 0;
  for (; t + 2 <= n; t += 2) {
    pf.part();
    pf.part();
    const uint8_t* k2[2] = {kp + t * kr, kp + (t + 1) * kr};
    score_keys<S, T, 2>(k2, q, R, D, s + t);
  }
  if (t < n) {
    const uint8_t* k1[1] = {kp + t * kr};
    score_keys<S, T, 1>(k1, q, R, D, s + t);
  }
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The integer weights of pv_weights<.., true> on AVX2, from the scales dt
// (and centered mins mt) of tile_scales_avx2: the values of the AVX-512
// levels (16-bit for int8 V, 8-bit as avx512vbmi for int4 V; the same
// maxima, 2^k and roundings), and for int4 msum = sum_t p_t mt_t (before
// pv_weights' causal-edge pass).
template <KvType T>
void int_weights_avx2(const float* dt, const float* mt, int n, const float* p, int R, const int* nvis, int64_t ng,
                      float* w, float* msum) {
  constexpr bool k8 = T == KvType::int4;
  constexpr int kBits = k8 ? 7 : 14;
  int16_t* om = reinterpret_cast<int16_t*>(w);
  uint8_t* ob = reinterpret_cast<uint8_t*>(w);
  float* sc = w + R * ng * kTile / (k8 ? 4 : 2);
  const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(std::numeric_limits<float>::max());
  const uint32_t all = n >= 32 ? 0xFFFFFFFFu : (1u << n) - 1u;
  float dmax[kKvMaxGroups];
  uint32_t dbad[kKvMaxGroups];  // positions whose scale is NaN or inf
  for (int64_t g = 0; g < ng; ++g) {
    dbad[g] = 0;
    __m256 mx = _mm256_setzero_ps();
    for (int hh = 0; hh < 4; ++hh) {
      const __m256 da = _mm256_and_ps(_mm256_loadu_ps(dt + g * kTile + 8 * hh), absm);
      const uint32_t bd = uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(da, big, _CMP_NLE_UQ)));
      dbad[g] |= bd << (8 * hh);
      mx = _mm256_max_ps(mx, _mm256_and_ps(da, _mm256_castsi256_ps(lanes_avx2((all >> (8 * hh)) & ~bd))));
    }
    dmax[g] = simd::Avx2::hmax(mx);
  }
  alignas(32) float dmx[8] = {};  // dmax per group, lanes past ng 0
  for (int64_t g = 0; g < ng; ++g) dmx[g] = dmax[g];
  uint32_t anybad = 0;
  for (int64_t g = 0; g < ng; ++g) anybad |= dbad[g];
  for (int r = 0; r < R; ++r) {
    const uint32_t vis = nvis[r] >= 32 ? 0xFFFFFFFFu : (1u << nvis[r]) - 1u;
    __m256 pr[4], vm[4];
    bool pbad = false;
    for (int hh = 0; hh < 4; ++hh) {
      vm[hh] = _mm256_castsi256_ps(lanes_avx2(vis >> (8 * hh)));
      pr[hh] = _mm256_and_ps(_mm256_loadu_ps(p + r * kTile + 8 * hh), vm[hh]);
      pbad |= _mm256_movemask_ps(_mm256_cmp_ps(pr[hh], pr[hh], _CMP_UNORD_Q)) != 0;
    }
    const float pmax = pbad ? 0.0f
                            : simd::Avx2::hmax(_mm256_max_ps(_mm256_max_ps(pr[0], pr[1]), _mm256_max_ps(pr[2], pr[3])));
    // per group (lane g): max |d| over the positions the row sees, ub, 2^k and 2^-k
    __m256 dm_r = _mm256_load_ps(dmx);
    if (vis != all) {
      alignas(32) float dv[8] = {};
      for (int64_t g = 0; g < ng; ++g) {
        __m256 mx = _mm256_setzero_ps();
        for (int hh = 0; hh < 4; ++hh)
          mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_and_ps(_mm256_loadu_ps(dt + g * kTile + 8 * hh), absm), vm[hh]));
        dv[g] = simd::Avx2::hmax(mx);  // NaN / inf lanes: the group is bad for this row, below
      }
      dm_r = _mm256_load_ps(dv);
    }
    const __m256 ub = _mm256_mul_ps(_mm256_set1_ps(pmax), dm_r);
    const __m256i e = _mm256_srli_epi32(_mm256_castps_si256(ub), 23);  // ub >= 0: floor(log2 ub) + 127 where normal
    alignas(32) float pk[8], nk[8];
    _mm256_store_ps(pk,
                    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(kBits + 254), e), 23)));
    const __m256 live = _mm256_cmp_ps(ub, _mm256_set1_ps(0x1p-100f), _CMP_GE_OQ);  // below: the tile adds nothing
    _mm256_store_ps(nk, _mm256_and_ps(_mm256_castsi256_ps(
                                          _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(kBits)), 23)),
                                      live));
    const unsigned livem = unsigned(_mm256_movemask_ps(live));
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t rg = r * ng + g;
      if (pbad || (dbad[g] & vis) || !(livem >> g & 1u)) {  // NaN: a NaN weight, or one of inf or 0 * inf, as in f32
        if constexpr (k8) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(ob + rg * kTile), _mm256_setzero_si256());
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(om + rg * kTile), _mm256_setzero_si256());
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(om + rg * kTile) + 1, _mm256_setzero_si256());
        }
        sc[rg] = pbad || (dbad[g] & vis) ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
        continue;
      }
      const __m256 vpk = _mm256_set1_ps(pk[g]);
      __m256i wi[4];
      for (int hh = 0; hh < 4; ++hh) {  // w = p d, 0 where unseen (an unseen d may be inf: masked after)
        __m256 wv = _mm256_mul_ps(pr[hh], _mm256_loadu_ps(dt + g * kTile + 8 * hh));
        if (anybad) wv = _mm256_and_ps(wv, vm[hh]);
        wi[hh] = _mm256_cvtps_epi32(_mm256_mul_ps(wv, vpk));
      }
      if constexpr (k8) {  // u8, saturating (as vpmovusdb for these non-negative weights)
        const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(wi[0], wi[1]), _mm256_packus_epi32(wi[2], wi[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(ob + rg * kTile),
                            _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      } else {  // i16, saturating (as vpmovsdw)
        __m256i* o = reinterpret_cast<__m256i*>(om + rg * kTile);
        _mm256_storeu_si256(o, _mm256_permute4x64_epi64(_mm256_packs_epi32(wi[0], wi[1]), 0xD8));
        _mm256_storeu_si256(o + 1, _mm256_permute4x64_epi64(_mm256_packs_epi32(wi[2], wi[3]), 0xD8));
      }
      sc[rg] = nk[g];
    }
    if constexpr (T == KvType::int4)  // the mins of the positions the row sees only (pv_weights)
      for (int64_t g = 0; g < ng; ++g) {
        __m256 m = _mm256_mul_ps(pr[0], _mm256_and_ps(_mm256_loadu_ps(mt + g * kTile), vm[0]));
        for (int hh = 1; hh < 4; ++hh)
          m = _mm256_fmadd_ps(pr[hh], _mm256_and_ps(_mm256_loadu_ps(mt + g * kTile + 8 * hh), vm[hh]), m);
        msum[r * ng + g] = simd::Avx2::hsum(m);
      }
  }
}
#endif

// P.V weights of a tile. For int8/int4 V, v_tc = d_tg q_tc [+ m_tg], so
// sum_t p_rt v_tc = sum_t (p_rt d_tg) q_tc [+ sum_t p_rt m_tg]: the scale is
// folded into the weight w[(r * ng + g) * kTile + t] = p_rt d_tg and the int4
// min into one term per (row, group), msum[r * ng + g] = sum_t p_rt m_tg over
// the positions t < nvis[r] row r may see (a position it may not see is never
// touched, not even times p = 0: its V may hold a NaN, llmk/kv_quant.hpp), in
// an order that does not depend on the tile's length n (a row's bits
// must not depend on where the item's last row ends the tile). The
// float types use p itself (ng = 1). The scales of the n..kTile positions past
// the tile are 0. dm: [2][ng][kTile] scratch.
template <class S, KvType T, bool kInt = false>
void pv_weights(const TileRows& vt, int n, const float* p, int R, const int* nvis, int64_t ng, float* dm, float* w,
                float* msum) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  float* dt = dm;                // [ng][kTile] scales
  float* mt = dm + ng * kTile;   // [ng][kTile] int4 mins
  if (n < kTile && !kIsAvx2<S>)  // tile_scales_avx2 writes the zeros
    for (int64_t g = 0; g < ng; ++g) {
      std::fill(dt + g * kTile + n, dt + (g + 1) * kTile, 0.0f);
      std::fill(mt + g * kTile + n, mt + (g + 1) * kTile, 0.0f);
    }
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if constexpr (kIsAvx2<S>) {  // 8 scales (and mins) a gather, 0 from n on
    tile_scales_avx2<T == KvType::int4, kInt && T == KvType::int4>(vt, n, ng, dt, mt);
  } else
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
      if constexpr (std::is_same_v<S, simd::Avx512>) {  // a group's 16 scales (and mins) in one gather
    for (int h = 0; h * 16 < kTile; ++h)                // 16 positions a gather, from one or both runs
      tile_scales_avx512<T == KvType::int4, kPvBytes<T>>(vt.a, vt.b, vt.n1, vt.stride, h * 16, n, ng, kTile,
                                                         dt + h * 16, mt + h * 16);
  } else
#endif
  {
    for (int t = 0; t < n; ++t)
      for (int64_t g = 0; g < ng; ++g) {
        const uint8_t* b = vt.at(t);
        if constexpr (T == KvType::int8) {
          dt[g * kTile + t] = h2f<Isa<S>>(reinterpret_cast<const BlockQ8*>(b)[g].d);
        } else {
          dt[g * kTile + t] = h2f<Isa<S>>(reinterpret_cast<const BlockQ4*>(b)[g].d);
          mt[g * kTile + t] = h2f<Isa<S>>(reinterpret_cast<const BlockQ4*>(b)[g].m);
        }
      }
  }
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if constexpr (kInt && kIsAvx2<S>) {
    int_weights_avx2<T>(dt, mt, n, p, R, nvis, ng, w, msum);
  } else
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    // 16-bit weights (pv_int_rows_avx512): om[(r * ng + g) * kTile + t], scale sc[r * ng + g];
    // 8-bit ones where kPvBytes (pv_q4_rows_avx512vbmi): ob[(r * ng + g) * kTile + t]
    if constexpr (kInt) {
      static_assert(std::is_same_v<S, simd::Avx512> && kTile == 32, "a tile row is two zmm");
      constexpr bool k8 = kPvBytes<T>;    // 8-bit weights against centered int4 quants (pv_q4_rows_avx512vbmi)
      constexpr int kBits = k8 ? 7 : 14;  // ub 2^k in [2^kBits, 2^(kBits + 1))
      int16_t* om = reinterpret_cast<int16_t*>(w);
      uint8_t* ob = reinterpret_cast<uint8_t*>(w);
      float* sc = w + R * ng * kTile / (k8 ? 4 : 2);
      const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
      const uint32_t all = n >= 32 ? 0xFFFFFFFFu : (1u << n) - 1u;  // bit t: position t of the tile
      float dmax[kKvMaxGroups];                                     // max |d| over the tile's n positions
      __m512 dabs[kKvMaxGroups][2];                                 // |d|, positions 0-15 and 16-31
      uint32_t dbad[kKvMaxGroups];                                  // positions whose scale is NaN or inf
      for (int64_t g = 0; g < ng; ++g) {
        dbad[g] = 0;
        __m512 mx = _mm512_setzero_ps();
        for (int hh = 0; hh < 2; ++hh) {
          dabs[g][hh] = _mm512_and_ps(_mm512_loadu_ps(dt + g * kTile + 16 * hh), absm);
          const __mmask16 bd = _mm512_cmp_ps_mask(dabs[g][hh], _mm512_set1_ps(std::numeric_limits<float>::max()),
                                                  _CMP_NLE_UQ);
          dbad[g] |= uint32_t(bd) << (16 * hh);
          mx = _mm512_max_ps(mx, _mm512_maskz_mov_ps(__mmask16((all >> (16 * hh)) & ~bd), dabs[g][hh]));
        }
        dmax[g] = _mm512_reduce_max_ps(mx);  // >= 0
      }
      for (int r = 0; r < R; ++r) {
        const uint32_t vis = nvis[r] >= 32 ? 0xFFFFFFFFu : (1u << nvis[r]) - 1u;
        __m512 pr[2];
        bool pbad = false;
        for (int hh = 0; hh < 2; ++hh) {
          pr[hh] = _mm512_maskz_loadu_ps(__mmask16(vis >> (16 * hh)), p + r * kTile + 16 * hh);
          pbad |= _mm512_mask_cmp_ps_mask(__mmask16(vis >> (16 * hh)), pr[hh], pr[hh], _CMP_UNORD_Q) != 0;
        }
        // a NaN score makes pbad; p >= 0, 0 past vis: pmax 0 when the row sees none
        const float pmax = pbad ? 0.0f : _mm512_reduce_max_ps(_mm512_max_ps(pr[0], pr[1]));
        for (int64_t g = 0; g < ng; ++g) {
          const int64_t rg = r * ng + g;
          __m256i* o = reinterpret_cast<__m256i*>(om + rg * kTile);
          const auto no_weights = [&](float scale) {
            if constexpr (k8) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(ob + rg * kTile), _mm256_setzero_si256());
            } else {
              _mm256_storeu_si256(o, _mm256_setzero_si256());
              _mm256_storeu_si256(o + 1, _mm256_setzero_si256());
            }
            sc[rg] = scale;
          };
          if (pbad || (dbad[g] & vis)) {  // a NaN weight, or one of inf or 0 * inf: the sum is NaN, as in f32
            no_weights(std::numeric_limits<float>::quiet_NaN());
            continue;
          }
          // ub = pmax * dmax >= |w_t| (rounding is monotonic), both maxima over
          // the positions the row sees only (its bits never depend on the
          // others). Scale by 2^k with ub 2^k in [2^14, 2^15): exact products,
          // |om - w 2^k| <= 0.5, or <= 1 where w 2^k rounds to 2^15 and
          // saturates to 32767. Below 2^-100 the tile adds nothing (< 2^-85
          // against a row sum l >= 1).
          const float dm_r = vis == all ? dmax[g]
                                        : _mm512_reduce_max_ps(
                                              _mm512_max_ps(_mm512_maskz_mov_ps(__mmask16(vis), dabs[g][0]),
                                                            _mm512_maskz_mov_ps(__mmask16(vis >> 16), dabs[g][1])));
          const float ub = pmax * dm_r;
          if (!(ub >= 0x1p-100f)) {
            no_weights(0.0f);
            continue;
          }
          uint32_t bits;
          std::memcpy(&bits, &ub, 4);
          const int k = kBits - (int(bits >> 23) - 127);  // ub normal: exponent bits - bias = floor(log2 ub)
          const uint32_t up = uint32_t(127 + k) << 23, down = uint32_t(127 - k) << 23;  // 2^k, 2^-k
          float pk, nk;
          std::memcpy(&pk, &up, 4);
          std::memcpy(&nk, &down, 4);
          for (int hh = 0; hh < 2; ++hh) {  // w = p d, 0 where unseen
            const __m512 wv = _mm512_maskz_mul_ps(__mmask16(vis >> (16 * hh)), pr[hh],
                                                  _mm512_loadu_ps(dt + g * kTile + 16 * hh));
            const __m512i wi = _mm512_cvtps_epi32(_mm512_mul_ps(wv, _mm512_set1_ps(pk)));
            if constexpr (k8)
              _mm_storeu_si128(reinterpret_cast<__m128i*>(ob + rg * kTile + 16 * hh), _mm512_cvtusepi32_epi8(wi));
            else _mm256_storeu_si256(o + hh, _mm512_cvtsepi32_epi16(wi));
          }
          sc[rg] = nk;
        }
        if constexpr (T == KvType::int4) {  // msum = sum_t p_t m_t over the seen t, 4 groups' sums at once
          const __mmask16 v0 = __mmask16(vis), v1 = __mmask16(vis >> 16);
          for (int64_t g0 = 0; g0 < ng; g0 += 4) {
            __m512 x[4];
            for (int j = 0; j < 4; ++j)
              x[j] = g0 + j < ng
                         ? _mm512_fmadd_ps(pr[1], _mm512_maskz_loadu_ps(v1, mt + (g0 + j) * kTile + 16),
                                           _mm512_mul_ps(pr[0], _mm512_maskz_loadu_ps(v0, mt + (g0 + j) * kTile)))
                         : _mm512_setzero_ps();
            alignas(16) float ms[4];
            _mm_store_ps(ms, hsum4_avx512(x[0], x[1], x[2], x[3]));
            for (int j = 0; j < 4 && g0 + j < ng; ++j) msum[r * ng + g0 + j] = ms[j];
          }
        }
      }
    } else
#endif
      for (int r = 0; r < R; ++r)
        for (int64_t g = 0; g < ng; ++g) {
          for (int t = 0; t < kTile; t += W) {
            const V pt = S::load(p + r * kTile + t);
            S::store(w + (r * ng + g) * kTile + t, S::mul(pt, S::load(dt + g * kTile + t)));
          }
          if constexpr (T == KvType::int4) {  // the mins of the positions the row sees only
            float ms = 0.0f;
            for (int t = 0; t < nvis[r]; ++t) ms = std::fma(p[r * kTile + t], mt[g * kTile + t], ms);
            msum[r * ng + g] = ms;
          }
        }
}

// Rows r < NR (acc row stride D), elements [c, c + NV * W) of one group:
// acc = acc * alpha_r [+ msum_rg] + sum_{t<nv[r]} w_rtg * v_t[c..], the V row
// dequantized in registers once and shared by the NR rows; NR * NV
// accumulators stay in registers across the tile. Without kEdge every row sees
// the same nv[0] positions (decode; most prefill tiles). With kEdge (a causal
// edge in prefill) positions every row sees (t < the smallest nv) need no
// test, and the rest are added only to the rows that see them: a position a
// row may not see is never multiplied in, not even by p = 0 (its V may be NaN
// or inf). Each acc element is one chain over t in order, whatever NR and
// kEdge: a row's bits never depend on the others.
template <class S, KvType T, int NR, int NV, bool kEdge>
[[gnu::always_inline]] inline void pv_chunk(float* acc, int64_t D, const float* alpha, const TileRows& vt,
                                            const int* nv, const float* w, int64_t ng, const float* msum, int64_t c) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const int64_t g = ng > 1 ? c / kKvGroup : 0;
  int n0 = nv[0], n1 = nv[0];
  if constexpr (kEdge)
    for (int i = 1; i < NR; ++i) n0 = std::min(n0, nv[i]), n1 = std::max(n1, nv[i]);
  V a[NR][NV];
  for (int i = 0; i < NR; ++i) {
    const V al = S::set1(alpha[i]);
    for (int j = 0; j < NV; ++j) a[i][j] = S::mul(S::load(acc + i * D + c + j * W), al);
    if constexpr (T == KvType::int4) {
      const V ms = S::set1(msum[i * ng + g]);
      for (int j = 0; j < NV; ++j) a[i][j] = S::add(a[i][j], ms);
    }
  }
  const auto load_v = [&](const uint8_t* row, V* x) __attribute__((always_inline)) {
    if constexpr (T == KvType::int4 && NV == 2)
      load_u4x2<Isa<S>>(reinterpret_cast<const BlockQ4*>(row)[g].qs, int(c % kKvGroup), x);
    else
      for (int j = 0; j < NV; ++j) x[j] = load_row<S, T>(row, c + j * W);
  };
  for_rows(
      vt, 0, n0, [&](int t, const uint8_t* row) __attribute__((always_inline)) {
        V x[NV];
        load_v(row, x);
        for (int i = 0; i < NR; ++i) {
          const V wt = S::set1(w[(i * ng + g) * kTile + t]);
          for (int j = 0; j < NV; ++j) a[i][j] = S::fmadd(wt, x[j], a[i][j]);
        }
      });
  if constexpr (kEdge) {
    for_rows(
        vt, n0, n1, [&](int t, const uint8_t* row) __attribute__((always_inline)) {
          V x[NV];
          load_v(row, x);
          for (int i = 0; i < NR; ++i)
            if (t < nv[i]) {
              const V wt = S::set1(w[(i * ng + g) * kTile + t]);
              for (int j = 0; j < NV; ++j) a[i][j] = S::fmadd(wt, x[j], a[i][j]);
            }
        });
  }
  for (int i = 0; i < NR; ++i)
    for (int j = 0; j < NV; ++j) S::store(acc + i * D + c + j * W, a[i][j]);
}

// pv_chunk over the whole row for NR rows: chunks of 2 vectors (16 or 32
// values: one group or half of one), then single vectors (head_dim 80 on AVX-512).
template <class S, KvType T, int NR, bool kEdge>
[[gnu::always_inline]] inline void pv_rows(float* acc, int64_t D, const float* alpha, const TileRows& vt, const int* nv,
                                           const float* w, int64_t ng, const float* msum, Spread& pf) {
  constexpr int W = S::kWidth;
  int64_t c = 0;
  for (; c + 2 * W <= D; c += 2 * W) {
    pf.part();
    pv_chunk<S, T, NR, 2, kEdge>(acc, D, alpha, vt, nv, w, ng, msum, c);
  }
  for (; c < D; c += W) pv_chunk<S, T, NR, 1, kEdge>(acc, D, alpha, vt, nv, w, ng, msum, c);
}

template <class S, KvType T, int NR>
void pv_rows_of(float* acc, int64_t D, const float* alpha, const TileRows& vt, const int* nv, const float* w,
                int64_t ng, const float* msum, Spread& pf) {
  bool edge = false;
  for (int i = 1; i < NR; ++i) edge |= nv[i] != nv[0];
  if (edge) pv_rows<S, T, NR, true>(acc, D, alpha, vt, nv, w, ng, msum, pf);
  else pv_rows<S, T, NR, false>(acc, D, alpha, vt, nv, w, ng, msum, pf);
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
// Two V rows' quants of one group, interleaved as 16-bit pairs (row a, row b)
// for vpmaddwd / vpdpwssd: x[0], x[1] hold 16 pairs each. int8: dims [0-7,
// 16-23] and [8-15, 24-31] (unpack works inside 128-bit lanes; the flush puts
// them back in order); int4: dims 0-15 (low nibbles) and 16-31 (high).
template <bool Q4>
[[gnu::always_inline]] inline void v_pairs_avx512(const uint8_t* a, const uint8_t* b, __m512i* x) {
  if constexpr (Q4) {
    const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i qb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    const __m256i u = _mm256_set_m128i(_mm_unpackhi_epi8(qa, qb), _mm_unpacklo_epi8(qa, qb)), m = _mm256_set1_epi8(15);
    x[0] = _mm512_cvtepu8_epi16(_mm256_and_si256(u, m));
    x[1] = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(u, 4), m));
  } else {
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    x[0] = _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(qa, qb));
    x[1] = _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(qa, qb));
  }
}
// acc += x . w pairwise (16-bit products, 32-bit sums): vpdpwssd with VNNI,
// else vpmaddwd + vpaddd; the same exact sums (no saturation: |sum| < 2^31).
[[gnu::always_inline]] inline __m512i dpwssd_avx512(__m512i acc, __m512i x, __m512i w) {
#if defined(__AVX512VNNI__)
  return _mm512_dpwssd_epi32(acc, x, w);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(x, w));
#endif
}

// The end of a group's integer P.V for one row: acc = acc * alpha [+ msum] +
// I * sc over the group's dims c.. (lo: the first 16, hi: the next 16, stored
// only when the head has them: a partial last group holds 16).
template <bool kMin>
[[gnu::always_inline]] inline void flush_int_group_avx512(float* acc, int64_t D, int64_t c, __m512i lo, __m512i hi,
                                                          float alpha, float sc, float msum) {
  const __m512 al = _mm512_set1_ps(alpha), s = _mm512_set1_ps(sc);
  const auto flush = [&](float* o, __m512i I) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(o), al);
    if constexpr (kMin) v = _mm512_add_ps(v, _mm512_set1_ps(msum));
    _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), s, v));
  };
  flush(acc + c, lo);
  if (D - c > 16) flush(acc + c + 16, hi);
}

// P.V of a quantized V tile for NR rows with 16-bit weights: per group (32
// dims), two positions at a time, the rows' integer sums I_c = sum_t om_t q_tc
// (|I| <= 32 * 32767 * 128 < 2^31), then acc = acc * alpha [+ msum] + I * sc
// (f32). Positions past a row's visible count have om = 0 and finite quants,
// so the rows of a block all run to the longest count (nb). A partial last
// group (head_dim % 32 == 16) stores only its first 16 dims.
template <bool Q4, int NR>
void pv_int_rows_avx512(float* acc, int64_t D, const float* alpha, const TileRows& vt, int nb, const int16_t* om,
                        const float* sc, const float* msum, int64_t ng, Spread& pf) {
  constexpr int64_t blk = Q4 ? int64_t(sizeof(BlockQ4)) : int64_t(sizeof(BlockQ8)), qs_at = Q4 ? 4 : 2;
  for (int64_t g = 0; g < ng; ++g) {
    pf.part();
    __m512i a[NR][2];
    for (int i = 0; i < NR; ++i) a[i][0] = a[i][1] = _mm512_setzero_si512();
    const int64_t go = g * blk + qs_at;
    for_pairs(
        vt, go, nb, [&](int t, const uint8_t* qa, const uint8_t* qb) __attribute__((always_inline)) {
          __m512i x[2];
          v_pairs_avx512<Q4>(qa, qb, x);
          for (int i = 0; i < NR; ++i) {
            int32_t w2;
            std::memcpy(&w2, om + (i * ng + g) * kTile + t, 4);
            const __m512i wv = _mm512_set1_epi32(w2);
            a[i][0] = dpwssd_avx512(a[i][0], x[0], wv);
            a[i][1] = dpwssd_avx512(a[i][1], x[1], wv);
          }
        });
    const int64_t c = g * kKvGroup;
    for (int i = 0; i < NR; ++i) {
      __m512i lo = a[i][0], hi = a[i][1];
      if constexpr (!Q4) {  // int8 pairs came as dims [0-7, 16-23], [8-15, 24-31]
        lo = _mm512_shuffle_i32x4(a[i][0], a[i][1], 0x44);
        hi = _mm512_shuffle_i32x4(a[i][0], a[i][1], 0xEE);
      }
      const int64_t rg = i * ng + g;
      flush_int_group_avx512<Q4>(acc + i * D, D, c, lo, hi, alpha[i], sc[rg], Q4 ? msum[rg] : 0.0f);
    }
  }
}

#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
// P.V of an int4 V tile for NR rows with 8-bit weights ob[(i * ng + g) *
// kTile + t] (pv_weights<.., true>): per group, four positions at a time, the
// four rows' 16 bytes side by side in a zmm, turned by one vpermb into
// 16 dwords of (t, t + 1, t + 2, t + 3) bytes, split into low nibbles (dims
// 0-15) and high (16-31), centered to q - 8 in [-8, 7], and summed with the
// row's 4 weights by one vpdpbusd each (|I| <= 32 * 255 * 8 < 2^31). Then acc
// = acc * alpha + msum + I * sc, msum over m + 8 d. Positions past nb take
// the last valid row (their weights are 0).
template <int NR>
void pv_q4_rows_avx512vbmi(float* acc, int64_t D, const float* alpha, const TileRows& vt, int nb, const uint8_t* ob,
                           const float* sc, const float* msum, int64_t ng, Spread& pf) {
  constexpr int64_t blk = int64_t(sizeof(BlockQ4)), qs_at = 4;
  alignas(64) static constexpr uint8_t kIdx[64] = {0,  16, 32, 48, 1,  17, 33, 49, 2,  18, 34, 50, 3,  19, 35, 51,
                                                   4,  20, 36, 52, 5,  21, 37, 53, 6,  22, 38, 54, 7,  23, 39, 55,
                                                   8,  24, 40, 56, 9,  25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59,
                                                   12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};
  const __m512i idx = _mm512_load_si512(kIdx), m15 = _mm512_set1_epi8(15), c8 = _mm512_set1_epi8(8);
  const uint8_t* rows[kTile + 3];
  for (int t = 0; t < nb; ++t) rows[t] = vt.at(t);
  for (int t = nb; t < (nb + 3) / 4 * 4; ++t) rows[t] = rows[nb - 1];
  for (int64_t g = 0; g < ng; ++g) {
    pf.part();
    __m512i a[NR][2];
    for (int i = 0; i < NR; ++i) a[i][0] = a[i][1] = _mm512_setzero_si512();
    const int64_t go = g * blk + qs_at;
    for (int t = 0; t < nb; t += 4) {
      __m512i z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + go)));
      z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t + 1] + go)), 1);
      z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t + 2] + go)), 2);
      z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t + 3] + go)), 3);
      const __m512i x = _mm512_permutexvar_epi8(idx, z);
      const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(x, m15), c8);
      const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), m15), c8);
      for (int i = 0; i < NR; ++i) {
        int32_t w4;
        std::memcpy(&w4, ob + (i * ng + g) * kTile + t, 4);
        const __m512i wv = _mm512_set1_epi32(w4);
        a[i][0] = _mm512_dpbusd_epi32(a[i][0], wv, lo);
        a[i][1] = _mm512_dpbusd_epi32(a[i][1], wv, hi);
      }
    }
    const int64_t c = g * kKvGroup;
    for (int i = 0; i < NR; ++i)
      flush_int_group_avx512<true>(acc + i * D, D, c, a[i][0], a[i][1], alpha[i], sc[i * ng + g], msum[i * ng + g]);
  }
}
#endif

// pv_tile for int8 / int4 V on AVX-512: 16-bit weights (pv_weights<.., true>), 4 rows at a time.
template <KvType T>
void pv_tile_int_avx512(float* acc, int64_t D, const float* alpha, const TileRows& vt, int R, const int* nvis, int n,
                        const float* p, float* dm, float* w, float* msum, Spread& pf) {
  constexpr bool Q4 = T == KvType::int4;
  const int64_t ng = groups_of(D);
  pv_weights<simd::Avx512, T, true>(vt, n, p, R, nvis, ng, dm, w, msum);
  const float* sc = w + R * ng * kTile / (kPvBytes<T> ? 4 : 2);  // after the weights (pv_weights)
  for (int r = 0; r < R;) {
    const int nr = std::min(4, R - r);
    int nb = 0;
    for (int i = r; i < r + nr; ++i) nb = std::max(nb, nvis[i]);
    const int64_t o = int64_t(r) * ng;
    const auto rows = [&](auto nrc) {  // rows r .. r + NR
      constexpr int NR = decltype(nrc)::value;
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
      if constexpr (kPvBytes<T>) {
        pv_q4_rows_avx512vbmi<NR>(acc + r * D, D, alpha + r, vt, nb, reinterpret_cast<const uint8_t*>(w) + o * kTile,
                                  sc + o, msum + o, ng, pf);
        return;
      }
#endif
      pv_int_rows_avx512<Q4, NR>(acc + r * D, D, alpha + r, vt, nb, reinterpret_cast<const int16_t*>(w) + o * kTile,
                                 sc + o, msum + o, ng, pf);
    };
    if (nb > 0) with_rows(nr, rows);
    r += nr;
  }
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The end of a group's integer P.V for one row on AVX2 (flush_int_group_avx512's
// steps): acc = acc * alpha [+ msum] + I * sc over the group's dims c.. (I: 32
// int32, one per dim; a partial last group stores its first 16).
template <bool kMin>
[[gnu::always_inline]] inline void flush_int_group_avx2(float* acc, int64_t D, int64_t c, const int32_t* I, float alpha,
                                                        float sc, float msum) {
  const __m256 al = _mm256_set1_ps(alpha), s = _mm256_set1_ps(sc);
  const int nv = D - c > 16 ? 4 : 2;
  for (int j = 0; j < nv; ++j) {
    float* o = acc + c + 8 * j;
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(o), al);
    if constexpr (kMin) v = _mm256_add_ps(v, _mm256_set1_ps(msum));
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(I + 8 * j));
    _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), s, v));
  }
}

// P.V of an int8 V tile for NR rows with the 16-bit weights om (the AVX-512
// levels' integers, pv_int_rows_avx512's sums): per group and half group (16
// dims: 4 x 2 accumulators fit the 16 ymm), two positions at a time, their
// quants interleaved as 16-bit pairs, one vpmaddwd + vpaddd per row and 8 dims
// (|I| <= 32 * 32767 * 128 < 2^31; AvxVnni: one vpdpwssd, the same sums).
// Positions past nb pair with the last row (weight 0).
template <class S, int NR>
void pv_q8_rows_avx2(float* acc, int64_t D, const float* alpha, const TileRows& vt, int nb, const int16_t* om,
                     const float* sc, int64_t ng, Spread& pf) {
  constexpr int64_t blk = int64_t(sizeof(BlockQ8)), qs_at = 2;
  const uint8_t* rows[kTile + 1];
  for (int t = 0; t < nb; ++t) rows[t] = vt.at(t);
  rows[nb] = rows[nb - 1];
  alignas(32) int32_t I[NR][kKvGroup];
  for (int64_t g = 0; g < ng; ++g) {
    pf.part();
    const int64_t c = g * kKvGroup;
    for (int h = 0; h < 2 && c + 16 * h < D; ++h) {
      const int64_t go = g * blk + qs_at + 16 * h;
      __m256i a[NR][2];
      for (int i = 0; i < NR; ++i) a[i][0] = a[i][1] = _mm256_setzero_si256();
      for (int t = 0; t < nb; t += 2) {
        const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + go));
        const __m128i qb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t + 1] + go));
        const __m256i x0 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(qa, qb));  // dims 0-7 as (a, b) pairs
        const __m256i x1 = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(qa, qb));  // dims 8-15
        for (int i = 0; i < NR; ++i) {
          int32_t w2;
          std::memcpy(&w2, om + (i * ng + g) * kTile + t, 4);
          const __m256i wv = _mm256_set1_epi32(w2);
          if constexpr (kAvxVnni<S>) {
            a[i][0] = dpwssd_avxvnni(a[i][0], x0, wv);
            a[i][1] = dpwssd_avxvnni(a[i][1], x1, wv);
          } else {
            a[i][0] = _mm256_add_epi32(a[i][0], _mm256_madd_epi16(x0, wv));
            a[i][1] = _mm256_add_epi32(a[i][1], _mm256_madd_epi16(x1, wv));
          }
        }
      }
      for (int i = 0; i < NR; ++i) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(I[i] + 16 * h), a[i][0]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(I[i] + 16 * h + 8), a[i][1]);
      }
    }
    for (int i = 0; i < NR; ++i) flush_int_group_avx2<false>(acc + i * D, D, c, I[i], alpha[i], sc[i * ng + g], 0.0f);
  }
}

// P.V of an int4 V tile for NR rows with the 8-bit weights ob (the
// avx512vbmi level's integers against quants centered to q - 8, so the same
// sums I as pv_q4_rows_avx512vbmi): per group, two positions at a time, the
// two rows' 16 nibble bytes interleaved, split into low nibbles (dims 0-15)
// and high (16-31), centered, and one vpmaddubsw a row and half adds both
// positions' products (|pair| <= 2 * 255 * 8) into 16-bit sums; those are
// widened to int32 every 8 pairs (<= 8 * 4080 < 2^15: no saturation, no
// wrap). Positions past nb pair with the last row (weight 0).
template <int NR>
void pv_q4_rows_avx2(float* acc, int64_t D, const float* alpha, const TileRows& vt, int nb, const uint8_t* ob,
                     const float* sc, const float* msum, int64_t ng, Spread& pf) {
  constexpr int64_t blk = int64_t(sizeof(BlockQ4)), qs_at = 4;
  constexpr int kPairsI16 = 8;  // pairs summed in 16 bits before widening
  const uint8_t* rows[kTile + 1];
  for (int t = 0; t < nb; ++t) rows[t] = vt.at(t);
  rows[nb] = rows[nb - 1];
  const __m256i m15 = _mm256_set1_epi8(15), c8 = _mm256_set1_epi8(8);
  alignas(32) int32_t I[NR][kKvGroup];
  for (int64_t g = 0; g < ng; ++g) {
    pf.part();
    const int64_t go = g * blk + qs_at;
    for (int t0 = 0; t0 < nb; t0 += 2 * kPairsI16) {
      __m256i a[NR][2];
      for (int i = 0; i < NR; ++i) a[i][0] = a[i][1] = _mm256_setzero_si256();
      for (int t = t0; t < std::min(nb, t0 + 2 * kPairsI16); t += 2) {
        const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + go));
        const __m128i qb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t + 1] + go));
        const __m256i u = _mm256_set_m128i(_mm_unpackhi_epi8(qa, qb), _mm_unpacklo_epi8(qa, qb));  // byte pairs (a, b)
        const __m256i lo = _mm256_sub_epi8(_mm256_and_si256(u, m15), c8);                          // dims 0-15
        const __m256i hi = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(u, 4), m15), c8);    // dims 16-31
        for (int i = 0; i < NR; ++i) {
          int16_t w2;
          std::memcpy(&w2, ob + (i * ng + g) * kTile + t, 2);
          const __m256i wv = _mm256_set1_epi16(w2);
          a[i][0] = _mm256_add_epi16(a[i][0], _mm256_maddubs_epi16(wv, lo));
          a[i][1] = _mm256_add_epi16(a[i][1], _mm256_maddubs_epi16(wv, hi));
        }
      }
      for (int i = 0; i < NR; ++i)
        for (int h = 0; h < 2; ++h) {
          __m256i* o = reinterpret_cast<__m256i*>(I[i] + 16 * h);
          __m256i x0 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(a[i][h]));
          __m256i x1 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(a[i][h], 1));
          if (t0 > 0)
            x0 = _mm256_add_epi32(x0, _mm256_load_si256(o)), x1 = _mm256_add_epi32(x1, _mm256_load_si256(o + 1));
          _mm256_store_si256(o, x0);
          _mm256_store_si256(o + 1, x1);
        }
    }
    const int64_t c = g * kKvGroup;
    for (int i = 0; i < NR; ++i)
      flush_int_group_avx2<true>(acc + i * D, D, c, I[i], alpha[i], sc[i * ng + g], msum[i * ng + g]);
  }
}

// pv_tile for int8 / int4 V on AVX2 (S: simd::Avx2 or AvxVnni): the integer
// weights (pv_weights<.., true>), 4 rows at a time.
template <class S, KvType T>
void pv_tile_int_avx2(float* acc, int64_t D, const float* alpha, const TileRows& vt, int R, const int* nvis, int n,
                      const float* p, float* dm, float* w, float* msum, Spread& pf) {
  constexpr bool Q4 = T == KvType::int4;
  const int64_t ng = groups_of(D);
  pv_weights<S, T, true>(vt, n, p, R, nvis, ng, dm, w, msum);
  const float* sc = w + R * ng * kTile / (Q4 ? 4 : 2);
  for (int r = 0; r < R;) {
    const int nr = std::min(4, R - r);
    int nb = 0;
    for (int i = r; i < r + nr; ++i) nb = std::max(nb, nvis[i]);
    const int64_t o = int64_t(r) * ng;
    const auto rows = [&](auto nrc) {
      constexpr int NR = decltype(nrc)::value;
      if constexpr (Q4)
        pv_q4_rows_avx2<NR>(acc + r * D, D, alpha + r, vt, nb, reinterpret_cast<const uint8_t*>(w) + o * kTile, sc + o,
                            msum + o, ng, pf);
      else
        pv_q8_rows_avx2<S, NR>(acc + r * D, D, alpha + r, vt, nb, reinterpret_cast<const int16_t*>(w) + o * kTile,
                               sc + o, ng, pf);
    };
    if (nb > 0) with_rows(nr, rows);
    r += nr;
  }
}
#endif

// A tile: up to kTile positions from p0, in at most two runs: the rest of
// p0's block (n1 positions) and the start of the next block.
struct Tile {
  int n = 0, n1 = 0;
};
// Tiles of kTile = 32 positions: the per-tile steps (the softmax step's
// reductions; over int8/int4 V the weights' scales and the flush of the
// integer sums) then count once per 32 positions. But 16 (inside one block)
// over a float V whose tile of K and V rows would pass 16 KiB (f32 at
// head_dim 128: 32 KiB), which no longer stays in L1 for P.V. Measured with
// `llmk bench attention --only llama3,B1,ctx8192` / `smollm2,B1,ctx8192`
// (docs/kv_cache.md). Always 32 over int8/int4 V: compute-bound, and its
// P.V weights read all 32 probabilities of a row (pv_weights).
inline bool tile_wide(const KvLayerView& kv) {
  const int64_t kr = kv_row_bytes(kv.k_type, kv.head_dim), vr = kv_row_bytes(kv.v_type, kv.head_dim);
  return kv_type_quantized(kv.v_type) || kTile * (kr + vr) <= (int64_t(16) << 10);
}
// The tile a walk that ends at k1 takes at p0 (block_tokens bt). It depends
// on p0, never on where the walk began, so walks from one start that reach
// the same position go on with the same tiles.
[[gnu::always_inline]] inline Tile tile_of(int64_t p0, int64_t k1, int64_t bt, bool wide) {
  const int cap = wide ? kTile : kTile / 2;
  Tile t;
  t.n1 = int(std::min<int64_t>({cap, k1 - p0, bt - p0 % bt}));
  t.n = wide ? t.n1 + int(std::min<int64_t>({cap - t.n1, k1 - p0 - t.n1, bt})) : t.n1;
  return t;
}
// The end of the tile that holds position `pos` in the walk from g0 to k1
// (g0 <= pos < k1). A windowed row starts its walk at its window's first
// position lo and ends that first tile here, at the walk from g0's next tile
// boundary, so its later tiles are the walk's whatever lo is, and its bits do
// not depend on the query rows batched with it (attention.cpp).
inline int64_t tile_end_at(const KvLayerView& kv, int64_t g0, int64_t k1, int64_t pos) {
  const bool wide = tile_wide(kv);
  int64_t p = g0;
  while (true) {
    const int64_t e = p + tile_of(p, k1, kv.block_tokens, wide).n;
    if (e > pos) return e;
    p = e;
  }
}

// Positions of the tile [p0, p0 + n) that row r may see: the first visible(..) ones.
inline int visible(const Item& it, int r, int64_t p0, int n) {
  return int(std::clamp<int64_t>(it.limit[r] - p0 + 1, 0, n));
}

// acc_r = acc_r * alpha_r + sum_{t visible to r} p_rt v_t for all R rows, 4
// rows at a time (nvis: [R] scratch for the rows' visible counts).
template <class S, KvType T>
void pv_tile(float* acc, int64_t D, const float* alpha, const TileRows& vt, const Item& it, int64_t p0, int n,
             const float* p, float* dm, float* w, float* msum, int* nvis, Spread& pf) {
  constexpr bool Q = T == KvType::int8 || T == KvType::int4;
  const int64_t ng = Q ? groups_of(D) : 1;
  for (int r = 0; r < it.R; ++r) nvis[r] = visible(it, r, p0, n);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
  if constexpr (Q && std::is_same_v<S, simd::Avx512>) {
    pv_tile_int_avx512<T>(acc, D, alpha, vt, it.R, nvis, n, p, dm, w, msum, pf);
    return;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if constexpr (Q && kIsAvx2<S>) {
    pv_tile_int_avx2<S, T>(acc, D, alpha, vt, it.R, nvis, n, p, dm, w, msum, pf);
    return;
  }
#endif
  if constexpr (Q) pv_weights<S, T>(vt, n, p, it.R, nvis, ng, dm, w, msum);
  const float* wt = Q ? w : p;
  for (int r = 0; r < it.R;) {
    const int nr = std::min(4, it.R - r);
    int nb = 0;
    for (int i = r; i < r + nr; ++i) nb = std::max(nb, nvis[i]);
    float* a = acc + r * D;
    const float* wr = wt + int64_t(r) * kTile * ng;
    const float* mr = msum + int64_t(r) * ng;
    if (nb > 0)
      with_rows(nr, [&](auto nrc) {
        pv_rows_of<S, T, decltype(nrc)::value>(a, D, alpha + r, vt, nvis + r, wr, ng, mr, pf);
      });
    r += nr;
  }
}

template <class S>
void attend(const KvLayerView& kv, const Item& it, float* scratch) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const int64_t D = kv.head_dim, bt = kv.block_tokens, H = kv.n_kv_heads, ng = groups_of(D), R = it.R;
  const int64_t kr = kv_row_bytes(kv.k_type, D), vr = kv_row_bytes(kv.v_type, D);
  float* s = scratch;                                       // [R][kTile] scores, then probabilities
  float* alpha = s + R * kTile;                             // [R] this tile's rescaling of acc
  float* w = alpha + R;                                     // [R][ng][kTile] P.V weights (int8/int4 V)
  float* msum = w + R * kTile * ng;                         // [R][ng] int4 V min terms
  float* dm = msum + R * ng;                                // [2][ng][kTile] V scales and mins of a tile
  int* nvis = reinterpret_cast<int*>(dm + 2 * ng * kTile);  // [R] visible positions of the tile a row
  float* qscratch = dm + 2 * ng * kTile + R;                // nh x QuantQ
  const bool kq = kv_type_quantized(kv.k_type);
  const int64_t QR = quant_rows(it.R), qfloats = QR * ng * kQuantFloats;
  const auto quant_of = [&](int hi) {  // head hi's quantized queries
    QuantQ qq;
    qq.ng = ng, qq.R = QR;
    qq.dq = qscratch + hi * qfloats;
    qq.qsum = qq.dq + QR * ng;
    qq.isum = reinterpret_cast<int32_t*>(qq.qsum + QR * ng);
    qq.q8 = reinterpret_cast<int8_t*>(qq.isum + QR * ng);
    return qq;
  };
  if (kq)
    for (int hi = 0; hi < it.nh; ++hi) {
      QuantQ qq = quant_of(hi);
      quantize_queries(it.q + hi * R * D, it.R, D, qq);
    }
  const bool wide = tile_wide(kv);
  const int cap = wide ? kTile : kTile / 2;
  const auto tile_at = [&](int64_t p0) __attribute__((always_inline)) { return tile_of(p0, it.k1, bt, wide); };
  const auto row_of = [&](int64_t p0, int hi) __attribute__((always_inline)) {  // pool row of position p0, head h + hi
    return kv_pool_row<int64_t>(it.blocks[p0 / bt], H, it.h + hi, bt, p0 % bt);
  };
  const uint8_t* k = static_cast<const uint8_t*>(kv.k);
  const uint8_t* v = static_cast<const uint8_t*>(kv.v);
  // The pool rows of tile tl at p0, head hi: its runs' first rows (the same for K and V).
  struct Runs {
    int64_t a = 0, b = 0;
  };
  const auto runs_of = [&](int64_t p0, const Tile& tl, int hi) __attribute__((always_inline)) {
    Runs x;
    x.a = row_of(p0, hi);
    x.b = tl.n > tl.n1 ? row_of(p0 + tl.n1, hi) : x.a;
    return x;
  };
  const auto rows_of = [&](const uint8_t* base, int64_t stride, const Runs& ru, const Tile& tl)
      __attribute__((always_inline)) {
    return TileRows{base + ru.a * stride, base + ru.b * stride, tl.n1, stride};
  };
  for (int64_t p0 = it.k0; p0 < it.k1;) {
    const Tile tl = tile_at(p0);
    const int n = tl.n;
    for (int hi = 0; hi < it.nh; ++hi) {
      const Runs ru = runs_of(p0, tl, hi);
      const TileRows kt = rows_of(k, kr, ru, tl), vt = rows_of(v, vr, ru, tl);
      const float* q = it.q + hi * R * D;
      float *m = it.m + hi * R, *l = it.l + hi * R, *acc = it.acc + hi * R * D;
      // The next (tile, head): the same tile of the next head, right after
      // this one in its blocks, or the next tile's first head, usually in
      // other blocks somewhere else in the pool. Its K rows are asked for
      // while this one's scores are computed, its V rows during P.V (Spread):
      // the hardware prefetcher does not follow a jump to another block. Into
      // L2 (locality 2): into L1 or two tiles ahead measured slower.
      int64_t np0 = p0;
      int nhi = hi + 1;
      Tile ntl = tl;
      if (nhi == it.nh) np0 = p0 + n, nhi = 0, ntl = np0 < it.k1 ? tile_at(np0) : Tile{};
      const Runs nru = ntl.n ? runs_of(np0, ntl, nhi) : Runs{};
      const TileRows knext = rows_of(k, kr, nru, ntl), vnext = rows_of(v, vr, nru, ntl);
      Spread kpf(knext.a, ntl.n1 * kr, knext.b, (ntl.n - ntl.n1) * kr, std::max(n, 1)),
          vpf(vnext.a, ntl.n1 * vr, vnext.b, (ntl.n - ntl.n1) * vr, std::max<int64_t>(1, D / (2 * W)));
      const QuantQ qq = kq ? quant_of(hi) : QuantQ{};
      // scores, run by run: integer dots for int8/int4 K, else f32 FMAs on the
      // converted rows (one call site a type, so that GCC inlines the dots)
      for (int run = 0; run < 2; ++run) {
        const int nr = run ? n - tl.n1 : tl.n1;
        if (nr == 0) break;
        const uint8_t* kp = run ? kt.b : kt.a;
        float* sr = run ? s + tl.n1 : s;
        with_type(
            kv.k_type, [&](auto tc) __attribute__((always_inline)) {
              constexpr KvType T = decltype(tc)::value;
              if constexpr (T == KvType::int8 || T == KvType::int4)
                score_quantized<S, T>(kp, kr, nr, qq, it.R, sr, kpf);
              else score_float<S, T>(kp, kr, nr, q, it.R, D, sr, kpf);
            });
      }
      kpf.rest();
      // online softmax step per row over its v visible tokens of the tile
      for (int r = 0; r < it.R; ++r) {
        float* sr = s + r * kTile;
        const int nv = visible(it, r, p0, n);
        alpha[r] = 1.0f;
        if (nv == 0) {
          std::fill(sr, sr + cap, 0.0f);
          continue;
        }
        for (int t = nv; t < cap; ++t) sr[t] = -INFINITY;
        V mx = S::load(sr);
        for (int t = W; t < cap; t += W) mx = S::max(mx, S::load(sr + t));
        const float mn = std::max(m[r], S::hmax(mx));
        alpha[r] = mn == m[r] ? 1.0f : std::exp(m[r] - mn);  // exp(0) = 1: skip the call
        // every score so far -inf (keys of score -inf get weight 0, as in the
        // reference): exp(s - 0) = 0 for them, not exp(-inf + inf) = NaN
        const float mu = mn == -INFINITY ? 0.0f : mn;
        V sum = S::zero();
        for (int t = 0; t < cap; t += W) {
          const V e = exp_v<Isa<S>>(S::add(S::load(sr + t), S::set1(-mu)));  // 0 past nv
          S::store(sr + t, e);
          sum = S::add(sum, e);
        }
        l[r] = l[r] * alpha[r] + S::hsum(sum);
        m[r] = mn;
      }
      with_type(
          kv.v_type, [&](auto tc) __attribute__((always_inline)) {  // values, dequantized in registers
            pv_tile<S, decltype(tc)::value>(acc, D, alpha, vt, it, p0, n, s, dm, w, msum, nvis, vpf);
          });
      vpf.rest();
    }
    p0 += n;
  }
}

}  // namespace
}  // namespace llmk::attn
