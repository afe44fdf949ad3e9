// The sampler on the GPU against the CPU sampler (sample_row, the tested
// reference of tests/sample/test_sample.cpp) over many (seed, step, row),
// shapes straddling 1023/1024/1025 and LLM vocabularies, every option
// combination, every softmax_topk configuration sample_cuda can pick, mixed
// temperatures (several softmax_topk runs), penalties (penalize_cuda bit for
// bit against the host formula), undefined rows and malformed histories, with
// sentinels after every device output. Suites *Cuda* run on a GPU and skip
// visibly here; *CudaSanitize* holds the small shapes for compute-sanitizer.
//
// Exactness: for the same candidates and u, select_sorted() is the same code
// on both sides, so SameTokenByConstruction requires equality bit for bit (it
// replays sample_cuda's softmax_topk launches and selects on the host). CPU vs
// GPU end to end may differ only where the inputs differ (see sample_math.hpp):
// a mismatch must sit within the derived tolerance of a decision boundary.
#include <algorithm>
#include <numeric>

#include "core/cuda_check.cuh"
#include "llmk/sample.hpp"
#include "sample/sample_math.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {
namespace {

__global__ void uniforms(uint64_t seed, uint64_t step, int n, double* out /* [n] */) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = uniform01(seed, step + uint64_t(i) * 977, uint64_t(i) * 0x100000001ull);
}

TEST(SampleCudaSanitize, PhiloxMatchesHost) {
  LLMK_REQUIRE_CUDA();
  const int n = 1000;
  DeviceGuarded<double> d(n);
  LLMK_LAUNCH((n + 127) / 128, 128, 0, 0, uniforms)(0x123456789abcdefull, 5, n, d.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = d.download();
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], uniform01(0x123456789abcdefull, 5 + uint64_t(i) * 977, uint64_t(i) * 0x100000001ull)) << i;
  EXPECT_TRUE(d.guard_intact());
}

// Every combination of the options: T {0, 0.7, 1} x top_k {0, 1, 5, 50} x
// top_p {1, 0.9} x min_p {0, 0.05} x penalties {off, on}.
std::vector<SamplingParams> all_combinations() {
  std::vector<SamplingParams> out;
  for (float t : {0.0f, 0.7f, 1.0f})
    for (int32_t k : {0, 1, 5, 50})
      for (float p : {1.0f, 0.9f})
        for (float mp : {0.0f, 0.05f})
          for (bool pen : {false, true}) out.push_back({t, k, p, mp, pen ? 1.3f : 1.0f, pen ? 0.4f : 0.0f});
  return out;
}

// A batch on the host: logits [B, ld] and a CSR history.
struct Batch {
  int64_t rows, v, ld;
  std::vector<float> x;
  std::vector<int64_t> indptr;
  std::vector<int32_t> hist;
};

Batch make_batch(int64_t rows, int64_t v, int64_t ld, uint64_t seed) {
  Batch b{rows, v, ld, std::vector<float>(rows * ld, 0.0f), {0}, {}};
  fill_normal(b.x.data(), b.x.size(), seed, 0.0, 2.5);
  std::mt19937_64 g(seed + 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = b.x.data() + r * ld;
    const int n = int(r % 4) * 3;  // 0, 3, 6, 9 tokens: empty rows too
    for (int i = 0; i < n; ++i) b.hist.push_back(int32_t(g() % uint64_t(v)));
    if (n > 0) {  // the argmax (so penalties change the outcome), twice (counted once)
      const int32_t top = int32_t(std::max_element(row, row + v) - row);
      b.hist.push_back(top);
      b.hist.push_back(top);
    }
    b.indptr.push_back(int64_t(b.hist.size()));
  }
  return b;
}

// The batch on the device; tokens with a sentinel guard.
struct DeviceBatch {
  DeviceGuarded<float> x;
  DeviceGuarded<int64_t> indptr;
  DeviceGuarded<int32_t> hist;
  explicit DeviceBatch(const Batch& b)
      : x(b.x.size()), indptr(b.indptr.size()), hist(std::max<size_t>(1, b.hist.size())) {
    x.upload(b.x.data());
    indptr.upload(b.indptr.data());
    if (!b.hist.empty()) hist.upload(b.hist.data());
  }
  TensorView view(const Batch& b) { return TensorView::matrix(x.data(), DType::f32, b.rows, b.v, b.ld, Device::cuda); }
  DeviceTokenHistory history(const Batch& b) { return {indptr.data(), hist.data(), int64_t(b.hist.size())}; }
};

