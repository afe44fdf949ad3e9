// softmax_topk on the CPU: argument validation (shared with the reference,
// the naive baseline and the CUDA API layer), the split of rows and parts over
// threads, the exact merge of parts, and the per-row finishing steps.
//
// Threads: units (row parts) go to threads dynamically, in grains (run_cpu).
// With B >= threads every row is one part. With B < threads each row
// is cut into P contiguous parts (at least kMinPart elements each) so every
// thread has work; each part yields (max, sum, its best <= K candidates) and
// the row merges them: max/sum with merge_state (exact rescaling), candidates
// by selecting the best K of the union under the total order `better`. Since
// the best K of a union are among the union of each part's best K, the result
// is the same index set for every P. Parts never span two rows.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/dispatch.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "topk/topk_internal.hpp"

namespace llmk::topk {

void validate(const char* fn, const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out,
              bool cpu_only) {
  LLMK_CHECK_ARG(logits.ndim == 2, fn, "logits", logits.describe(), "must be a 2-d view [B, V]");
  LLMK_CHECK_ARG(logits.dtype == DType::f32 || logits.dtype == DType::f16 || logits.dtype == DType::bf16, fn, "logits",
                 logits.describe(), "dtype must be f32, f16 or bf16");
  check_rows_view(fn, "logits", logits);  // every path reads a row's V logits as consecutive elements
  LLMK_CHECK_ARG(!cpu_only || logits.device == Device::cpu, fn, "logits", logits.describe(), "must be on the CPU");
  LLMK_CHECK_ARG(k >= 1, fn, "k", k, "must be >= 1");
  LLMK_CHECK_ARG(k <= logits.cols(), fn, "k", k, "must be <= V = " + std::to_string(logits.cols()));
  // The kernels scale by log2(e) / T in f32 (2^x exps): that must be finite too, or
  // (x - max) * inf turns the max's own term into NaN (T in [2.9e-39, 4.2e-39)).
  LLMK_CHECK_ARG(std::isfinite(temperature) && temperature > 0 && std::isfinite((1.0f / temperature) * kLog2e), fn,
                 "temperature", temperature, "must be > 0 and finite with log2(e)/T finite in f32 (greedy is k = 1)");
  LLMK_CHECK_ARG(logits.rows() == 0 || out.probs != nullptr, fn, "out.probs", out.probs, "must not be null");
  LLMK_CHECK_ARG(logits.rows() == 0 || out.indices != nullptr, fn, "out.indices", out.indices, "must not be null");
  // No output may share memory with the logits (still being read) or with another output.
  const int64_t b = logits.rows();
  const Device d = logits.device;
  const std::pair<const char*, TensorView> outs[] = {
      {"out.probs", TensorView::vector(out.probs, DType::f32, b * k, d)},
      {"out.indices", TensorView::vector(out.indices, DType::f32, b * k, d)},  // int32: 4 bytes, as f32
      {"out.row_max", TensorView::vector(out.row_max, DType::f32, out.row_max ? b : 0, d)},
      {"out.lse", TensorView::vector(out.lse, DType::f32, out.lse ? b : 0, d)}};
  for (size_t i = 0; i < 4; ++i) {
    LLMK_CHECK_ARG(!views_overlap(outs[i].second, logits), fn, outs[i].first, outs[i].second.describe(),
                   "must not overlap the logits " + logits.describe());
    for (size_t j = i + 1; j < 4; ++j)
      LLMK_CHECK_ARG(!views_overlap(outs[i].second, outs[j].second), fn, outs[i].first, outs[i].second.describe(),
                     std::string("must not overlap ") + outs[j].first);
  }
}

void rth_largest(float* v, int64_t n, int64_t r, float& rth, float& max) {
  std::nth_element(v, v + (r - 1), v + n, std::greater<float>());
  rth = v[r - 1];
  max = *std::max_element(v, v + r);
}

void write_special_row(const void* row, DType t, int64_t v, int64_t k, const SoftmaxTopkOut& out, int64_t b) {
  bool nan = false, pinf = false;
  for (int64_t j = 0; j < v; ++j) {
    const float x = load_f32(row, t, j);
    nan |= std::isnan(x);
    pinf |= x == -kNegInf;
  }
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float m = nan ? qnan : pinf ? -kNegInf : kNegInf;
  for (int64_t j = 0; j < k; ++j) {
    out.probs[b * k + j] = qnan;
    out.indices[b * k + j] = int32_t(j);
  }
  if (out.row_max) out.row_max[b] = m;
  if (out.lse) out.lse[b] = m;
}

namespace {
// The float's bits mapped to an unsigned order (larger float, larger ord; no
// NaN reaches here), -0 folded into +0 (it comes back as +0: the same
// probability), and back. Branch-free: the loops over them vectorize.
inline uint32_t ord_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = u == 0x80000000u ? 0 : u;
  return u ^ (uint32_t(int32_t(u) >> 31) | 0x80000000u);
}
inline float float_of(uint32_t ord) {
  const uint32_t u = ord ^ (uint32_t(int32_t(~ord) >> 31) | 0x80000000u);
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Sorts c[0, n) by `better` (larger logit first, ties to the lower index).
// From 128 candidates on (sampling with large K): an LSD radix sort, 8 bits a
// pass, of the 64-bit keys (~ord(x) << 32) | i in ascending order, skipping
// the passes whose digit is the same in every key (the high index bytes, most
// exponent bits): no data-dependent branch per element, where std::sort's
// comparisons mispredict about half the time. `bench softmax-topk`, K = 256.
// by_index: c is in increasing index order, so only the logit's digits are
// sorted (LSD passes are stable: equal logits keep their index order), about
// half the passes (the index bytes of a 128K row differ in 3 bytes).
void sort_better(Cand* c, int64_t n, bool by_index = false) {
  if (n < 128) return std::sort(c, c + n, better);
  thread_local std::vector<uint64_t> a, b;
  a.resize(size_t(n));
  b.resize(size_t(n));
  uint64_t all_and = ~uint64_t(0), all_or = 0;
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t key = (uint64_t(~ord_of(c[j].x)) << 32) | uint32_t(c[j].i);
    a[size_t(j)] = key;
    all_and &= key;
    all_or |= key;
  }
  uint64_t* src = a.data();
  uint64_t* dst = b.data();
  // The digits that differ between keys (the same digit in every key needs
  // no pass: the high index bytes, most exponent bits), and all their
  // histograms from one read of the keys.
  int shifts[8], np = 0;
  for (int shift = by_index ? 32 : 0; shift < 64; shift += 8)
    if (((all_and ^ all_or) >> shift & 0xff) != 0) shifts[np++] = shift;
  thread_local std::vector<uint32_t> hist;
  hist.assign(size_t(np) * 256, 0u);
  for (int64_t j = 0; j < n; ++j)
    for (int p = 0; p < np; ++p) ++hist[size_t(p) * 256 + (src[j] >> shifts[p] & 0xff)];
  for (int p = 0; p < np; ++p) {
    uint32_t* count = hist.data() + size_t(p) * 256;
    uint32_t sum = 0;
    for (int d = 0; d < 256; ++d) {
      const uint32_t c0 = count[d];
      count[d] = sum;
      sum += c0;
    }
    const int shift = shifts[p];
    for (int64_t j = 0; j < n; ++j) dst[count[src[j] >> shift & 0xff]++] = src[j];
    std::swap(src, dst);
  }
  for (int64_t j = 0; j < n; ++j) {
    c[j].x = float_of(~uint32_t(src[j] >> 32));
    c[j].i = int32_t(uint32_t(src[j]));
  }
}
}  // namespace

