// The CPU fused scan, written once over the ISA structs of core/simd.hpp
// (simd::Scalar, Avx2, Avx512) and instantiated in topk_scalar.cpp,
// topk_avx2.cpp and topk_avx512.cpp.
//
// One pass over a part of a row, in blocks of kBlock vectors, with a
// reference m (the largest logit so far, -FLT_MAX at first) and double lanes
// acc = sum of 2^((x - m) * s2), s2 = log2(e) / T, over the elements so far:
//  1. the block max is compared once (one vector compare) against the
//     threshold thr, the K-th best logit so far (-inf at first, or for K > 16
//     a guess from a sample, sample_guess, checked at the end). Almost every
//     block is below it and costs only that;
//  2. otherwise (rare) each lane above thr becomes a candidate (for K <= 16
//     inserted in order, add_cand, so thr rises at once; for K > 16 appended
//     after the chunk's blocks, kDefer, thr being fixed until the next flush),
//     and if the block holds a logit above m, m rises to it and acc is
//     multiplied by 2^((m_old - m_new) * s2) before the block's terms. So
//     t = (x - m) * s2 <= 0 for every term;
//  3. 2^t of every element (Terms: simd::Exp2Scaled), the kBlock vectors summed by a
//     tree in f32 and widened into acc.
// This is the online normalizer of Milakov & Gimelshein 2018, rescaled when the
// max rises (a few dozen times in a row of random order; at worst once a
// block, for increasing logits) instead of once an element, in one pass over
// the part: loads from memory overlap the exp arithmetic. What else reads the
// logits: for K > 16 the sample (sample_guess: 64 runs of 64 elements, 3% of
// a 128K row) before the pass; a second pass only when the sample's guess
// proves unsafe (about 0.6% of random rows at K = 50; every ascending part);
// and topk.cpp's finish_row / write_special_row for rows with fewer than K
// logits above -inf or with a NaN / +inf (one more read of such a row).
// For K > 16 the candidate buffer is flushed (nth_element, topk.cpp) at the
// start of a chunk of kChunk elements whenever it holds more than 2K (with a
// sampled guess: twice the count expected above the guess) or the chunk might
// not fit, which also raises the threshold.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/simd.hpp"
#include "topk/topk_internal.hpp"

