// Internals of softmax + top-k shared by the CPU paths (topk.cpp, the
// per-ISA scan files, the reference and the naive baseline): the candidate
// type and its order, the per-part state (running max and sum) and its exact
// merge, and the per-row finishing steps. Nothing here is ISA-specific, and
// everything that instantiates std:: templates is defined out of line in
// topk.cpp, so no AVX code can be linked into the scalar path.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/constants.hpp"
#include "llmk/dtype.hpp"
#include "llmk/topk.hpp"

namespace llmk::topk {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A candidate: a logit (converted to f32) and its index in the row.
struct Cand {
  float x;
  int32_t i;
};
// The total order of the op: larger logit first, ties to the lower index. A
// function object, so std::nth_element / std::sort inline it (a function
// passed by pointer is called out of line for every comparison).
struct Better {
  bool operator()(const Cand& a, const Cand& b) const { return a.x > b.x || (a.x == b.x && a.i < b.i); }
};
inline constexpr Better better{};

// Running state of one part of a row: m = max logit seen (raw, not divided by
// T) and s = sum exp((x - m) * scale). s is NaN once the part held a NaN or
// +inf (then the row is special); m = -inf and s = 0 for an all -inf part.
struct PartState {
  float m = kNegInf;
  double s = 0;
};

// Exact merge of two parts' (max, sum): rescales the sum with the smaller max
// to the larger one. Commutative up to rounding, NaN is sticky, and an empty
// (-inf) side is the identity, so no -inf - -inf ever occurs.
inline void merge_state(PartState& a, const PartState& b, double scale) {
  if (std::isnan(a.s) || std::isnan(b.s)) {
    a.s = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  if (b.m == kNegInf) return;
  if (a.m == kNegInf) {
    a = b;
    return;
  }
  if (b.m > a.m) {
    a.s = a.s * std::exp((double(a.m) - double(b.m)) * scale) + b.s;
    a.m = b.m;
  } else {
    a.s += b.s * std::exp((double(b.m) - double(a.m)) * scale);
  }
}

// Candidate buffer of one part: holds at most cap candidates; `thr` is the
// K-th best logit after the last flush (-inf before): later elements of the
// same part (higher indices) enter only when strictly above it, since an equal
// one loses the tie to the K kept ones.
// in_index_order: c[0, n) is in increasing index order (appended by the scan of
// one part, K > kInsertK, and not yet reordered by a flush), so a stable sort
// by logit alone puts ties in the op's order (sort_better's by_index).
// next_row: the row (the same part of it) this thread will likely scan next,
// whose sample (sample_guess) the scan prefetches, a run at a time as it goes,
// so the next row's guess does not wait on DRAM latency; null for none.
struct CandBuf {
  Cand* c = nullptr;
  int64_t n = 0, cap = 0, k = 0;
  float thr = kNegInf;
  bool in_index_order = false;
  const void* next_row = nullptr;
};

// k up to this keeps its candidates sorted by insertion (scan) and finishes by
// an insertion pass (finish_row): cheaper than selection for a few dozen.
inline constexpr int64_t kInsertK = 16;
inline constexpr int64_t kChunk = 1024;  // elements between flush checks (the buffer holds one chunk of candidates)
inline int64_t cand_capacity(int64_t k) { return k + std::max<int64_t>(k, kChunk) + kChunk; }

// The sample of a part [lo, hi) that sets its starting threshold (topk_scan.hpp,
// sample_guess): kSampleRuns runs of kSampleRun contiguous elements, run i
// starting at sample_run(lo, hi, i), the first at lo and the last ending at hi.
inline constexpr int64_t kSampleRuns = 64, kSampleRun = 64, kSampleMinPart = 16384;
inline int64_t sample_run(int64_t lo, int64_t hi, int64_t i) {
  return lo + (hi - lo - kSampleRun) * i / (kSampleRuns - 1);
}

// Throws InvalidArgument naming `fn` and the argument for anything the header
// rejects (and for a non-CPU view when cpu_only).
void validate(const char* fn, const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out,
              bool cpu_only);

// Keeps the best min(n, k) candidates (unordered) and raises thr to the k-th.
void flush(CandBuf& b);

// How finish_row's candidates c[0, n) are ordered: no order; increasing index
// (CandBuf::in_index_order); or already in the op's order with n <= k
// (small_row's output).
enum class CandOrder { any, by_index, sorted };

// Puts the best min(want, n) of c[0, n) (want >= 1) at its front in the op's
// order; the rest is left unspecified. by_index: c[0, n) is in increasing
// index order. From kBucketMin to kBucketMax candidates one bucket pass
// (bucket_best); outside that, or when its buckets are too uneven, from
// kRadixSelect candidates on an LSD radix sort of the whole buffer, below it
// std::nth_element and a sort of the best want. kRadixSelect: from 128
// candidates the radix sort beats nth_element first (K = 256 and 1024); from
// 64 it loses at K = 50 (docs/softmax_topk.md, CPU algorithm, step 5).
inline constexpr int64_t kBucketMin = 32, kBucketMax = 4096, kRadixSelect = 128;
void best_first(Cand* c, int64_t n, int64_t want, bool by_index);

// The bucket pass alone, for the tests: false, c untouched, when the sum over
// buckets of count^2 exceeds kBucketUneven n (the insertion pass would be
// slow), else best_first's result.
inline constexpr int64_t kBucketUneven = 8;
bool bucket_best(Cand* c, int64_t n, int64_t want);

// The r-th largest of v[0, n) (1 <= r <= n, no NaN) into rth and the largest
// into max; reorders v. For the sampled threshold (topk_scan.hpp).
void rth_largest(float* v, int64_t n, int64_t r, float& rth, float& max);

// Per-ISA scan of elements [lo, hi) of one row (T = float, f16 or bf16 given
// by dtype): updates st and appends candidates > b.thr, flushing as needed.
using ScanFn = void (*)(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st);
void scan_scalar(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st);
void scan_avx2(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st);
void scan_avx512(const void* row, DType dtype, int64_t lo, int64_t hi, float scale, CandBuf& b, PartState& st);

// Rows of at most kSmallV logits with k <= kInsertK (MoE routing: a few to a
// few hundred experts, top 1..8), whole rows only: the row's state into st and
// its best min(k, finite logits) candidates into c[0, n), ordered; returns n
// (topk_scan.hpp, small_row). No candidate buffer, no per-element branches.
inline constexpr int64_t kSmallV = 512;
using SmallFn = int64_t (*)(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st);
int64_t small_scalar(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st);
int64_t small_avx2(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st);
int64_t small_avx512(const void* row, DType dtype, int64_t v, int64_t k, float scale, Cand* c, PartState& st);

// nr <= W whole rows (W = 8 with AVX2, 16 with AVX-512: at most
// kMaxBatchRows) of v <= kBatchV logits (row i at base + i * ld elements),
// k <= kInsertK, one row a vector lane (topk_scan.hpp, small_rows): row i's
// state into st[i] and its best k, ordered, into c[i * k, i * k + k) (-inf
// logits too, in index order, where fewer than k are finite). Vector ISAs
// only, for every v <= kBatchV (= kSmallV): faster than small_row there, or
// level at V = 512, K = 2 (docs/softmax_topk.md, "Small rows"). The tile xt
// is kBatchV x 16 floats, 32 KiB, on the stack.
inline constexpr int64_t kBatchV = 512, kMaxBatchRows = 16;
inline bool batch_rows(int64_t v) { return v <= kBatchV; }
using SmallRowsFn = void (*)(const void* base, DType dtype, int64_t ld, int64_t nr, int64_t v, int64_t k, float scale,
                             Cand* c, PartState* st);
void small_rows_avx2(const void* base, DType dtype, int64_t ld, int64_t nr, int64_t v, int64_t k, float scale, Cand* c,
                     PartState* st);
void small_rows_avx512(const void* base, DType dtype, int64_t ld, int64_t nr, int64_t v, int64_t k, float scale,
                       Cand* c, PartState* st);

// Logit j of a row as f32.
inline float load_f32(const void* row, DType t, int64_t j) {
  switch (t) {
    case DType::f16: return to_f32(static_cast<const f16*>(row)[j]);
    case DType::bf16: return to_f32(static_cast<const bf16*>(row)[j]);
    default: return static_cast<const float*>(row)[j];
  }
}

// Writes row b's outputs when softmax is undefined (NaN, +inf or all -inf):
// NaN probs, indices 0..k-1, row_max/lse per the header. Rescans the row.
void write_special_row(const void* row, DType t, int64_t v, int64_t k, const SoftmaxTopkOut& out, int64_t b);

// The probabilities of a row's k ordered candidates: out[j] =
// float(exp((double(c[j].x) - m) scale) / s), exp in double. probs_scalar
// calls std::exp (topk.cpp); the vector ISAs evaluate exp on 4 or 8 doubles
// at once (topk_scan.hpp, probs_pd: relative error below 1e-13, so the f32
// result is std::exp's but where that lies within 1e-13 of a rounding
// boundary).
using ProbsFn = void (*)(const Cand* c, int64_t k, double m, double scale, double s, float* out);
void probs_scalar(const Cand* c, int64_t k, double m, double scale, double s, float* out);
void probs_avx2(const Cand* c, int64_t k, double m, double scale, double s, float* out);
void probs_avx512(const Cand* c, int64_t k, double m, double scale, double s, float* out);

// out[j] = float(exp(d[j]) / s[j]) for j < n, exp evaluated as in probs_pd
// (the same bound): the probabilities of a batch of small rows at once, d
// and s per candidate (finish_rows). Vector ISAs only.
using ExpDivFn = void (*)(const double* d, const double* s, int64_t n, float* out);
void exp_div_avx2(const double* d, const double* s, int64_t n, float* out);
void exp_div_avx512(const double* d, const double* s, int64_t n, float* out);

// Finishes a regular row from its merged state and its best candidates
// (c[0..n), n <= cap, every logit > -inf when n < k): sorts the best k, fills
// missing slots with the lowest -inf indices, writes probs/indices/max/lse.
// order: what finish_row may assume of c[0..n) (CandOrder::sorted: no sort).
void finish_row(const void* row, DType t, int64_t v, int64_t k, double scale, const PartState& st, Cand* c, int64_t n,
                const SoftmaxTopkOut& out, int64_t b, ProbsFn probs, CandOrder order = CandOrder::any);

}  // namespace llmk::topk
