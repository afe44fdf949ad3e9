// softmax_topk on CUDA against the double-precision oracle, for every launch
// configuration the launcher can pick (warp_per_row, block_per_row,
// split_row with forced and automatic split counts), with sentinels after
// every device output. Suites *Cuda* run on a GPU (scripts/gpu-check) and skip
// visibly here; *CudaSanitize* holds the small shapes run under
// compute-sanitizer memcheck and racecheck.
#include "tests/topk/topk_check.hpp"

namespace llmk::test {
namespace {

struct Cfg {
  TopkCudaConfig config;
  int splits;
};

// Every configuration that can serve (V, K).
std::vector<Cfg> configs_for(int64_t v, int64_t k) {
  std::vector<Cfg> c;
  if (v <= 1024) c.push_back({TopkCudaConfig::warp_per_row, 0});
  if (k > 1024) return c;
  c.push_back({TopkCudaConfig::block_per_row, 0});
  const int64_t most = std::min<int64_t>({32, 4096 / k, v});
  if (most >= 2) c.push_back({TopkCudaConfig::split_row, 2});
  if (most >= 3) c.push_back({TopkCudaConfig::split_row, int(most)});
  if (most >= 2 && v / 4096 >= 2) c.push_back({TopkCudaConfig::split_row, 0});  // the automatic count
  return c;
}

template <class T>
TopkResult run_cuda(const std::vector<T>& host, int64_t rows, int64_t v, int64_t ld, int64_t k, float t, Cfg cfg,
                    size_t mis = 0) {
  DeviceGuarded<T> x(host.size(), mis);
  x.upload(host.data());
  DeviceGuarded<float> p(rows * k), mx(rows), lse(rows);
  DeviceGuarded<int32_t> idx(rows * k);
  softmax_topk_cuda(TensorView::matrix(x.data(), dtype_of<T>(), rows, v, ld, Device::cuda), k, t,
                    {p.data(), idx.data(), mx.data(), lse.data()}, nullptr, cfg.config, cfg.splits);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(p.guard_intact() && idx.guard_intact() && mx.guard_intact() && lse.guard_intact() && x.guard_intact())
      << "write past a device buffer";
  return TopkResult{p.download(), mx.download(), lse.download(), idx.download(), k};
}

std::string name(int64_t v, int64_t k, Cfg c) {
  return std::string(topk_cuda_config_name(c.config)) + " splits " + std::to_string(c.splits) + " V " +
         std::to_string(v) + " K " + std::to_string(k);
}

template <class T>
void check_shape(const std::vector<T>& x, int64_t rows, int64_t v, int64_t ld, const std::vector<int64_t>& ks,
                 float t = 1.0f, size_t mis = 0) {
  const auto ref = run_ref(TensorView::matrix(x.data(), dtype_of<T>(), rows, v, ld), std::min<int64_t>(v, 1024), t);
  for (int64_t k : ks) {
    if (k > v) continue;
    for (Cfg c : configs_for(v, k))
      EXPECT_TRUE(same_topk(run_cuda(x, rows, v, ld, k, t, c, mis), ref, rows, name(v, k, c)));
  }
}

const std::vector<int64_t> kKs = {1, 2, 8, 50, 256, 1024};

// The grid. B = 5 for V <= 1024: warp_per_row blocks hold 4 warps on 4
// different (random, distinct) rows, and the second block is partly empty.
TEST(SoftmaxTopkCuda, Grid) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {1, 7, 8, 33, 1000, 1023, 1024, 1025, 32000, 50257, 128256, 151936, 256000}) {
    const int64_t rows = v <= 1024 ? 5 : 3;
    check_shape(random_logits<float>(rows, v, v, 100 + v), rows, v, v, kKs);
  }
}