namespace llmk::topk {
namespace {

using simd::Scalar;

// Sum of f32 lanes in double, and its scaling when the reference max rises.
template <class S>
struct DoubleAcc;
template <>
struct DoubleAcc<Scalar> {
  double a = 0;
  void add(float v) { a += v; }
  void scale(double f) { a *= f; }
  double sum() const { return a; }
};
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <>
struct DoubleAcc<simd::Avx2> {
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  void add(__m256 v) {
    a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  void scale(double f) {
    a = _mm256_mul_pd(a, _mm256_set1_pd(f));
    b = _mm256_mul_pd(b, _mm256_set1_pd(f));
  }
  double sum() const {
    alignas(32) double t[4];
    _mm256_store_pd(t, _mm256_add_pd(a, b));
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
  void lanes(double* o) const {  // o[i]: the sum of lane i's terms (o[8])
    _mm256_storeu_pd(o, a);
    _mm256_storeu_pd(o + 4, b);
  }
};
#endif
#if defined(__AVX512F__) && defined(__AVX512DQ__)
template <>
struct DoubleAcc<simd::Avx512> {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  void add(__m512 v) {
    a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  void scale(double f) {
    a = _mm512_mul_pd(a, _mm512_set1_pd(f));
    b = _mm512_mul_pd(b, _mm512_set1_pd(f));
  }
  double sum() const { return _mm512_reduce_add_pd(_mm512_add_pd(a, b)); }
  void lanes(double* o) const {  // o[i]: the sum of lane i's terms (o[16])
    _mm512_storeu_pd(o, a);
    _mm512_storeu_pd(o + 8, b);
  }
};
#endif

// The terms 2^((x - m) s2) of the elements x of a part, m its reference max,
// as 2^(x s2 - ref), ref the reference in log2 units. kFold (vector ISAs, s2
// >= 2^-100, i.e. T <= 1.8e30): simd::Exp2Scaled with ref = c, m s2 rounded
// up to a multiple of 1/8, the subtraction x - m folded into its first FMA
// (6 FMA-pipe ops a vector, and one register fewer than x - m held in one;
// faster than the fold after a subtraction: docs/softmax_topk.md,
// "Alternatives measured"); rebase fails where |m s2| > 2^18 (|m| / T > 1.8e5), and the
// caller rescans the part with the general terms. Otherwise (kFold false):
// the difference d = x - m rounded first, a multiply and simd::exp2_nonpos
// (7 FMA-pipe ops), or std::exp2 on the scalar path; ref = m s2.
template <class S, bool kFold>
struct Terms {
  using V = typename S::V;
  Terms(float s2, float m) : s2(s2), vs2(S::set1(s2)) { rebase(m); }
  bool rebase(float m) {
    vm = S::set1(m);
    ref = double(m) * s2;
    return true;
  }
  V operator()(V x) const {
    if constexpr (std::is_same_v<S, Scalar>) return std::exp2((x - vm) * vs2);
    else return simd::exp2_nonpos<S>(S::mul(S::sub(x, vm), vs2));
  }
  float s2;
  V vs2, vm;
  double ref;
};
template <class S>
struct Terms<S, true> : simd::Exp2Scaled<S> {
  using E = simd::Exp2Scaled<S>;
  Terms(float s2, float m) : E(s2) { rebase(m); }
  // False (and ref = -inf: the sum so far is dropped) where m s2 is beyond
  // the offsets the fold takes; the part's result is then not used.
  bool rebase(float m) {
    const double c = simd::exp2_offset_for(m, this->scale);
    if (c != c) {
      ref = -std::numeric_limits<double>::infinity();
      return false;
    }
    E::rebase(float(c));
    ref = c;
    return true;
  }
  double ref;
};

// Adds candidate x (x.x > b.thr; x has a higher index than every held
// candidate, since a part is scanned in order). Small k (MoE routing, greedy):
// c[0, n) stays sorted under `better` with n <= k, an insertion per candidate,
// and thr rises to the k-th as soon as k are held, so a short row (V = 8 ..
// 256) admits about k * ln(V / k) candidates instead of all of its first
// chunk. The insertion compares logits only: a held equal logit has the lower
// index and stays ahead. Larger k: appended, the flushes select.
inline void add_cand(CandBuf& b, Cand x) {
  if (b.k > kInsertK) {
    b.c[b.n++] = x;
    return;
  }
  if (!(x.x > b.thr)) return;               // thr rose since the vector compare
  int64_t i = b.n < b.k ? b.n++ : b.k - 1;  // full: x beats c[k-1] (x.x > thr), which drops out
  for (; i > 0 && x.x > b.c[i - 1].x; --i) b.c[i] = b.c[i - 1];
  b.c[i] = x;
  if (b.n == b.k) b.thr = b.c[b.k - 1].x;
}

// Appends the lanes above thr (vthr) of the nv vectors at src, element 0 at
// index j (K > kInsertK: thr holds until the next flush). The lanes of up to
// 64 elements go into one mask and a loop over its set bits appends them, so
// a block costs one hard-to-predict loop exit instead of a branch per vector
// (at K = 256, V = 50257 almost half the blocks come here). Out of line, so
// scan_pass's hot loop stays small.
template <class S, class E>
[[gnu::noinline]] void append_cands(const E* src, int nv, int64_t j, typename S::V vthr, CandBuf& b) {
  constexpr int W = S::kWidth;
  constexpr int kPerMask = W >= 64 ? 1 : 64 / W;  // vectors a 64-bit mask covers
  for (int u0 = 0; u0 < nv; u0 += kPerMask) {
    uint64_t mask = 0;
    for (int u = u0; u < std::min(nv, u0 + kPerMask); ++u)
      mask |= uint64_t(S::gt_mask(S::load(src + u * W), vthr)) << ((u - u0) * W);
    for (; mask; mask &= mask - 1) {
      const int e = u0 * W + __builtin_ctzll(mask);
      b.c[b.n++] = Cand{to_f32(src[e]), int32_t(j + e)};
    }
  }
}

// A starting threshold from a sample (K > kInsertK, parts of >= kSampleMinPart
// elements): kSampleRuns runs of kSampleRun contiguous elements spread over
// the part (sample_run; S = 4096 elements, ~3% of a 128K row's bytes). The
// guess is the r-th best of the runs' maxima, r = ceil(1.3 K S / n) + 3: 1.3
// times the rank the part's K-th best has in the sample, plus 3, so about
// 1.3 K + 3 n / S elements of the part lie above it, instead of a first chunk
// that is all candidates and the ~K ln(n / K) a running threshold from -inf
// admits. (It is the
// sample's r-th best when those lie in distinct runs, else lower: more
// candidates, the same result; a vector max a vector and one selection of 64
// cost less than inserting the sample's lanes into a sorted top r.) It is
// unsafe only when >= r runs hold one of the part's top K each; for a row in
// random order the count is at most Poisson with mean K S / n: for K = 50,
// V = 128256 (mean 1.6, r = 6) ~0.6% of rows, and up to ~5% for the K and V
// of the bench (K = 256, V = 151936: mean 6.9, r = 12); scan_typed then
// rescans. A larger r admits fewer rescans but more candidates, each a slow
// block of the scan (r = ceil(2 K S / n) + 2 was slower at K = 256, and left
// K = 1024 at V = 128256 without a guess: r = 68 > 64).
// thr = -inf: no guess
// (a short part, r > kMaxSampleRank, or fewer than r runs with a logit > -inf).
// An ascending part is always rescanned (its last run holds its top):
// correct, twice the reads.
struct Guess {
  float thr = kNegInf, max = kNegInf;  // the sample's r-th best and its max
  int64_t above = 0;                   // r n / S: about how many logits of a random-order part lie above thr
};
inline constexpr int64_t kMaxSampleRank = kSampleRuns;
template <class S, class T>
Guess sample_guess(const T* row, int64_t lo, int64_t hi, int64_t k) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  static_assert(kSampleRun % W == 0, "a sample run is whole vectors");
  const int64_t n = hi - lo, s = kSampleRuns * kSampleRun;
  if (n < kSampleMinPart) return {};
  const int64_t r = (13 * k * s + 10 * n - 1) / (10 * n) + 3;
  if (r > kMaxSampleRank) return {};
  // The runs are far apart, so the hardware prefetcher does not follow them:
  // run i + kSampleAhead is asked for while run i is read, so a few runs' DRAM
  // latencies overlap (asking for all 64 at once filled the miss buffers).
  constexpr int64_t kSampleAhead = 4;
  const auto ask = [&](int64_t i) {
    const char* q = reinterpret_cast<const char*>(row + sample_run(lo, hi, i));
    for (size_t o = 0; o < kSampleRun * sizeof(T); o += 64) __builtin_prefetch(q + o);
  };
  for (int64_t i = 0; i < kSampleAhead; ++i) ask(i);
  float best[kSampleRuns];  // each run's max (a NaN run: -inf; its row is special anyway)
  for (int64_t i = 0; i < kSampleRuns; ++i) {
    if (i + kSampleAhead < kSampleRuns) ask(i + kSampleAhead);
    const T* run = row + sample_run(lo, hi, i);
    V mx = S::load(run);
    for (int j = W; j < kSampleRun; j += W) mx = S::max(mx, S::load(run + j));
    const float v = S::hmax(mx);
    best[i] = v == v ? v : kNegInf;
  }
  Guess g;
  g.above = r * n / s;
  rth_largest(best, kSampleRuns, r, g.thr, g.max);
  return g.thr == kNegInf ? Guess{} : g;
}

// One pass over [lo, hi) into b (empty, b.thr its starting threshold) from the
// reference max m0 >= b.thr (-FLT_MAX, or the sample's max): returns the part's
// state. A chunk starts with a flush once the buffer holds more than flush_at
// candidates (below). kFold: in_range comes back false when a max was beyond
// the fold's offsets (Terms), or the part's max is -FLT_MAX (the fold has no
// offset for it, and its terms 2^0 = 1 count); then neither b nor the state is
// the part's, and the caller rescans it with kFold false.
template <class S, bool kFold, bool kAppend, class T>
PartState scan_pass(const T* row, int64_t lo, int64_t hi, float scale, CandBuf& b, float m0, int64_t flush_at,
                    bool& in_range) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  // Vectors a block: independent exps (ILP), summed by a tree in f32 (each
  // lane a sum of 8 terms, 3 roundings, so below 3 * 2^-24 relative for these
  // positive terms); only the block sum is widened into double lanes.
  constexpr int kBlock = 8;
  constexpr int kBlockElems = kBlock * W;
  static_assert(kChunk % kBlockElems == 0, "a full chunk is whole blocks");
  constexpr bool kDefer = kAppend && kChunk / kBlockElems <= 64;
  const float s2 = scale * kLog2e;  // exp(d * scale) = 2^(d * scale * log2(e))
  Terms<S, kFold> terms(s2, m0);
  in_range = m0 == -FLT_MAX || terms.ref > -HUGE_VAL;
  float m = m0;  // reference max: every logit > -inf seen so far is <= m, and thr <= m
  V vm = S::set1(m), vthr = S::set1(b.thr);
  DoubleAcc<S> acc;
  // The nv vectors at src (nv = kBlock, or 1 in the part's tail), element j
  // first, loaded from src wherever they are used (GCC keeps them in registers
  // or reloads them from L1): an array of loaded vectors handed to this lambda
  // made GCC store every block's vectors to the stack.
  // always_inline: at -O2 GCC 12 otherwise calls this lambda, its captures in
  // memory.
  // Raises m to the block max when it is larger, rescaling acc; called once
  // a vector compare found a lane of bmax above m (cheaper than the
  // horizontal max: most candidate blocks hold no new max). A NaN lane may
  // hide a larger logit from bmax (and a candidate from the compare with
  // thr); the part's sum is NaN anyway (exp2 of NaN below), so the row is
  // special: rescanned, its candidates and m unused.
  const auto raise_max = [&](V bmax) __attribute__((always_inline)) {
    const float bm = S::hmax(bmax);
    if (bm > m) {
      const double ref = terms.ref;
      in_range &= terms.rebase(bm);
      // 2^d underflows to 0 below -1075 (always at the first max, from
      // -FLT_MAX): skip libm's slow path. NaN (-inf - -inf): nothing counted yet.
      const double d = ref - terms.ref;
      acc.scale(!(d > -1100) ? 0.0 : std::exp2(d));
      m = bm;
      vm = S::set1(m);
    }
  };
  // kDefer (K > 16, whole blocks): a block's compare with thr only sets its
  // bit in cmask, no branch; after the chunk's blocks (still in L1) the set
  // bits' blocks append their candidates. A branch a candidate block would
  // mispredict (a block in 5 holds one at K = 256, V = 128256) and empty the
  // pipeline of the exps in flight; this leaves one hard loop exit a chunk, for
  // a second compare every block (a cost on rows from cache at small K). m
  // still needs a branch (bmax > m: a few times a row).
  uint64_t cmask = 0;  // bit i: block i of the chunk holds a candidate
  const auto block = [&](const auto* src, int nv, int64_t j) __attribute__((always_inline)) {
    V bmax = S::load(src);
    for (int u = 1; u < nv; ++u) bmax = S::max(bmax, S::load(src + u * W));
    if (kDefer && nv == kBlock) {  // (the part's tail takes the path below)
      cmask |= uint64_t(S::gt_mask(bmax, vthr) != 0) << ((j - lo) % kChunk / kBlockElems);
      if (S::gt_mask(bmax, vm)) [[unlikely]]
        raise_max(bmax);
    } else if (S::gt_mask(bmax, vthr)) [[unlikely]] {  // rare: candidates, and maybe a new max
      if (kAppend) {
        append_cands<S>(src, nv, j, vthr, b);
      } else {
        for (int u = 0; u < nv; ++u) {
          const V xu = S::load(src + u * W);
          unsigned mask = S::gt_mask(xu, vthr);
          if (!mask) continue;
          alignas(64) float lane[W];
          S::store(lane, xu);
          do {
            const int l = __builtin_ctz(mask);
            add_cand(b, Cand{lane[l], int32_t(j + u * W + l)});
            mask &= mask - 1;
          } while (mask);
          vthr = S::set1(b.thr);
        }
      }
      if (S::gt_mask(bmax, vm)) raise_max(bmax);
    }
    // The terms, summed by a pairwise tree in source order (written out: a
    // recursive lambda was left as calls at -O2).
    const auto term = [&](int u) __attribute__((always_inline)) { return terms(S::load(src + u * W)); };
    if (nv == 1) return acc.add(term(0));
    static_assert(kBlock == 8, "the tree below sums 8 vectors");
    acc.add(S::add(S::add(S::add(term(0), term(1)), S::add(term(2), term(3))),
                   S::add(S::add(term(4), term(5)), S::add(term(6), term(7)))));
  };
  // b.next_row's sample runs, asked for in step with this part's chunks (all
  // of them by its end), so the next row's sample_guess reads them from cache,
  // not DRAM. Into L1 (locality 3; with 2, the 256x50257 bench was slower).
  const T* next = static_cast<const T*>(b.next_row);
  int64_t next_run = 0;
  for (int64_t c0 = lo; c0 < hi; c0 += kChunk) {
    if (kFold && !in_range) return {};
    const int64_t c1 = std::min(hi, c0 + kChunk);
    if (next)
      for (const int64_t upto = ((c1 - lo) * kSampleRuns + (hi - lo) - 1) / (hi - lo); next_run < upto; ++next_run) {
        const char* q = reinterpret_cast<const char*>(next + sample_run(lo, hi, next_run));
        for (size_t o = 0; o < kSampleRun * sizeof(T); o += 64) __builtin_prefetch(q + o, 0, 3);
      }
    // Flush when a chunk might not fit, and also as soon as the buffer holds
    // more than flush_at: without a guess 2K, so the first chunks raise the
    // threshold early instead of filling the buffer; each flush costs O(n)
    // and drops n - K >= n / 2 candidates, so the work per candidate stays
    // O(1). With a guess, twice the count expected above it (g.above): a
    // random-order part then never flushes, so its buffer stays in index
    // order for finish_row, where a flush at 2K costs more (nth_element) than
    // the candidates it keeps out; a part whose sample misleads (a descending
    // row: ~8% of it above the guess) still flushes early.
    if (b.n + (c1 - c0) > b.cap || b.n > flush_at) {
      flush(b);
      vthr = S::set1(b.thr);
    }
    int64_t j = c0;
    for (; j + kBlockElems <= c1; j += kBlockElems) block(row + j, kBlock, j);
    if constexpr (kDefer) {
      for (; cmask; cmask &= cmask - 1) {
        const int64_t jb = c0 + int64_t(__builtin_ctzll(cmask)) * kBlockElems;
        append_cands<S>(row + jb, kBlock, jb, vthr, b);
      }
    }
    for (; j + W <= c1; j += W) block(row + j, 1, j);  // the part's tail: single vectors
    if (j < c1) {  // and its last < W elements, padded with -inf (never a candidate, 2^-inf = 0)
      alignas(64) float pad[W];
      for (int i = 0; i < W; ++i) pad[i] = j + i < c1 ? to_f32(row[j + i]) : kNegInf;
      block(static_cast<const float*>(pad), 1, j);
    }
  }
  // The term of the element at m is 2^0 = 1 without kFold, so sum > 0 unless
  // every element is -inf (then m is still -FLT_MAX: the part is empty) or
  // NaN. With kFold the sum is relative to ref: times 2^(ref - m s2) (exact
  // in double: m s2 has 48 bits) it is relative to m, and one element at m
  // counts exactly 1 instead of its term times that (within 1.9e-7 of 1), so a
  // row whose other terms underflow sums to exactly 1, as without kFold.
  double s = acc.sum();
  if constexpr (kFold) {
    if (m == -FLT_MAX) in_range = false;
    const double tm = S::hmax(terms(S::set1(m)));
    s = (s - tm) * std::exp2(terms.ref - double(m) * s2) + 1;
  }
  return s == 0 ? PartState{} : PartState{m, s};
}

// Scans [lo, hi) into b (empty) and merges the part's state into st. With a
// guess g, b starts at thr = g and m at the sample's max (>= g, so every logit
// above m is still above thr and seen by the rare path). Why a guess never
// changes the result: every logit not admitted is <= g; every held candidate
// is > g (admitted strictly above thr >= g; flushes keep the best K). So if
// K are held at the end, the part's K-th best is > g and nothing that was not
// admitted (<= g, also at a tie with g) can be in its top K. Otherwise the
// guess was unsafe: the part is rescanned from thr = -inf. The sum does not
// depend on thr (only its rounding on where m starts).
template <class S, class T>
void scan_typed(const T* row, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  const bool app = b.k > kInsertK;
  const auto general = app ? scan_pass<S, false, true, T> : scan_pass<S, false, false, T>;
  auto pass = general;
  if constexpr (!std::is_same_v<S, Scalar>)
    if (scale * kLog2e >= simd::Exp2Scaled<S>::kMinScale)
      pass = app ? scan_pass<S, true, true, T> : scan_pass<S, true, false, T>;
  // A pass from threshold thr0 and max m0; again with the general terms where
  // a max was beyond the fold's range.
  const auto run = [&](float thr0, float m0, int64_t flush_at) {
    bool in_range = true;
    b.thr = thr0;
    PartState p = pass(row, lo, hi, scale, b, m0, flush_at, in_range);
    if (!in_range) {
      b.n = 0;
      b.thr = thr0;
      b.in_index_order = true;
      p = general(row, lo, hi, scale, b, m0, flush_at, in_range);
    }
    return p;
  };
  const Guess g = app && b.n == 0 && b.thr == kNegInf ? sample_guess<S>(row, lo, hi, b.k) : Guess{};
  if (g.thr > kNegInf) {
    const PartState p = run(g.thr, std::max(g.max, -FLT_MAX), std::max(2 * b.k, 2 * g.above));
    if (b.n >= b.k) return merge_state(st, p, scale);
    b.n = 0;  // unsafe guess
    b.in_index_order = true;
  }
  merge_state(st, run(kNegInf, -FLT_MAX, 2 * b.k), scale);
}

// A whole row of v <= kSmallV logits, k <= kInsertK (see SmallFn; on the
// vector ISAs the rows batch_rows picks take small_rows below instead): copied to
// f32 and padded with -inf to whole vectors; m = its max, the sum of
// 2^((x - m) * s2) over double lanes as in scan_pass (NaN or +inf make it NaN:
// the row is special; all -inf leaves m = -inf: special too); then k rounds
// of "vector max, lowest lane holding it, set it to -inf", which yields the
// best k in the op's order (larger first, ties to the lower index) with no
// data-dependent branch per element. The scan's sorted insertion would branch
// on every element (every logit of a short row is a candidate), no faster than
// the naive op at V = 8.
template <class S, class T>
int64_t small_row_typed(const T* row, int64_t v, int64_t k, float scale, Cand* c, PartState& st) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  alignas(64) float x[kSmallV + 16];
  const int64_t nv = std::max<int64_t>(1, (v + W - 1) / W);
  int64_t j0 = 0;
  for (; j0 + W <= v; j0 += W) S::store(x + j0, S::load(row + j0));
  for (; j0 < v; ++j0) x[j0] = to_f32(row[j0]);
  std::fill(x + v, x + nv * W, kNegInf);
  // The max of x[0, nv W) in four independent chains (in one chain of nv
  // dependent maxes, a 256-logit row waited mostly on their latency).
  const auto max_all = [&]() {
    V b0 = S::load(x), b1 = b0, b2 = b0, b3 = b0;
    int64_t u = 1;
    for (; u + 3 < nv; u += 4) {
      b0 = S::max(b0, S::load(x + u * W));
      b1 = S::max(b1, S::load(x + (u + 1) * W));
      b2 = S::max(b2, S::load(x + (u + 2) * W));
      b3 = S::max(b3, S::load(x + (u + 3) * W));
    }
    for (; u < nv; ++u) b0 = S::max(b0, S::load(x + u * W));
    return S::hmax(S::max(S::max(b0, b1), S::max(b2, b3)));
  };
  const float m = max_all();  // a NaN lane may hide here; the sum below is NaN then
  if (m == kNegInf) {
    st = PartState{};
    return 0;
  }
  const Terms<S, false> terms(scale * kLog2e, m);
  DoubleAcc<S> acc;
  for (int64_t u = 0; u < nv; ++u) acc.add(terms(S::load(x + u * W)));
  st = PartState{m, acc.sum()};
  if (std::isnan(st.s)) return 0;
  constexpr unsigned kLanes = W >= 32 ? ~0u : (1u << W) - 1;
  // A taken logit leaves by a vector min with -inf in its lane (no NaN is
  // left here): a scalar store into a vector that is loaded next would stall
  // the load (no store-to-load forwarding from a narrower store).
  alignas(64) float pat[2 * W];
  std::fill(pat, pat + 2 * W, -kNegInf);
  pat[W] = kNegInf;  // pat + W - l: -inf in lane l only
  int64_t n = 0;
  for (; n < k; ++n) {
    const float bm = max_all();
    if (bm == kNegInf) break;  // only -inf left: finish_row adds the lowest -inf indices
    const V vb = S::set1(bm);
    for (int64_t u = 0;; ++u) {  // lanes >= bm hold bm: the first is the lowest index
      const unsigned eq = ~S::gt_mask(vb, S::load(x + u * W)) & kLanes;
      if (eq) {
        const int l = __builtin_ctz(eq);
        c[n] = Cand{bm, int32_t(u * W + l)};
        S::store(x + u * W, S::min(S::load(x + u * W), S::load(pat + W - l)));
        break;
      }
    }
  }
  return n;
}

// The best k <= KL of each of nr <= W rows held in the columns of xt
// (xt[j W + i] = logit j of row i), in the op's order, into c[i k, i k + k):
// one pass over j, from the last column down, inserts each column into KL
// lists sorted in registers, a lane a row (r[0] the best), by a chain of
// compare-exchanges. Going down, the new logit has a lower index than every
// one held, so it goes ahead of equal ones: y >= r[t] swaps. A logit pushed
// down by the swap was ahead of r[t + 1] (larger, or equal with a lower
// index), so it swaps there too, and so on: an insertion. (Going up with
// y > r[t] broke that: a pushed-down logit stopped behind an equal one of a
// higher index.) The compare's mask stays in the ISA's own form, never
// converted between AVX-512 masks and vectors. NaN never enters
// (no NaN compares >=) and its row is special anyway; -inf logits do enter
// the lists' -inf start, the lowest index first, so a row with fewer than k
// logits above -inf ends with its lowest-index -inf logits in index order,
// as finish_row would add them. One pass over j, not k rounds of a pass
// (docs/softmax_topk.md, "Small rows").
template <class S, int KL>
void best_of_rows(const float* xt, int64_t nr, int64_t v, int64_t k, Cand* c) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V r[KL], at[KL];
  for (int t = 0; t < KL; ++t) {
    r[t] = S::set1(kNegInf);
    at[t] = S::set1(-1.0f);
  }
  const V one = S::set1(1.0f);
  V jv = S::set1(float(v - 1));
  for (int64_t j = v - 1; j >= 0; --j, jv = S::sub(jv, one)) {
    V y = S::load(xt + j * W), yj = jv;
#pragma GCC unroll 16
    for (int t = 0; t < KL; ++t) {
      const typename S::M ge = S::ge_m(y, r[t]);
      const V down = S::blend_m(y, r[t], ge), down_j = S::blend_m(yj, at[t], ge);
      r[t] = S::blend_m(r[t], y, ge);
      at[t] = S::blend_m(at[t], yj, ge);
      y = down;
      yj = down_j;
    }
  }
  alignas(64) float rv[KL][W], av[KL][W];
  for (int t = 0; t < KL; ++t) {
    S::store(rv[t], r[t]);
    S::store(av[t], at[t]);
  }
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t n = 0; n < k; ++n) c[i * k + n] = Cand{rv[n][i], int32_t(av[n][i])};
}