std::vector<int32_t> run_device(const Batch& b, DeviceBatch& d, const std::vector<SamplingParams>& p, uint64_t seed,
                                uint64_t step, const SampleCudaOptions& opt = {}, bool with_history = true) {
  DeviceGuarded<int32_t> tok(b.rows);
  sample_cuda(d.view(b), p.data(), with_history ? d.history(b) : DeviceTokenHistory{}, seed, step, tok.data(), nullptr,
              opt);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(tok.guard_intact() && d.x.guard_intact()) << "write past a device buffer";
  return tok.download();
}

TokenHistory host_history(const Batch& b, int64_t r) {
  return {b.hist.data() + b.indptr[r], b.indptr[r + 1] - b.indptr[r]};
}

// True when the CPU's draw for this row sits within the tolerance of a
// decision boundary, so a GPU whose inputs differ by rounding may decide the
// other way. Sorted rows: softmax_topk's probabilities are within 1e-6
// relative of the double oracle on CPU and on GPU (its contract, tests/topk),
// so within 2e-6 of each other; so are their partial sums, the mass and the
// target. A decision compares two such quantities (or a ratio of two with a
// fixed threshold), so it flips only within 4e-6 relative of its threshold.
// Full rows: weights differ by at most 2 ulp (CUDA expf) + 1 ulp (glibc) =
// 3 * 2^-23 relative, as do running sums and the target: a flip needs
// |running sum - target| <= 6 * 2^-23 * s (8 * 2^-23 below).
bool near_boundary(const Batch& b, int64_t r, const SamplingParams& p, double u) {
  const int64_t v = b.v;
  std::vector<float> z(b.x.begin() + r * b.ld, b.x.begin() + r * b.ld + v);
  const TokenHistory h = host_history(b, r);
  std::vector<int32_t> seen(h.tokens, h.tokens + h.n);
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) z[t] = sample_math::penalize(z[t], p.repetition_penalty, p.presence_penalty);
  const auto plan = sample_math::plan_row(p, v);
  auto near = [](double a, double thr, double tol) { return std::fabs(a - thr) <= tol * std::fabs(thr); };
  if (plan.mode == sample_math::kGreedy) return false;  // argmax is exact on both sides
  if (plan.mode == sample_math::kFull) {
    const float m = *std::max_element(z.begin(), z.end()), scale = 1.0f / p.temperature;
    double s = 0;
    for (float x : z) s += sample_math::full_weight(x, m, scale);
    const double target = u * s, tol = 8 * 0x1p-23 * s;
    double acc = 0;
    for (float x : z)
      if (std::fabs((acc += sample_math::full_weight(x, m, scale)) - target) <= tol) return true;
    return false;
  }
  // Replays select_sorted on the CPU's candidates, stopping at any decision within tol of its threshold.
  const double tol = 4e-6;  // double rounding of the sums (~1e-16) is far below it
  std::vector<float> q(plan.k);
  std::vector<int32_t> idx(plan.k);
  softmax_topk(TensorView::matrix(z.data(), DType::f32, 1, v), plan.k, p.temperature, {q.data(), idx.data()});
  const double mass = plan.top_k_on ? std::accumulate(q.begin(), q.end(), 0.0) : 1.0;
  int32_t n = plan.k;
  if (p.top_p < 1) {
    double c = 0;
    for (int32_t j = 0; j < plan.k; ++j) {
      c += q[j] / mass;
      if (near(c, p.top_p, tol)) return true;
      if (c >= p.top_p) {
        n = j + 1;
        break;
      }
    }
  }
  if (p.min_p > 0) {
    const double cut = p.min_p * double(q[0]);
    int32_t keep = plan.k;
    for (int32_t j = 0; j < plan.k; ++j)
      if (near(q[j], cut, tol)) return true;
    while (keep > 1 && q[keep - 1] < cut) --keep;
    n = std::min(n, keep);
  }
  const double target = u * std::accumulate(q.begin(), q.begin() + n, 0.0);
  double c = 0;
  for (int32_t j = 0; j < n; ++j)
    if (near(c += q[j], target, tol)) return true;
  return false;
}

