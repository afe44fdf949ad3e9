// The per-row arithmetic of the sampler, written once as __host__ __device__
// inline functions: sample.cpp (CPU) and sample.cu (GPU) call these very
// functions, and the CPU tests exercise them, so for the same inputs both
// sides compute the same bits:
//  - penalize(): the repetition / presence penalty of one logit;
//  - plan_row(): which path a row takes (greedy, sorted top-K, full row) and K;
//  - select_sorted(): min-p / top-p cut, renormalization and inverse-CDF pick
//    from softmax_topk's K sorted candidates;
//  - full_chunk_sum() / full_pick(): the inverse CDF over a whole row in index
//    order, accumulated per chunk so a GPU block can sum chunks in parallel.
// Why the bits agree: every loop here is sequential in a fixed order (the GPU
// runs each on one thread), all accumulation is in double with +, * and / only
// (IEEE round-to-nearest on both sides, no expression of the form a * b + c
// that nvcc could contract into an FMA; penalize() and full_weight() use
// explicit _rn intrinsics on the device for the same reason), and comparisons
// are exact.
// What can differ between CPU and GPU is only the inputs: softmax_topk's
// probabilities (its sums run in a different order) and expf in the full-row
// path (CUDA's expf is within 2 ulp, glibc's within 1).
#pragma once
#include <math.h>

#include <cstdint>

#include <string>

#include "llmk/sample.hpp"

namespace llmk::sample_math {

// " (row 3)", the `at` of validate() in sample() and sample_cuda().
std::string row_at(int64_t row);

enum RowMode : int32_t { kGreedy = 0, kSorted = 1, kFull = 2 };

// The row z[0, v)'s max when its softmax is defined (no NaN, no +inf, not
// all -inf), else NaN: what sample() requires of a row after its penalties,
// in the pass that finds the max (softmax_defined() is its public face).
inline float defined_max(const float* z, int64_t v) {
  float m = -INFINITY;
  bool bad = false;
  for (int64_t j = 0; j < v; ++j) {
    bad |= isnan(z[j]) || z[j] == INFINITY;
    m = z[j] > m ? z[j] : m;
  }
  return bad || m == -INFINITY ? NAN : m;
}

// z = z > 0 ? z / r : z * r, then z -= presence, each rounded to f32.
LLMK_HD inline float penalize(float x, float rep, float presence) {
#if defined(__CUDA_ARCH__)
  x = x > 0 ? __fdiv_rn(x, rep) : __fmul_rn(x, rep);
  return __fsub_rn(x, presence);
#else
  x = x > 0 ? x / rep : x * rep;
  return x - presence;
#endif
}

struct RowPlan {
  int32_t mode;   // RowMode
  int32_t k;      // candidates to select from (kGreedy: 1, kFull: 0)
  bool top_k_on;  // renormalize over the k (top-k) rather than the whole row
};

// top-k is on when 0 < top_k < V; with it off, top-p / min-p use K = min(cap, V).
inline RowPlan plan_row(const SamplingParams& p, int64_t v) {
  if (p.temperature == 0 || p.top_k == 1) return {kGreedy, 1, false};
  const bool top_k_on = p.top_k > 0 && p.top_k < v;
  if (!top_k_on && p.top_p >= 1 && p.min_p <= 0) return {kFull, 0, false};
  const int64_t k = top_k_on ? p.top_k : (v < kSampleTopkCap ? v : kSampleTopkCap);
  return {kSorted, int32_t(k), top_k_on};
}

// From k candidates sorted by probability (descending, softmax_topk's order;
// probs normalized over the whole row): mass = the k's sum when top-k is on,
// else 1; top-p keeps the shortest prefix with cumulative probs / mass >=
// top_p; min-p keeps probs >= min_p * probs[0]; the kept n are renormalized
// and the first j with cumulative > u * total is drawn. Rounding that leaves
// the target at the very end picks the last kept token of nonzero probability.
LLMK_HD inline int32_t select_sorted(const float* probs /* [k] */, const int32_t* idx /* [k] */, int32_t k,
                                     bool top_k_on, float top_p, float min_p, double u) {
  double mass = 1.0;
  if (top_k_on) {
    mass = 0;
    for (int32_t j = 0; j < k; ++j) mass += probs[j];
  }
  int32_t n = k;
  if (top_p < 1) {
    double c = 0;
    for (int32_t j = 0; j < k; ++j) {
      c += probs[j] / mass;
      if (c >= top_p) {
        n = j + 1;
        break;
      }
    }
  }
  if (min_p > 0) {
    const double cut = min_p * double(probs[0]);
    int32_t keep = k;
    while (keep > 1 && probs[keep - 1] < cut) --keep;
    n = keep < n ? keep : n;
  }
  double total = 0;
  for (int32_t j = 0; j < n; ++j) total += probs[j];
  const double target = u * total;
  double c = 0;
  int32_t last = 0;
  for (int32_t j = 0; j < n; ++j) {
    if (probs[j] > 0) last = j;
    c += probs[j];
    if (c > target) return idx[j];
  }
  return idx[last];
}

// Chunk c of a row of v elements is [full_chunk_begin(v, c), full_chunk_begin(v, c + 1)).
LLMK_HD inline int64_t full_chunk_begin(int64_t v, int c) { return v * c / kSampleFullChunks; }

// The unnormalized probability of logit x in a row with max m: expf((x - m) * scale).
// On the device the argument is rounded by _rn intrinsics, which nvcc never
// contracts into an FMA inside the inlined expf: both sides feed expf the same f32.
LLMK_HD inline float full_weight(float x, float m, float scale) {
#if defined(__CUDA_ARCH__)
  return expf(__fmul_rn(__fsub_rn(x, m), scale));
#else
  return expf((x - m) * scale);
#endif
}

// Sum of the weights of z[lo, hi), in index order, in double.
LLMK_HD inline double full_chunk_sum(const float* z /* [V] */, int64_t lo, int64_t hi, float m, float scale) {
  double s = 0;
  for (int64_t j = lo; j < hi; ++j) s += double(full_weight(z[j], m, scale));
  return s;
}

// Inverse CDF over the whole row in index order, given its kSampleFullChunks
// chunk sums: total s = the chunk sums in order, target = u * s, the chunk
// where the running sum first exceeds the target, then the element within it
// (running on from the chunks before). Rounding that leaves the target past
// the end picks the last element of nonzero weight. m is the row's max (finite).
LLMK_HD inline int32_t full_pick(const float* z /* [V] */, int64_t v, const double* sums /* [kSampleFullChunks] */,
                                 float m, float scale, double u) {
  double s = 0;
  for (int c = 0; c < kSampleFullChunks; ++c) s += sums[c];
  double target = u * s, acc = 0;
  int c = 0, last = 0;
  for (; c < kSampleFullChunks; ++c) {
    if (sums[c] > 0) last = c;
    const double next = acc + sums[c];
    if (next > target) break;
    acc = next;
  }
  if (c == kSampleFullChunks) {  // past the end: the last element of weight > 0
    c = last;
    target = __builtin_huge_val();
  }
  int64_t pick = full_chunk_begin(v, c);
  for (int64_t j = pick, hi = full_chunk_begin(v, c + 1); j < hi; ++j) {
    const float w = full_weight(z[j], m, scale);
    if (w > 0) pick = j;
    acc += w;
    if (acc > target) return int32_t(j);
  }
  return int32_t(pick);
}

}  // namespace llmk::sample_math