// Transposes the W x W block r in registers (r[c] becomes column c): the
// standard unpack / shuffle stages, 3 of them with AVX2, 4 with AVX-512.
template <class S>
void transpose(typename S::V (&r)[S::kWidth]);
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <>
[[maybe_unused, gnu::always_inline]] inline void transpose<simd::Avx2>(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);      // a0 b0 c0 d0 | a4 b4 c4 d4
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);  // a1 .. d1 | a5 .. d5
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x20);      // the low halves: column c
    r[c + 4] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x31);  // the high halves: column c + 4
  }
}
#endif
#if defined(__AVX512F__) && defined(__AVX512DQ__)
template <>
[[maybe_unused, gnu::always_inline]] inline void transpose<simd::Avx512>(__m512 (&r)[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5 | a8 .. | a12 ..
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  // a2 b2 a3 b3 | a6 ..
  }
  const auto lo_pd = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  const auto hi_pd = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  for (int i = 0; i < 16; i += 4) {
    u[i] = lo_pd(t[i], t[i + 2]);          // a0 b0 c0 d0 | a4 .. | a8 .. | a12 ..
    u[i + 1] = hi_pd(t[i], t[i + 2]);      // a1 .. d1 | a5 ..
    u[i + 2] = lo_pd(t[i + 1], t[i + 3]);  // a2 ..
    u[i + 3] = hi_pd(t[i + 1], t[i + 3]);  // a3 ..
  }
  // 128-bit quarters: 0x88 takes quarters 0 and 2 of each source, 0xdd 1 and 3.
  for (int h = 0; h < 16; h += 8)
    for (int c = 0; c < 4; ++c) {
      t[h + c] = _mm512_shuffle_f32x4(u[h + c], u[h + c + 4], 0x88);      // a_c | a_c+8 | e_c | e_c+8
      t[h + c + 4] = _mm512_shuffle_f32x4(u[h + c], u[h + c + 4], 0xdd);  // a_c+4 | a_c+12 | e_c+4 | e_c+12
    }
  for (int c = 0; c < 8; ++c) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0x88);      // column c
    r[c + 8] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0xdd);  // column c + 8
  }
}
#endif