// One bucket pass: key = hi - ord(x) (smaller is better), bucketed by its top
// bits into up to 2^lg > n buckets, so a bucket holds about one candidate; a
// count, a prefix sum and a scatter place them; then an insertion pass over
// the 64-bit keys (key << 32) | index orders each bucket's few, ties to the
// lower index, up to the bucket where the best `want` end. Its moves are at
// most the sum over buckets of count^2 / 2, so uneven buckets (a cluster of
// logits and a far outlier, many equal logits) fall back. The dropped buckets'
// keys are not scattered to a spare slot: GCC makes that select a branch,
// mispredicted for about half the candidates.
bool bucket_best(Cand* c, int64_t n, int64_t want) {
  thread_local std::vector<uint32_t> ord, hist;
  thread_local std::vector<uint64_t> keys;
  ord.resize(size_t(n));
  keys.resize(size_t(n));
  uint32_t hi = 0, lo = ~0u;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t o = ord_of(c[j].x);
    ord[size_t(j)] = o;
    hi = std::max(hi, o);
    lo = std::min(lo, o);
  }
  const int lg = std::clamp(64 - __builtin_clzll(uint64_t(n)), 6, 13);  // n <= kBucketMax = 2^12
  const uint32_t range = hi - lo;
  const int shift = std::max(0, (range == 0 ? 0 : 32 - __builtin_clz(range)) - lg);
  const size_t nb = size_t(range >> shift) + 1;
  hist.assign(nb + 1, 0u);
  for (int64_t j = 0; j < n; ++j) ++hist[((hi - ord[size_t(j)]) >> shift) + 1];
  uint64_t squares = 0;
  uint32_t start = 0;  // carried in a register: hist[d] += hist[d - 1] waited on each store
  for (size_t d = 1; d <= nb; ++d) {
    const uint32_t count = hist[d];
    squares += uint64_t(count) * count;
    start += count;
    hist[d] = start;  // hist[d]: where bucket d starts
  }
  if (squares > uint64_t(kBucketUneven * n)) return false;
  // Buckets [0, cut) hold the best m >= min(want, n): only they need ordering.
  const size_t cut = size_t(std::upper_bound(hist.begin(), hist.begin() + ptrdiff_t(nb), uint32_t(want - 1)) -
                            hist.begin());
  const uint32_t m = hist[cut];
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t key = hi - ord[size_t(j)];
    keys[hist[key >> shift]++] = (uint64_t(key) << 32) | uint32_t(c[j].i);
  }
  for (uint32_t j = 1; j < m; ++j) {
    const uint64_t x = keys[j];
    uint32_t i = j;
    for (; i > 0 && keys[i - 1] > x; --i) keys[i] = keys[i - 1];
    keys[i] = x;
  }
  for (int64_t j = 0, e = std::min(want, n); j < e; ++j) {
    c[j].x = float_of(hi - uint32_t(keys[size_t(j)] >> 32));
    c[j].i = int32_t(uint32_t(keys[size_t(j)]));
  }
  return true;
}