// MoE routing shapes: many rows, few experts.
TEST(SoftmaxTopkCuda, MoeRouting) {
  LLMK_REQUIRE_CUDA();
  const int64_t rows = kCudaEmulated ? 67 : 4099;  // emulated: 17 blocks of 4 warps, the last one partly empty
  for (int64_t v : {8, 64, 256, 512}) check_shape(random_logits<float>(rows, v, v, v), rows, v, v, {1, 2, 8});
}

TEST(SoftmaxTopkCuda, TiesAndNegativeInfinity) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {33, 1000, 50000}) check_shape(tied_logits<float>(5, v, v), 5, v, v, {1, 8, 33, 1024});
  const int64_t v = 1025;
  auto x = random_logits<float>(3, v, v, 5);
  for (int64_t j = 0; j < v; ++j)
    if (j != 1000 && j != 17) x[v + j] = -INFINITY;  // row 1: 2 finite logits
  check_shape(x, 3, v, v, {1, 2, 8, 256, 1024});
}

TEST(SoftmaxTopkCuda, SpecialRows) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {40, 40000}) {
    auto x = random_logits<float>(6, v, v, 9);
    x[1 * v + v - 1] = NAN;
    x[2 * v + 5] = INFINITY;
    for (int64_t j = 0; j < v; ++j) x[3 * v + j] = -INFINITY;
    x[4 * v + 3] = INFINITY;
    x[4 * v + v / 2] = NAN;
    for (int64_t j = 0; j < v; ++j) x[5 * v + j] = j == 9 ? NAN : -INFINITY;
    check_shape(x, 6, v, v, {1, 4});
  }
}

// What the block pool meets at its worst and the launcher's boundaries:
// ascending rows (every logit a candidate: a flush every step) and
// descending ones, in f32 and f16; V = 8191 / 8192 / 8193, where the automatic
// split count first reaches 2; K from 9 to 49, above the per-thread register
// path (K <= 8); special rows in f16 and bf16; a temperature of 1e-3.
TEST(SoftmaxTopkCuda, OrderedRowsBoundariesAndHalfSpecials) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {5000, 40000}) {
    std::vector<float> x(size_t(2 * v));
    for (int64_t j = 0; j < v; ++j) x[size_t(j)] = float(j) * 1e-3f, x[size_t(v + j)] = -float(j) * 1e-3f;
    check_shape(x, 2, v, v, {1, 9, 50, 256, 1024});
    std::vector<f16> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = from_f32<f16>(x[i] * 0.01f);  // ties where f16 rounds equal
    check_shape(h, 2, v, v, {8, 50});
  }
  for (int64_t v : {8191, 8192, 8193}) check_shape(random_logits<float>(2, v, v, v), 2, v, v, {9, 17, 33, 49});
  for (int64_t v : {40, 40000}) {
    auto x = random_logits<float>(4, v, v, 11);
    x[size_t(v + v - 1)] = NAN;
    x[size_t(2 * v + 5)] = INFINITY;
    for (int64_t j = 0; j < v; ++j) x[size_t(3 * v + j)] = -INFINITY;
    std::vector<f16> h(x.size());
    std::vector<bf16> b(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = from_f32<f16>(x[i]), b[i] = from_f32<bf16>(x[i]);
    check_shape(h, 4, v, v, {1, 4});
    check_shape(b, 4, v, v, {1, 4});
  }
  check_shape(random_logits<float>(2, 50257, 50257, 12), 2, 50257, 50257, {1, 50}, 1e-3f);
}

// Null row_max / lse outputs: the same probabilities and indices.
TEST(SoftmaxTopkCuda, NullMaxAndLse) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {300, 50257}) {
    const auto host = random_logits<float>(3, v, v, 13);
    DeviceGuarded<float> x(host.size()), p1(3 * 50), p2(3 * 50), mx(3), lse(3);
    DeviceGuarded<int32_t> i1(3 * 50), i2(3 * 50);
    x.upload(host.data());
    const auto view = TensorView::matrix(x.data(), DType::f32, 3, v, v, Device::cuda);
    softmax_topk(view, 50, 1.0f, {p1.data(), i1.data(), mx.data(), lse.data()});
    softmax_topk(view, 50, 1.0f, {p2.data(), i2.data(), nullptr, nullptr});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(p2.guard_intact() && i2.guard_intact());
    const auto a = p1.download(), b = p2.download();
    const auto ia = i1.download(), ib = i2.download();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << v;
    EXPECT_EQ(ia, ib) << v;
  }
}