// nr <= W whole rows of v <= kBatchV logits, k <= kInsertK (vector ISAs,
// SmallRowsFn): one row a lane, so a MoE batch of 8 experts, top 2, costs a
// few vector ops a row, where small_row's one row at a time is a chain of
// dependent horizontal steps. Row i's logits are copied to the columns of xt
// (xt[j W + i] = logit j; rows past nr are zeros). Then, each step one vector
// op for W rows: m = max_j x_j (a NaN or +inf makes the sum NaN below: the
// row is special, as in small_row); the sum of 2^((x_j - m) s2), 8 columns
// by a tree in f32, then over double lanes; and the best k of each row by one
// insertion pass (best_of_rows).
// st[i] is row i's state (PartState{} when all its logits are -inf).
template <class S, class T>
void small_rows_typed(const T* base, int64_t ld, int64_t nr, int64_t v, int64_t k, float scale, Cand* c,
                      PartState* st) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  alignas(64) float xt[kBatchV * W];
  // W columns at a time through a register transpose (an element-by-element
  // copy would be a large share of a 256-logit batch), the last < W columns
  // element by element; rows past nr are zeros. The transpose is inlined and
  // a full batch's loads unrolled: as a call, GCC kept r on the stack.
  int64_t j0 = 0;
  for (; j0 + W <= v; j0 += W) {
    V r[W];
    if (nr == W) {
#pragma GCC unroll 16
      for (int64_t i = 0; i < W; ++i) r[i] = S::load(base + i * ld + j0);
    } else {
#pragma GCC unroll 16
      for (int64_t i = 0; i < W; ++i) r[i] = i < nr ? S::load(base + i * ld + j0) : S::zero();
    }
    transpose<S>(r);
    for (int c = 0; c < W; ++c) S::store(xt + (j0 + c) * W, r[c]);
  }
  for (; j0 < v; ++j0)
    for (int64_t i = 0; i < W; ++i) xt[j0 * W + i] = i < nr ? to_f32(base[i * ld + j0]) : 0.0f;
  V m = S::set1(kNegInf);
  for (int64_t j = 0; j < v; ++j) m = S::max(m, S::load(xt + j * W));
  const V s2 = S::set1(scale * kLog2e);
  DoubleAcc<S> acc;
  const auto term = [&](int64_t j) __attribute__((always_inline)) {
    return simd::exp2_nonpos<S>(S::mul(S::sub(S::load(xt + j * W), m), s2));
  };
  // 8 columns summed by a tree in f32 before they are widened (as scan_pass's
  // blocks): a double add a column was one chain, its latency the loop's pace.
  int64_t j = 0;
  for (; j + 8 <= v; j += 8)
    acc.add(S::add(S::add(S::add(term(j), term(j + 1)), S::add(term(j + 2), term(j + 3))),
                   S::add(S::add(term(j + 4), term(j + 5)), S::add(term(j + 6), term(j + 7)))));
  for (; j < v; ++j) acc.add(term(j));
  alignas(64) float mv[W];
  alignas(64) double sv[W];
  S::store(mv, m);
  acc.lanes(sv);
  for (int64_t i = 0; i < nr; ++i) st[i] = mv[i] == kNegInf ? PartState{} : PartState{mv[i], sv[i]};
  switch (k <= 1 ? 1 : k <= 2 ? 2 : k <= 4 ? 4 : k <= 8 ? 8 : 16) {
    case 1: return best_of_rows<S, 1>(xt, nr, v, k, c);
    case 2: return best_of_rows<S, 2>(xt, nr, v, k, c);
    case 4: return best_of_rows<S, 4>(xt, nr, v, k, c);
    case 8: return best_of_rows<S, 8>(xt, nr, v, k, c);
    default: return best_of_rows<S, 16>(xt, nr, v, k, c);
  }
}