// Device tokens against the CPU sampler over seeds x steps; returns the mismatches (all explained).
int compare_with_cpu(const Batch& b, const std::vector<SamplingParams>& p, int seeds, int steps,
                     const SampleCudaOptions& opt = {}) {
  DeviceBatch d(b);
  std::vector<float> scratch;
  int mismatches = 0;
  for (int s = 0; s < seeds; ++s)
    for (int st = 0; st < steps; ++st) {
      const uint64_t seed = 1000 + 17 * s, step = uint64_t(st) * 31 + 3;
      const auto got = run_device(b, d, p, seed, step, opt);
      for (int64_t r = 0; r < b.rows; ++r) {
        const double u = uniform01(seed, step, r);
        const int32_t want = sample_row(b.x.data() + r * b.ld, b.v, p[r], host_history(b, r), u, scratch);
        if (got[r] == want) continue;
        ++mismatches;
        EXPECT_TRUE(near_boundary(b, r, p[r], u))
            << "V " << b.v << " row " << r << " seed " << seed << " step " << step << ": GPU " << got[r] << " CPU "
            << want << " (T " << p[r].temperature << " top_k " << p[r].top_k << " top_p " << p[r].top_p << " min_p "
            << p[r].min_p << ")";
      }
    }
  return mismatches;
}

std::vector<SamplingParams> cycle(const std::vector<SamplingParams>& from, int64_t rows) {
  std::vector<SamplingParams> p(rows);
  for (int64_t r = 0; r < rows; ++r) p[r] = from[r % from.size()];
  return p;
}

TEST(SampleCudaSanitize, SmallShapesEveryCombination) {
  LLMK_REQUIRE_CUDA();
  const auto combos = all_combinations();
  for (int64_t v : {7, 1023, 1024, 1025}) {
    const Batch b = make_batch(int64_t(combos.size()), v, v + 3, uint64_t(v));
    compare_with_cpu(b, combos, 1, 2);
  }
}

TEST(SampleCuda, VocabulariesManyDraws) {
  LLMK_REQUIRE_CUDA();
  const auto combos = all_combinations();
  for (int64_t v : {32000, 128256, 151936}) {
    if (kCudaEmulated && v != 32000) continue;  // emulated: one vocabulary
    const Batch b = make_batch(int64_t(combos.size()), v, v, uint64_t(v));
    const int bad = compare_with_cpu(b, combos, 2, 4);
    std::printf("V %lld: %d of %lld draws differ from the CPU, each within tolerance of a boundary\n", (long long)v,
                bad, (long long)(combos.size() * 8));
  }
}