TEST(SoftmaxTopkCuda, HalfTypesStrideMisalignmentTemperature) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {7, 1025, 50257}) {
    check_shape(random_logits<f16>(5, v, v + 3, v), 5, v, v + 3, {1, 8, 256}, 1.0f, 2);
    check_shape(random_logits<bf16>(5, v, v + 5, v), 5, v, v + 5, {1, 8, 256}, 1.0f, 6);
  }
  check_shape(random_logits<float>(3, 1025, 1100, 1), 3, 1025, 1100, {50}, 1.0f, 4);
  for (float t : {0.5f, 2.0f}) check_shape(random_logits<float>(2, 50257, 50257, 2), 2, 50257, 50257, {50}, t);
}

TEST(SoftmaxTopkCuda, AutoPickAndBadArguments) {
  LLMK_REQUIRE_CUDA();
  EXPECT_EQ(softmax_topk_cuda_config(4096, 64, 8), TopkCudaConfig::warp_per_row);
  EXPECT_EQ(softmax_topk_cuda_config(1, 128256, 50), TopkCudaConfig::split_row);
  EXPECT_EQ(softmax_topk_cuda_config(4096, 128256, 50), TopkCudaConfig::block_per_row);
  for (int64_t rows : {int64_t(1), int64_t(8), kCudaEmulated ? int64_t(33) : int64_t(300)})
    check_shape(random_logits<float>(rows, 131072, 131072, rows), rows, 131072, 131072, {1, 50, 256});
  DeviceGuarded<float> x(2 * 5000), p(2 * 2000), m(2), l(2);
  DeviceGuarded<int32_t> i(2 * 2000);
  const auto view = TensorView::matrix(x.data(), DType::f32, 2, 5000, 5000, Device::cuda);
  const SoftmaxTopkOut out{p.data(), i.data(), m.data(), l.data()};
  EXPECT_THROW(softmax_topk_cuda(view, 8, 1.0f, out, nullptr, TopkCudaConfig::warp_per_row), InvalidArgument);
  EXPECT_THROW(softmax_topk(view, 2000, 1.0f, out), InvalidArgument);
  EXPECT_THROW(softmax_topk_cuda(view, 8, 1.0f, out, nullptr, TopkCudaConfig::split_row, 1), InvalidArgument);
  EXPECT_THROW(softmax_topk_cuda(view, 1024, 1.0f, out, nullptr, TopkCudaConfig::split_row, 5), InvalidArgument);
}

// No rows: every configuration returns without touching the device (the
// split count was once computed as SMs / B first: a division by zero). Runs
// without a GPU too (device_sms() then assumes 132).
TEST(SoftmaxTopkCudaArgs, NoRowsEveryConfig) {
  const SoftmaxTopkOut out{nullptr, nullptr, nullptr, nullptr};
  for (int64_t v : {64, 5000, 32000, 128256}) {
    const auto view = TensorView::matrix(nullptr, DType::f32, 0, v, v, Device::cuda);
    EXPECT_NO_THROW(softmax_topk(view, 50, 1.0f, out)) << v;
    for (TopkCudaConfig c : {TopkCudaConfig::block_per_row, TopkCudaConfig::split_row})
      EXPECT_NO_THROW(softmax_topk_cuda(view, 50, 1.0f, out, nullptr, c)) << v << " " << topk_cuda_config_name(c);
  }
}