void best_first(Cand* c, int64_t n, int64_t want, bool by_index) {
  if (n >= kBucketMin && n <= kBucketMax && bucket_best(c, n, want)) return;
  if (n >= kRadixSelect || n <= want) return sort_better(c, n, by_index);  // the whole buffer; its head is the best
  std::nth_element(c, c + (want - 1), c + n, better);
  sort_better(c, want);
}

// Only the best k are wanted here, in any order: std::nth_element. Not the
// radix sort: a part without a sample guess flushes every chunk, and the k that
// the previous flush left sorted by value repeat a digit from key to key, so
// each count update waits for the last (docs/softmax_topk.md, "Alternatives
// measured").
void flush(CandBuf& b) {
  if (b.n <= b.k) return;
  b.in_index_order = false;
  std::nth_element(b.c, b.c + (b.k - 1), b.c + b.n, better);
  b.thr = b.c[b.k - 1].x;
  b.n = b.k;
}

// The logits at the max (the first, and its ties) have exp(0) = 1: no call,
// which a short row with a small K (MoE routing) would otherwise spend much on.
void probs_scalar(const Cand* c, int64_t k, double m, double scale, double s, float* out) {
  for (int64_t j = 0; j < k; ++j) {
    const double d = (double(c[j].x) - m) * scale;
    out[j] = float((d == 0 ? 1.0 : std::exp(d)) / s);
  }
}