template <class S>
void small_rows(const void* base, DType dtype, int64_t ld, int64_t nr, int64_t v, int64_t k, float scale, Cand* c,
                PartState* st) {
  switch (dtype) {
    case DType::f16: return small_rows_typed<S>(static_cast<const f16*>(base), ld, nr, v, k, scale, c, st);
    case DType::bf16: return small_rows_typed<S>(static_cast<const bf16*>(base), ld, nr, v, k, scale, c, st);
    default: return small_rows_typed<S>(static_cast<const float*>(base), ld, nr, v, k, scale, c, st);
  }
}

template <class S>
int64_t small_row(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st) {
  switch (dtype) {
    case DType::f16: return small_row_typed<S>(static_cast<const f16*>(row), v, k, scale, c, st);
    case DType::bf16: return small_row_typed<S>(static_cast<const bf16*>(row), v, k, scale, c, st);
    default: return small_row_typed<S>(static_cast<const float*>(row), v, k, scale, c, st);
  }
}

// probs (ProbsFn) on the vector ISAs: out[j] = float(exp(d_j) / s), d_j =
// (double(c[j].x) - m) scale as in probs_scalar, exp on 4 (AVX2) or 8
// (AVX-512) doubles at once. Below kMinExpArg the result is 0: exp(-104) / s
// < 2^-150 for s >= 1 (the max's own term), and such a quotient rounds to 0 in
// f32 whatever its exact value. Above it: d = n ln2 + r, n = round(d log2 e)
// in [-151, 0] and |r| <= ln2 / 2 (r by one FMA with ln2 in double: off by
// at most 151 * 2^-55), e^r by its Taylor polynomial through r^10 (remainder
// below 2.3e-13 relative), times 2^n (exponent bits). A row of 8 experts at
// K = 8 spent most of its time in 7 calls of std::exp (~20 cycles each).
inline constexpr double kMinExpArg = -104.0, kLog2eD = 1.4426950408889634, kLn2D = 0.6931471805599453;
inline constexpr double kExpTaylor[] = {1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                                        1.0 / 24,     1.0 / 6,     0.5,        1.0,       1.0};  // 1/9! .. 1/0!
template <class S>
void probs_pd(const Cand* c, int64_t k, double m, double scale, double s, float* out);
template <class S>
void exp_div_pd(const double* d, const double* s, int64_t n, float* out);
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// exp(d) on 4 doubles, 0 below kMinExpArg (see above).
inline __m256d exp_pd(__m256d d) {
  const __m256d lo = _mm256_set1_pd(kMinExpArg);
  const __m256d x = _mm256_max_pd(d, lo);
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(kLog2eD)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(kLn2D), x);
  __m256d p = _mm256_set1_pd(1.0 / 3628800);  // 1/10!
  for (double cf : kExpTaylor) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(cf));
  const __m256i e2n = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)),
                                                         _mm256_set1_epi64x(1023)),
                                        52);
  return _mm256_and_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(e2n)), _mm256_cmp_pd(d, lo, _CMP_GE_OQ));
}
template <>
[[maybe_unused]] void probs_pd<simd::Avx2>(const Cand* c, int64_t k, double m, double scale, double s, float* out) {
  const __m256d vm = _mm256_set1_pd(m), vsc = _mm256_set1_pd(scale), vs = _mm256_set1_pd(s);
  const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);  // the x of 4 Cands {x, i}
  for (int64_t j = 0; j < k; j += 4) {
    const int64_t nj = std::min<int64_t>(4, k - j);
    Cand t[4];
    const Cand* src = c + j;
    if (nj < 4) {
      for (int64_t i = 0; i < 4; ++i) t[i] = i < nj ? c[j + i] : Cand{kNegInf, 0};
      src = t;
    }
    const __m256 raw = _mm256_loadu_ps(reinterpret_cast<const float*>(src));
    const __m256d d = _mm256_mul_pd(
        _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(raw, even))), vm), vsc);
    const __m128 q = _mm256_cvtpd_ps(_mm256_div_pd(exp_pd(d), vs));
    if (nj == 4) {
      _mm_storeu_ps(out + j, q);
    } else {
      alignas(16) float o[4];
      _mm_store_ps(o, q);
      std::copy(o, o + nj, out + j);
    }
  }
}
template <>
[[maybe_unused]] void exp_div_pd<simd::Avx2>(const double* d, const double* s, int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    _mm_storeu_ps(out + j, _mm256_cvtpd_ps(_mm256_div_pd(exp_pd(_mm256_loadu_pd(d + j)), _mm256_loadu_pd(s + j))));
  if (j < n) {
    alignas(32) double dt[4] = {kNegInf, kNegInf, kNegInf, kNegInf}, st[4] = {1, 1, 1, 1};
    std::copy(d + j, d + n, dt);
    std::copy(s + j, s + n, st);
    alignas(16) float o[4];
    _mm_store_ps(o, _mm256_cvtpd_ps(_mm256_div_pd(exp_pd(_mm256_load_pd(dt)), _mm256_load_pd(st))));
    std::copy(o, o + (n - j), out + j);
  }
}
#endif
#if defined(__AVX512F__) && defined(__AVX512DQ__)
// exp(d) on 8 doubles, 0 below kMinExpArg (see above).
inline __m512d exp_pd(__m512d d) {
  const __m512d lo = _mm512_set1_pd(kMinExpArg);
  const __m512d x = _mm512_max_pd(d, lo);
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(kLog2eD)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(kLn2D), x);
  __m512d p = _mm512_set1_pd(1.0 / 3628800);
  for (double cf : kExpTaylor) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(cf));
  return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(d, lo, _CMP_GE_OQ), _mm512_scalef_pd(p, n));
}
template <>
[[maybe_unused]] void probs_pd<simd::Avx512>(const Cand* c, int64_t k, double m, double scale, double s, float* out) {
  const __m512d vm = _mm512_set1_pd(m), vsc = _mm512_set1_pd(scale), vs = _mm512_set1_pd(s);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t j = 0; j < k; j += 8) {
    const int nj = int(std::min<int64_t>(8, k - j));
    const __mmask8 live = __mmask8((1u << nj) - 1);
    const __m512 raw = _mm512_maskz_loadu_ps(__mmask16((1u << (2 * nj)) - 1), reinterpret_cast<const float*>(c + j));
    const __m256 xs = _mm512_castps512_ps256(_mm512_permutexvar_ps(even, raw));
    const __m512d d = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(xs), vm), vsc);
    _mm256_mask_storeu_ps(out + j, live, _mm512_cvtpd_ps(_mm512_div_pd(exp_pd(d), vs)));
  }
}
template <>
[[maybe_unused]] void exp_div_pd<simd::Avx512>(const double* d, const double* s, int64_t n, float* out) {
  for (int64_t j = 0; j < n; j += 8) {
    const __mmask8 live = __mmask8((1u << std::min<int64_t>(8, n - j)) - 1);
    const __m512d e = exp_pd(_mm512_mask_loadu_pd(_mm512_set1_pd(kNegInf), live, d + j));
    const __m512d sj = _mm512_mask_loadu_pd(_mm512_set1_pd(1.0), live, s + j);
    _mm256_mask_storeu_ps(out + j, live, _mm512_cvtpd_ps(_mm512_div_pd(e, sj)));
  }
}
#endif

template <class S>
void scan(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st) {
  switch (dtype) {
    case DType::f16: return scan_typed<S>(static_cast<const f16*>(row), lo, hi, scale, b, st);
    case DType::bf16: return scan_typed<S>(static_cast<const bf16*>(row), lo, hi, scale, b, st);
    default: return scan_typed<S>(static_cast<const float*>(row), lo, hi, scale, b, st);
  }
}

}  // namespace
}  // namespace llmk::topk