// Arguments checked before anything runs (no GPU needed): splits only with
// split_row (auto_pick included, which picks it only for some shapes), and the
// configuration query's k, vocab and rows.
TEST(SoftmaxTopkCudaArgs, SplitsNeedSplitRowAndConfigQueryChecksK) {
  const SoftmaxTopkOut out{nullptr, nullptr, nullptr, nullptr};
  const auto view = TensorView::matrix(nullptr, DType::f32, 0, 5000, 5000, Device::cuda);
  for (TopkCudaConfig c : {TopkCudaConfig::auto_pick, TopkCudaConfig::block_per_row})
    EXPECT_NE(invalid_argument_message([&] { softmax_topk_cuda(view, 50, 1.0f, out, nullptr, c, 4); }).find("splits"),
              std::string::npos)
        << topk_cuda_config_name(c);
  EXPECT_NO_THROW(softmax_topk_cuda(view, 50, 1.0f, out, nullptr, TopkCudaConfig::split_row, 4));
  EXPECT_NE(invalid_argument_message([] { softmax_topk_cuda_config(1, 5000, 0); }).find("'k' = 0"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { softmax_topk_cuda_config(1, 0, 1); }).find("vocab"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { softmax_topk_cuda_config(-1, 5000, 1); }).find("rows"), std::string::npos);
}

// More blocks than gridDim.x takes (2^31 - 1) is an InvalidArgument naming
// the logits, checked before anything runs: split_row's rows x splits, and
// block_per_row's rows (the pointers are never read).
TEST(SoftmaxTopkCudaArgs, TooManyBlocksForOneLaunch) {
  const auto at = [](int j) { return reinterpret_cast<float*>(uintptr_t(j) << 40); };  // far apart: no overlap
  const SoftmaxTopkOut out{at(1), reinterpret_cast<int32_t*>(at(2)), at(3), at(4)};
  const void* far = at(64);
  const auto view = TensorView::matrix(far, DType::f32, int64_t(1) << 30, 64, 64, Device::cuda);
  EXPECT_NE(invalid_argument_message([&] {
              softmax_topk_cuda(view, 1, 1.0f, out, nullptr, TopkCudaConfig::split_row, 2);
            }).find("'logits'"),
            std::string::npos);
  const auto big = TensorView::matrix(far, DType::f32, int64_t(1) << 31, 64, 64, Device::cuda);
  EXPECT_NE(invalid_argument_message([&] {
              softmax_topk_cuda(big, 1, 1.0f, out, nullptr, TopkCudaConfig::block_per_row);
            }).find("more rows than one launch of block_per_row"),
            std::string::npos);
}

// A configuration outside the enum (say, an int from a binding) is named, not
// taken for split_row with no splits.
TEST(SoftmaxTopkCudaArgs, ConfigOutsideTheEnumIsNamed) {
  const SoftmaxTopkOut out{nullptr, nullptr, nullptr, nullptr};
  const auto view = TensorView::matrix(nullptr, DType::f32, 0, 5000, 5000, Device::cuda);
  for (int c : {-1, 4, 7}) {
    const std::string m = invalid_argument_message(
        [&] { softmax_topk_cuda(view, 50, 1.0f, out, nullptr, static_cast<TopkCudaConfig>(c)); });
    EXPECT_NE(m.find("'config'"), std::string::npos) << c << ": " << m;
    EXPECT_NE(m.find(std::to_string(c)), std::string::npos) << m;
  }
}

// Small shapes for compute-sanitizer: every configuration, partial blocks, misalignment.
TEST(SoftmaxTopkCudaSanitize, SmallShapes) {
  LLMK_REQUIRE_CUDA();
  for (int64_t v : {7, 33, 1025, 5000}) check_shape(random_logits<float>(5, v, v, v), 5, v, v, {1, 8, 50}, 1.0f, 4);
  check_shape(random_logits<bf16>(5, 1025, 1030, 3), 5, 1025, 1030, {8}, 1.0f, 2);
}

}  // namespace
}  // namespace llmk::test