// Replays sample_cuda's softmax_topk launches (same source, stride, K, runs
// and configuration), selects on the host with select_sorted and requires the
// device's tokens bit for bit.
void check_by_construction(const Batch& b, const std::vector<SamplingParams>& p, uint64_t seed, uint64_t step,
                           const SampleCudaOptions& opt = {}) {
  DeviceBatch d(b);
  const auto got = run_device(b, d, p, seed, step, opt);
  const SampleCudaPlan plan = sample_cuda_plan(p.data(), b.rows, b.v);
  if (plan.k == 0) return;
  const int64_t ldz = (b.v + 3) / 4 * 4, k = plan.k;
  DeviceGuarded<float> z(b.rows * ldz);
  DeviceGuarded<int32_t> bad(b.rows);
  const bool copy = plan.penalties;
  if (copy)
    penalize_cuda(d.view(b), p.data(), d.history(b),
                  TensorView::matrix(z.data(), DType::f32, b.rows, b.v, ldz, Device::cuda), bad.data());
  const float* src = copy ? z.data() : d.x.data();
  const int64_t ld = copy ? ldz : (b.rows > 1 ? b.ld : b.v);
  DeviceGuarded<float> probs(b.rows * k), mx(b.rows);
  DeviceGuarded<int32_t> idx(b.rows * k);
  for (size_t r = 0; r < plan.topk_runs.size(); ++r) {
    const auto [first, end] = plan.topk_runs[r];
    softmax_topk_cuda(TensorView::matrix(src + first * ld, DType::f32, end - first, b.v, ld, Device::cuda), k,
                      plan.run_temperature[r], {probs.data() + first * k, idx.data() + first * k, mx.data() + first},
                      nullptr, opt.topk_config, opt.topk_splits);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto hp = probs.download();
  const auto hi = idx.download();
  for (int64_t r = 0; r < b.rows; ++r) {
    const auto rp = sample_math::plan_row(p[r], b.v);
    if (rp.mode == sample_math::kFull) continue;
    const int32_t want = sample_math::select_sorted(hp.data() + r * k, hi.data() + r * k, rp.k, rp.top_k_on, p[r].top_p,
                                                    p[r].min_p, uniform01(seed, step, r));
    ASSERT_EQ(got[r], want) << "V " << b.v << " row " << r;
  }
}

TEST(SampleCuda, SameTokenByConstruction) {
  LLMK_REQUIRE_CUDA();
  const auto combos = all_combinations();
  for (int64_t v : {1023, 1025, 32000, 151936})
    for (uint64_t step : {0, 1, 2})
      if (!kCudaEmulated || (step == 0 && v != 151936))
        check_by_construction(make_batch(int64_t(combos.size()), v, v, 5), combos, 77, step);
}

// Every softmax_topk configuration sample_cuda can pick (auto and forced),
// at B = 3 (auto: split_row) and B = 300 (auto: block_per_row; emulated: 37), one
// temperature (one run) and mixed temperatures (several runs).
TEST(SampleCuda, EveryTopkConfigurationAndRun) {
  LLMK_REQUIRE_CUDA();
  std::vector<SamplingParams> sorted = {{0.8f, 50, 0.9f, 0.0f, 1.0f, 0.0f},
                                        {0.8f, 0, 0.95f, 0.02f, 1.2f, 0.0f},
                                        {0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
                                        {0.8f, 0, 1.0f, 0.0f, 1.0f, 0.0f}};
  std::vector<SamplingParams> mixed = sorted;
  mixed[1].temperature = 1.1f;  // rows 0 and 1 differ: several runs
  for (int64_t v : {1000, 32000})
    for (int64_t rows : {int64_t(3), kCudaEmulated ? int64_t(37) : int64_t(300)})
      for (const auto* base : {&sorted, &mixed}) {
        const auto p = cycle(*base, rows);
        const auto plan = sample_cuda_plan(p.data(), rows, v);
        EXPECT_EQ(plan.topk_runs.size() > 1, base == &mixed);
        std::vector<SampleCudaOptions> opts = {{TopkCudaConfig::auto_pick, 0},
                                               {TopkCudaConfig::block_per_row, 0},
                                               {TopkCudaConfig::split_row, 2},
                                               {TopkCudaConfig::split_row, 0}};
        if (v <= 1024) opts.push_back({TopkCudaConfig::warp_per_row, 0});
        const Batch b = make_batch(rows, v, v + 1, uint64_t(rows + v));
        for (const auto& o : opts) {
          SCOPED_TRACE(std::string(topk_cuda_config_name(o.topk_config)) + " splits " + std::to_string(o.topk_splits) +
                       " V " + std::to_string(v) + " B " + std::to_string(rows));
          check_by_construction(b, p, 5, 9, o);
          compare_with_cpu(b, p, 1, 2, o);
        }
      }
}

TEST(SampleCudaSanitize, PenaltiesMatchHostFormula) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {1023, 1024, 1025}) {
    const int64_t rows = 8, ld = v + 2;
    Batch b = make_batch(rows, v, ld, 3);
    std::vector<SamplingParams> p(rows);
    for (int64_t r = 0; r < rows; ++r) p[r] = {1.0f, 0, 1.0f, 0.0f, r % 2 ? 1.3f : 1.0f, r % 3 ? 0.4f : 0.0f};
    DeviceBatch d(b);
    DeviceGuarded<float> out(rows * ld);
    DeviceGuarded<int32_t> bad(rows);
    penalize_cuda(d.view(b), p.data(), d.history(b),
                  TensorView::matrix(out.data(), DType::f32, rows, v, ld, Device::cuda), bad.data());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = out.download();
    const auto gbad = bad.download();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> want(b.x.begin() + r * ld, b.x.begin() + r * ld + v);
      const TokenHistory h = host_history(b, r);
      std::vector<int32_t> seen(h.tokens, h.tokens + h.n);
      std::sort(seen.begin(), seen.end());
      seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
      for (int32_t t : seen) {  // the formula written out here, in f32, each distinct token once
        float x = want[t];
        x = x > 0 ? x / p[r].repetition_penalty : x * p[r].repetition_penalty;
        want[t] = x - p[r].presence_penalty;
      }
      EXPECT_EQ(gbad[r], 0) << r;
      for (int64_t j = 0; j < v; ++j) ASSERT_EQ(got[r * ld + j], want[j]) << "row " << r << " token " << j;
    }
    EXPECT_TRUE(out.guard_intact() && bad.guard_intact() && d.x.guard_intact());
  }
}