namespace {
// Row b's max and log-sum-exp from its merged state, or the whole special row
// (write_special_row) when softmax is undefined; false then, so the caller
// writes nothing else. (finish_row, finish_rows.)
bool finish_state(const void* row, DType t, int64_t v, int64_t k, double scale, const PartState& st,
                  const SoftmaxTopkOut& out, int64_t b) {
  if (std::isnan(st.s) || st.m == kNegInf) {
    write_special_row(row, t, v, k, out, b);
    return false;
  }
  if (out.row_max) out.row_max[b] = float(st.m * scale);
  if (out.lse) out.lse[b] = float(st.m * scale + std::log(st.s));
  return true;
}
}  // namespace

void finish_row(const void* row, DType t, int64_t v, int64_t k, double scale, const PartState& st, Cand* c, int64_t n,
                const SoftmaxTopkOut& out, int64_t b, ProbsFn probs, CandOrder order) {
  if (!finish_state(row, t, v, k, scale, st, out, b)) return;
  // sorted: small_row's output, already in order; sorting it again would cost
  // a MoE row a large share of its time.
  if (order == CandOrder::sorted) {
  } else if (k <= kInsertK && n > k) {
    // Small k (MoE routing, greedy): one insertion pass keeps the best k sorted in
    // c[0, k), cheaper than nth_element + sort on a few dozen candidates.
    std::sort(c, c + k, better);
    for (int64_t j = k; j < n; ++j) {
      if (!better(c[j], c[k - 1])) continue;
      const Cand x = c[j];
      int64_t i = k - 1;
      for (; i > 0 && better(x, c[i - 1]); --i) c[i] = c[i - 1];
      c[i] = x;
    }
    n = k;
  } else {
    best_first(c, n, k, order == CandOrder::by_index);
    n = std::min(n, k);
  }
  // Fewer than k logits > -inf: every one of them is here; the rest of the
  // output are the lowest-index -inf logits, probability 0.
  for (int64_t j = 0; n < k && j < v; ++j)
    if (load_f32(row, t, j) == kNegInf) c[n++] = Cand{kNegInf, int32_t(j)};
  probs(c, k, st.m, scale, st.s, out.probs + b * k);
  for (int64_t j = 0; j < k; ++j) out.indices[b * k + j] = c[j].i;
}

namespace {

constexpr int64_t kMinPart = 16384;

constexpr simd::Paths<SmallFn> kSmall{.scalar = small_scalar, .avx2 = small_avx2, .avx512 = small_avx512};

// The batched small-row path, its batch (the vector width) and its
// probabilities, or none (scalar).
struct SmallRowsPath {
  SmallRowsFn rows = nullptr;
  int64_t width = 1;
  ExpDivFn exp_div = nullptr;
};
constexpr simd::Paths<SmallRowsPath> kSmallRows{.scalar = {},
                                                .avx2 = SmallRowsPath{small_rows_avx2, 8, exp_div_avx2},
                                                .avx512 = SmallRowsPath{small_rows_avx512, kMaxBatchRows,
                                                                        exp_div_avx512}};

// finish_row for the nr rows of a small_rows batch (rows r0.., their ordered
// best k in c[i k, i k + k)): every probability of the batch by one exp_div
// call, not one probs call a row (for k < 4 a std::exp per candidate, which
// would dominate rows of 8 logits at K = 2), then each row's
// max and log-sum-exp; a special row is written over (finish_state).
void finish_rows(const uint8_t* base, size_t row_bytes, DType t, int64_t v, int64_t k, double scale,
                 const PartState* st, const Cand* c, int64_t nr, const SoftmaxTopkOut& out, int64_t r0,
                 ExpDivFn exp_div) {
  alignas(64) double d[kMaxBatchRows * kInsertK], s[kMaxBatchRows * kInsertK];
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t j = 0; j < k; ++j) {
      d[i * k + j] = (double(c[i * k + j].x) - st[i].m) * scale;
      s[i * k + j] = st[i].s;
    }
  exp_div(d, s, nr * k, out.probs + r0 * k);
  for (int64_t q = 0; q < nr * k; ++q) out.indices[r0 * k + q] = c[q].i;
  for (int64_t i = 0; i < nr; ++i) finish_state(base + size_t(r0 + i) * row_bytes, t, v, k, scale, st[i], out, r0 + i);
}

constexpr simd::Paths<ProbsFn> kProbs{.scalar = probs_scalar, .avx2 = probs_avx2, .avx512 = probs_avx512};
constexpr simd::Paths<ScanFn> kScan{.scalar = scan_scalar, .avx2 = scan_avx2, .avx512 = scan_avx512};