// Rows whose softmax is undefined give kSampleRowUndefined, malformed
// histories kSampleBadHistory, on every path (greedy, sorted, full).
TEST(SampleCudaSanitize, UndefinedRowsAndBadHistory) {
  LLMK_REQUIRE_CUDA();
  const int64_t v = 1025;
  const std::vector<SamplingParams> paths = {{0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
                                             {1.0f, 20, 1.0f, 0.0f, 1.0f, 0.0f},
                                             {1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f}};
  for (const SamplingParams& path : paths) {
    Batch b = make_batch(6, v, v, 11);
    b.x[0 * v + 5] = NAN;
    b.x[1 * v + 1024] = INFINITY;
    std::fill(b.x.begin() + 2 * v, b.x.begin() + 3 * v, -INFINITY);
    // Row 3: a token out of range; row 4: indptr decreasing; row 5 fine.
    b.indptr = {0, 0, 0, 0, 2, 1, 1};
    b.hist = {3, int32_t(v)};
    DeviceBatch d(b);
    const auto got = run_device(b, d, std::vector<SamplingParams>(6, path), 1, 2);
    EXPECT_EQ(got[0], kSampleRowUndefined);
    EXPECT_EQ(got[1], kSampleRowUndefined);
    EXPECT_EQ(got[2], kSampleRowUndefined);
    EXPECT_EQ(got[3], kSampleBadHistory);
    EXPECT_EQ(got[4], kSampleBadHistory);
    std::vector<float> scratch;
    EXPECT_EQ(got[5], sample_row(b.x.data() + 5 * v, v, path, {}, uniform01(1, 2, 5), scratch));
  }
}

// Tiny temperatures are valid (log2(e) / T finite in f32) and give finite
// probabilities although max / T overflows softmax_topk's row_max to +-inf:
// such rows are sampled like on the CPU, not reported undefined. Row 1 is
// greedy and shares the run of row 0's temperature (sample_cuda_plan).
TEST(SampleCudaSanitize, TinyTemperatureRowsAreDefined) {
  LLMK_REQUIRE_CUDA();
  const int64_t v = 1025;
  Batch b = make_batch(3, v, v, 12);
  for (int64_t j = 0; j < v; ++j) b.x[2 * v + j] = -10.0f - float(j % 7);  // all negative: max / T -> -inf
  b.x[0 * v + 3] = 50.0f, b.x[0 * v + 4] = 50.0f;                          // a tie at the top (N(0, 2.5) elsewhere)
  b.x[1 * v + 700] = 40.0f;
  const std::vector<SamplingParams> p = {{1e-38f, 50, 1.0f, 0.0f, 1.0f, 0.0f},
                                         {0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
                                         {1e-37f, 50, 1.0f, 0.0f, 1.0f, 0.0f}};
  DeviceBatch d(b);
  const auto got = run_device(b, d, p, 3, 4, {}, false);
  std::vector<float> scratch;
  for (int64_t r = 0; r < 3; ++r) {
    const int32_t want = sample_row(b.x.data() + r * v, v, p[size_t(r)], {}, uniform01(3, 4, uint64_t(r)), scratch);
    EXPECT_GE(want, 0) << r;
    EXPECT_EQ(got[size_t(r)], want) << "row " << r;
  }
  EXPECT_TRUE(got[0] == 3 || got[0] == 4) << got[0];
  EXPECT_EQ(got[1], 700);
}

// Rows 2^31 + 256 bytes apart: above the largest pitch cudaMemcpy2DAsync takes
// (cudaDevAttrMaxPitch, 2^31 - 1), so the penalties' copy of the logits goes a
// row at a time, and every offset needs 64 bits. The same tokens and penalized
// logits as from a contiguous copy of the rows. 2 GiB of device memory.
TEST(SampleCuda, RowStrideBeyondTheLargestCopyPitch) {
  LLMK_REQUIRE_CUDA();
  const int64_t v = 1025, ld = (int64_t(1) << 29) + 64;
  int max_pitch = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, 0), cudaSuccess);
  ASSERT_LT(int64_t(max_pitch), ld * 4) << "the stride no longer exceeds the device's largest pitch";
  Batch b = make_batch(2, v, v, 11);
  DeviceBatch d(b);
  DeviceGuarded<float> far(ld + v);
  for (int64_t r = 0; r < 2; ++r)
    ASSERT_EQ(cudaMemcpy(far.data() + r * ld, b.x.data() + r * v, v * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const auto far_view = TensorView::matrix(far.data(), DType::f32, 2, v, ld, Device::cuda);
  const std::vector<SamplingParams> penalties(2, SamplingParams{1.0f, 50, 1.0f, 0.0f, 1.3f, 0.4f});
  const std::vector<SamplingParams> plain(2, SamplingParams{0.7f, 50, 0.9f, 0.0f, 1.0f, 0.0f});
  for (const auto* p : {&penalties, &plain}) {
    for (uint64_t step = 0; step < 4; ++step) {
      const auto want = run_device(b, d, *p, 5, step);
      DeviceGuarded<int32_t> tok(2);
      sample_cuda(far_view, p->data(), d.history(b), 5, step, tok.data());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(tok.download(), want) << "step " << step << (p == &penalties ? ", penalties" : "");
      EXPECT_TRUE(tok.guard_intact());
    }
  }
  DeviceGuarded<float> want(2 * v), got(2 * v);
  DeviceGuarded<int32_t> bad(2);
  penalize_cuda(d.view(b), penalties.data(), d.history(b),
                TensorView::matrix(want.data(), DType::f32, 2, v, v, Device::cuda), bad.data());
  penalize_cuda(far_view, penalties.data(), d.history(b),
                TensorView::matrix(got.data(), DType::f32, 2, v, v, Device::cuda), bad.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(got.download(), want.download());
  EXPECT_TRUE(got.guard_intact() && far.guard_intact());
}

TEST(SampleCudaSanitize, BadArguments) {
  LLMK_REQUIRE_CUDA();
  Batch b = make_batch(2, 2000, 2000, 1);
  DeviceBatch d(b);
  DeviceGuarded<int32_t> tok(2);
  std::vector<SamplingParams> p(2);
  const auto err = [](auto&& fn) { return test::invalid_argument_message(fn); };
  const auto view = d.view(b);
  EXPECT_NE(err([&] { sample_cuda(view, p.data(), {}, 0, 0, nullptr); }).find("tokens"), std::string::npos);
  EXPECT_NE(err([&] { sample_cuda(view, nullptr, {}, 0, 0, tok.data()); }).find("params"), std::string::npos);
  auto host = TensorView::matrix(b.x.data(), DType::f32, 2, 2000);
  EXPECT_NE(err([&] { sample_cuda(host, p.data(), {}, 0, 0, tok.data()); }).find("CUDA device"), std::string::npos);
  p[1].top_k = 1500;
  EXPECT_NE(err([&] { sample_cuda(view, p.data(), {}, 0, 0, tok.data()); }).find("top_k (row 1)"), std::string::npos);
  p[1] = {};
  p[0].top_p = 0.5f;
  EXPECT_NE(err([&] {
              sample_cuda(view, p.data(), {}, 0, 0, tok.data(), nullptr, {TopkCudaConfig::warp_per_row, 0});
            }).find("warp_per_row"),
            std::string::npos);
  EXPECT_NE(err([&] {
              sample_cuda(view, p.data(), {}, 0, 0, tok.data(), nullptr, {TopkCudaConfig::split_row, 40});
            }).find("topk_splits"),
            std::string::npos);
  EXPECT_NE(err([&] {
              sample_cuda(view, p.data(), {}, 0, 0, tok.data(), nullptr, {TopkCudaConfig::auto_pick, 4});
            }).find("topk_splits"),
            std::string::npos);
  const auto odd = TensorView::matrix(reinterpret_cast<float*>(reinterpret_cast<char*>(d.x.data()) + 2), DType::f32, 1,
                                      1000, 2000, Device::cuda);
  EXPECT_NE(err([&] { sample_cuda(odd, p.data(), {}, 0, 0, tok.data()); }).find("4-byte aligned"), std::string::npos);
  auto strided = view;  // every other logit of a row: the kernels would read the row as consecutive floats
  strided.shape[1] = 1000, strided.stride[1] = 2;
  EXPECT_NE(err([&] { sample_cuda(strided, p.data(), {}, 0, 0, tok.data()); }).find("stride[1] 2"), std::string::npos);
  EXPECT_NE(err([&] { penalize_cuda(strided, p.data(), d.history(b), view, tok.data()); }).find("stride[1] 2"),
            std::string::npos);
  EXPECT_NE(err([&] {
              sample_cuda(view, p.data(), {nullptr, d.hist.data(), 3}, 0, 0, tok.data());
            }).find("history.indptr"),
            std::string::npos);
  EXPECT_NE(err([&] { penalize_cuda(view, p.data(), d.history(b), view, tok.data()); }).find("overlap"),
            std::string::npos);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(tok.guard_intact());
}

}  // namespace
}  // namespace llmk::test