void run_cpu(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out) {
  const int64_t rows = logits.rows(), v = logits.cols(), ld = logits.row_stride();
  const DType t = logits.dtype;
  const size_t esz = dtype_size(t);
  const auto* base = static_cast<const uint8_t*>(logits.data);
  const float scale = 1.0f / temperature;
  const int64_t threads = num_threads();
  const int64_t parts = rows >= threads
                            ? 1
                            : std::max<int64_t>(1, std::min<int64_t>((threads + rows - 1) / rows, v / kMinPart));
  const int nt = int(std::min(threads, rows * parts));  // no idle threads (a lone small row runs inline)
  // Units (row parts) are handed out dynamically in grains of ~64K elements, at
  // least 8 grains per thread: on a shared machine a thread that loses its core
  // for a time slice no longer holds up the others at the end (a static split
  // waits for it), and a MoE grain (thousands of rows of 8 .. 256) pays the
  // scheduler once per grain, not once per row.
  const int64_t units = rows * parts;
  const int grain = int(std::clamp<int64_t>((int64_t(1) << 16) / std::max<int64_t>(1, v / parts), 1,
                                            std::max<int64_t>(1, units / (8 * int64_t(nt)))));
  const int64_t cap = cand_capacity(k);
  const ScanFn scan = kScan.pick();
  // Below 4 candidates the scalar calls win: one row's probabilities are a
  // latency chain, and the vector exp's (a division included) is the longer
  // (4096 rows of 64, K = 1: 51 against 62 ns a row on one thread).
  const ProbsFn probs = k >= 4 ? kProbs.pick() : probs_scalar;
  const SmallFn small = parts == 1 && v <= kSmallV && k <= kInsertK ? kSmall.pick() : nullptr;
  // Rows in the lanes of a vector (small_rows), bw at a time, where batch_rows says.
  // Plain variables, not a structured binding: the OpenMP region below uses
  // them, and clang before 16 rejects a structured binding captured there.
  const SmallRowsPath picked = small && batch_rows(v) ? kSmallRows.pick() : SmallRowsPath{};
  const SmallRowsFn small_rows = picked.rows;
  const int64_t bw = picked.width;
  const ExpDivFn exp_div = picked.exp_div;
  const int64_t batches = small_rows ? (rows + bw - 1) / bw : 0;
  // A batch costs about as much with one row as with W (lanes are rows), and
  // the one-row path gains on it as V grows (it runs along V): a batch of
  // fewer than min_batch rows (few rows in all, or the last batch) takes the
  // one-row path, min_batch = W sqrt(V / kBatchV) (one thread, the
  // break-even near 5 / 12 / 16 rows at V = 64 / 256 / 512 with AVX-512,
  // 4 / 6-8 / 8 with AVX2; docs/softmax_topk.md, "Rows of up to 256 logits").
  const int64_t min_batch = int64_t(std::ceil(double(bw) * std::sqrt(double(v) / double(kBatchV))));
  // parts > 1: each part leaves its state and best <= k candidates here.
  std::vector<PartState> pst(parts > 1 ? rows * parts : 0);
  std::vector<Cand> pc(parts > 1 ? rows * parts * k : 0);
  std::vector<int64_t> pn(parts > 1 ? rows * parts : 0);
#pragma omp parallel num_threads(nt)
  {
    // Not value-initialized: every slot is written before it is read, and
    // zeroing its ~2K slots would outweigh a call on one short row.
    const auto buf = std::make_unique_for_overwrite<Cand[]>(size_t(std::max(cap, parts * k)));
    // Row r by the one-row small path (small_row), start to finish.
    const auto one_small_row = [&](int64_t r) {
      const void* row = base + size_t(r) * size_t(ld) * esz;
      PartState st;
      const int64_t n = small(row, t, v, k, scale, buf.get(), st);
      finish_row(row, t, v, k, scale, st, buf.get(), n, out, r, probs, CandOrder::sorted);
    };
    if (small_rows) {
      PartState st[kMaxBatchRows];
#pragma omp for schedule(dynamic, std::max(1, grain / int(bw)))
      for (int64_t u = 0; u < batches; ++u) {
        const int64_t r0 = u * bw, nr = std::min(bw, rows - r0);
        if (nr < min_batch) {
          for (int64_t r = r0; r < r0 + nr; ++r) one_small_row(r);
          continue;
        }
        // The next batch's rows into L2 meanwhile: the batch reads its rows W
        // columns at a time (a register transpose), W streams at once, which
        // the hardware prefetcher follows poorly from DRAM.
        for (int64_t i = r0 + bw; i < std::min(rows, r0 + 2 * bw); ++i) {
          const uint8_t* next = base + size_t(i) * size_t(ld) * esz;
          for (size_t o = 0; o < size_t(v) * esz; o += 64) __builtin_prefetch(next + o, 0, 2);
        }
        small_rows(base + size_t(r0) * size_t(ld) * esz, t, ld, nr, v, k, scale, buf.get(), st);
        finish_rows(base, size_t(ld) * esz, t, v, k, scale, st, buf.get(), nr, out, r0, exp_div);
      }
    } else {
#pragma omp for schedule(dynamic, grain)
      for (int64_t u = 0; u < rows * parts; ++u) {
        const int64_t r = u / parts, p = u % parts;
        if (small) {
          one_small_row(r);
          continue;
        }
        const void* row = base + size_t(r) * size_t(ld) * esz;
        CandBuf cb{buf.get(), 0, cap, k, kNegInf, k > kInsertK};
        // Rows go to threads in turn, so this thread's next row is most likely
        // r + nt; only rows that take a sample (k > kInsertK, v >= kSampleMinPart).
        if (parts == 1 && k > kInsertK && v >= kSampleMinPart && r + nt < rows)
          cb.next_row = base + size_t(r + nt) * size_t(ld) * esz;
        PartState st;
        scan(row, t, v * p / parts, v * (p + 1) / parts, scale, cb, st);
        if (parts == 1) {
          finish_row(row, t, v, k, scale, st, cb.c, cb.n, out, r, probs,
                     cb.in_index_order ? CandOrder::by_index : CandOrder::any);
          continue;
        }
        flush(cb);
        pst[u] = st;
        pn[u] = cb.n;
        std::copy(cb.c, cb.c + cb.n, pc.begin() + u * k);
      }
    }
    if (parts > 1) {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        PartState st;
        int64_t n = 0;
        for (int64_t p = 0; p < parts; ++p) {
          const int64_t u = r * parts + p;
          merge_state(st, pst[u], scale);
          std::copy(pc.begin() + u * k, pc.begin() + u * k + pn[u], buf.get() + n);
          n += pn[u];
        }
        finish_row(base + size_t(r) * size_t(ld) * esz, t, v, k, scale, st, buf.get(), n, out, r, probs);
      }
    }
  }
}

}  // namespace
}  // namespace llmk::topk

namespace llmk {

void softmax_topk(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out, Stream stream) {
  topk::validate("softmax_topk", logits, k, temperature, out, false);
  if (logits.device == Device::cuda)
    return softmax_topk_cuda(logits, k, temperature, out, stream, TopkCudaConfig::auto_pick);
  if (logits.rows() == 0) return;
  topk::run_cpu(logits, k, temperature, out);
}

const char* topk_cuda_config_name(TopkCudaConfig c) {
  switch (c) {
    case TopkCudaConfig::warp_per_row: return "warp_per_row";
    case TopkCudaConfig::block_per_row: return "block_per_row";
    case TopkCudaConfig::split_row: return "split_row";
    default: return "auto";
  }
}

#ifndef LLMK_HAVE_CUDA
TopkCudaConfig softmax_topk_cuda_config(int64_t, int64_t, int64_t) { return TopkCudaConfig::auto_pick; }
void softmax_topk_cuda(const TensorView& logits, int64_t, float, const SoftmaxTopkOut&, Stream, TopkCudaConfig, int) {
  LLMK_CHECK_ARG(false, "softmax_topk", "logits", logits.describe(), "this llmk was built without CUDA");
}
#endif

}  // namespace llmk
