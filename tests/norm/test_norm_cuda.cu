// LayerNorm / RMSNorm on CUDA: every launch configuration the launchers can
// pick (norm_cuda::fwd_configs / bwd_configs) on the shapes of
// standard_cases(), against the double reference with the tolerances of
// norm_harness.hpp, with device sentinels after every output and in the row
// padding; the public API (half-precision weights, a stream); special
// values; bitwise repeatability. CudaSanitize: small cases for
// compute-sanitizer (scripts/gpu-check).
#include <cstring>
#include <limits>

#include "llmk/norm.hpp"
#include "norm/norm_cuda.hpp"
#include "tests/norm/norm_harness.hpp"

namespace llmk::test {
namespace {

using norm_cuda::LaunchConfig;

template <class T>
bool device_padding_intact(const DeviceGuarded<T>& g, int64_t N, int64_t D, int64_t stride) {
  const std::vector<T> h = g.download();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(h.data());
  for (int64_t n = 0; n + 1 < N; ++n)
    for (size_t b = size_t(n * stride + D) * sizeof(T); b < size_t((n + 1) * stride) * sizeof(T); ++b)
      if (p[b] != kSentinelByte) return false;
  return true;
}

template <class T>
std::vector<float> download_floats(const DeviceGuarded<T>& g) {
  const std::vector<T> h = g.download();
  return to_floats(h.data(), h.size());
}

// Forward then backward of a case on the device. With fc/bc null, through
// the public API on a fresh stream (weights in the case's dtype); else the
// internal launchers with those configurations (f32 weights).
template <class T>
NormOut run_cuda(const NormData<T>& d, const LaunchConfig* fc, const LaunchConfig* bc, const std::string& where) {
  const NormCase& c = d.c;
  const int64_t N = c.N, D = c.D, S = c.stride();
  const DType t = dtype_of<T>();
  const size_t mis = size_t(c.misalign) * sizeof(T), nd = size_t(N * S);
  DeviceGuarded<T> x(nd, mis), dy(nd, mis), y(nd, mis), dx(nd, mis), wt(static_cast<size_t>(D)),
      bt(static_cast<size_t>(D));
  DeviceGuarded<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)), dw(static_cast<size_t>(D)),
      db(static_cast<size_t>(D)), wf(static_cast<size_t>(D)), bf(static_cast<size_t>(D));
  x.upload(d.x.data());
  dy.upload(d.dy.data());
  wf.upload(d.wf.data());
  bf.upload(d.bf.data());
  wt.upload(d.wt.data());
  bt.upload(d.bt.data());
  const float* w = c.has_w ? wf.data() : nullptr;
  if (fc) {
    const norm::FwdArgs fa{x.data(),    S,        w, c.has_b ? bf.data() : nullptr,
                           c.eps,       y.data(), S, c.rms ? nullptr : mean.data(),
                           rstd.data(), N,        D, false};
    const norm::BwdArgs ba{dy.data(),   S,         x.data(), S, w, c.rms ? nullptr : mean.data(),
                           rstd.data(), dx.data(), S,        N, D, false};
    EXPECT_EQ(cudaSuccess, norm_cuda::forward(fa, t, c.rms, nullptr, fc)) << where << " " << fc->describe();
    EXPECT_EQ(cudaSuccess, norm_cuda::backward(ba, t, c.rms, dw.data(), c.rms ? nullptr : db.data(), nullptr, bc))
        << where << " " << bc->describe();
  } else {
    cudaStream_t s;
    EXPECT_EQ(cudaSuccess, cudaStreamCreate(&s));
    const Stream st = reinterpret_cast<Stream>(s);
    const auto param = [&](auto& f32, auto& tv, bool has) {
      if (!has) return TensorView{};
      return c.param_f32 ? TensorView::vector(f32.data(), DType::f32, D, Device::cuda)
                         : TensorView::vector(tv.data(), t, D, Device::cuda);
    };
    const auto mat = [&](auto& g) { return TensorView::matrix(g.data(), t, N, D, S, Device::cuda); };
    const auto vec = [](auto& g, int64_t n) { return TensorView::vector(g.data(), DType::f32, n, Device::cuda); };
    const TensorView W = param(wf, wt, c.has_w), B = param(bf, bt, c.has_b);
    if (c.rms) {
      rms_norm(mat(x), W, c.eps, mat(y), vec(rstd, N), st);
      rms_norm_backward(mat(dy), mat(x), W, vec(rstd, N), mat(dx), vec(dw, D), st);
    } else {
      layer_norm(mat(x), W, B, c.eps, mat(y), vec(mean, N), vec(rstd, N), st);
      layer_norm_backward(mat(dy), mat(x), W, vec(mean, N), vec(rstd, N), mat(dx), vec(dw, D), vec(db, D), st);
    }
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
  }
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize()) << where;
  EXPECT_TRUE(y.guard_intact() && dx.guard_intact() && mean.guard_intact() && rstd.guard_intact() &&
              dw.guard_intact() && db.guard_intact())
      << where << ": write past the end of an output";
  EXPECT_TRUE(device_padding_intact(y, N, D, S) && device_padding_intact(dx, N, D, S)) << where << ": padding written";
  const std::vector<T> yh = y.download(), dxh = dx.download();
  return NormOut{unstride(yh.data(), N, D, S),  download_floats(mean), download_floats(rstd),
                 unstride(dxh.data(), N, D, S), download_floats(dw),   download_floats(db)};
}

// Every forward and every backward configuration for the case, paired up.
template <class T>
void run_every_config(const NormData<T>& d, const std::string& what) {
  const NormCase& c = d.c;
  const int64_t S = c.stride();
  // Alignment as the device buffers will have it: base 256-aligned plus misalign.
  const auto* p = reinterpret_cast<const void*>(uintptr_t(256) + size_t(c.misalign) * sizeof(T));
  const norm::FwdArgs fa{p, S, nullptr, nullptr, c.eps, const_cast<void*>(p), S, nullptr, nullptr, c.N, c.D, false};
  const norm::BwdArgs ba{p, S, p, S, nullptr, nullptr, nullptr, const_cast<void*>(p), S, c.N, c.D, false};
  const auto fcs = norm_cuda::fwd_configs(fa, dtype_of<T>()), bcs = norm_cuda::bwd_configs(ba, dtype_of<T>());
  ASSERT_FALSE(fcs.empty() || bcs.empty());
  for (size_t i = 0; i < std::max(fcs.size(), bcs.size()); ++i) {
    const LaunchConfig &f = fcs[i % fcs.size()], &b = bcs[i % bcs.size()];
    const std::string where = what + " fwd[" + f.describe() + "] bwd[" + b.describe() + "]";
    check_outputs(d, run_cuda(d, &f, &b, where), where);
  }
  const std::string where = what + " public API";
  check_outputs(d, run_cuda(d, nullptr, nullptr, where), where);
}

TEST(CudaNorm, EveryLaunchConfigMatchesReference) {
  LLMK_REQUIRE_CUDA();
  for (const NormCase& c : standard_cases())
    for (DType t : {DType::f32, DType::f16, DType::bf16})
      with_dtype(t, [&]<class T>() { run_every_config(NormData<T>(c), c.name() + " " + dtype_name(t)); });
}

TEST(CudaNorm, LongRowsLargeMeansAndManyRows) {
  LLMK_REQUIRE_CUDA();
  for (const NormCase& c :
       {NormCase{.N = 3, .D = 65536}, NormCase{.N = 2, .D = 65536, .rms = true, .param_f32 = false},
        NormCase{.N = kCudaEmulated ? 203 : 2000, .D = 256}, NormCase{.N = 4, .D = 4096, .seed = 5, .center = 1e6},
        NormCase{.N = 4, .D = 4096, .seed = 6, .center = 1e8, .spread = 64}})
    for (DType t : {DType::f32, DType::bf16})
      with_dtype(t, [&]<class T>() { run_every_config(NormData<T>(c), c.name() + " " + dtype_name(t)); });
}

// Hidden sizes where the launcher's picks ask for just 48 KiB of dynamic
// shared memory (the row cache and the weight-gradient accumulators), next
// to the kernels' 128 B of static reduction scratch: f32 backward at D = 768
// (a warp per row) and 3072 (a block per row), f32 forward at D = 12288, and
// in bf16 D = 1024 / 4096 backward. Static + dynamic then passes the 48 KiB a
// kernel gets without opting in (cuda::allow_dynamic_smem); a launcher that
// opted in only for dynamic sizes above 48 KiB failed to launch these.
TEST(CudaNorm, SharedMemoryJustPast48KiB) {
  LLMK_REQUIRE_CUDA();
  for (const NormCase& c :
       {NormCase{.N = 40, .D = 768}, NormCase{.N = 9, .D = 3072, .rms = true}, NormCase{.N = 3, .D = 12288}})
    run_every_config(NormData<float>(c), c.name() + " f32");
  for (const NormCase& c : {NormCase{.N = 40, .D = 1024}, NormCase{.N = 9, .D = 4096, .rms = true}})
    run_every_config(NormData<bf16>(c), c.name() + " bf16");
}

// Backward without weight (and bias) gradients: the launch that allocates no
// partial sums gives the same dx, bit for bit, as the one that does.
TEST(CudaNorm, BackwardWithoutWeightGradients) {
  LLMK_REQUIRE_CUDA();
  const int64_t N = 37, D = 1000;
  std::vector<float> x(static_cast<size_t>(N * D)), dy(x.size()), w(static_cast<size_t>(D));
  fill_normal(x.data(), x.size(), 3);
  fill_normal(dy.data(), dy.size(), 4);
  fill_normal(w.data(), w.size(), 5);
  DeviceGuarded<float> xd(x.size()), dyd(x.size()), wd(w.size()), yd(x.size()), md(static_cast<size_t>(N)),
      rd(static_cast<size_t>(N)), dxa(x.size()), dxb(x.size()), dw(w.size()), db(w.size());
  xd.upload(x.data());
  dyd.upload(dy.data());
  wd.upload(w.data());
  const auto mat = [&](DeviceGuarded<float>& g) {
    return TensorView::matrix(g.data(), DType::f32, N, D, D, Device::cuda);
  };
  const auto vec = [](DeviceGuarded<float>& g, int64_t n) {
    return TensorView::vector(g.data(), DType::f32, n, Device::cuda);
  };
  for (bool rms : {false, true}) {
    if (rms) {
      rms_norm(mat(xd), vec(wd, D), 1e-5f, mat(yd), vec(rd, N));
      rms_norm_backward(mat(dyd), mat(xd), vec(wd, D), vec(rd, N), mat(dxa), vec(dw, D));
      rms_norm_backward(mat(dyd), mat(xd), vec(wd, D), vec(rd, N), mat(dxb), {});
    } else {
      layer_norm(mat(xd), vec(wd, D), {}, 1e-5f, mat(yd), vec(md, N), vec(rd, N));
      layer_norm_backward(mat(dyd), mat(xd), vec(wd, D), vec(md, N), vec(rd, N), mat(dxa), vec(dw, D), vec(db, D));
      layer_norm_backward(mat(dyd), mat(xd), vec(wd, D), vec(md, N), vec(rd, N), mat(dxb), {}, {});
    }
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize()) << (rms ? "rms" : "ln");
    EXPECT_TRUE(dxa.guard_intact() && dxb.guard_intact() && dw.guard_intact() && db.guard_intact());
    const std::vector<float> a = dxa.download(), b = dxb.download();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << (rms ? "rms" : "ln");
    bool finite = true;
    for (float v : b) finite &= std::isfinite(v);
    EXPECT_TRUE(finite) << (rms ? "rms" : "ln");
  }
}

// Constant rows give y = bias exactly; eps = 0 there gives rstd = inf and
// NaN y; a NaN or an infinity makes its row NaN; N = 0 writes zero gradients.
TEST(CudaNorm, SpecialValuesAsOnTheCpu) {
  LLMK_REQUIRE_CUDA();
  const int64_t N = 4, D = 40;
  std::vector<float> x(static_cast<size_t>(N * D)), b(static_cast<size_t>(D));
  fill_normal(x.data(), x.size(), 1);
  fill_normal(b.data(), b.size(), 2);
  for (int64_t i = 0; i < D; ++i) x[size_t(i)] = 2.5f;  // row 0 constant
  x[size_t(1 * D + 7)] = std::nanf("");
  x[size_t(2 * D)] = std::numeric_limits<float>::infinity();
  DeviceGuarded<float> xd(x.size()), yd(x.size()), bd(static_cast<size_t>(D)), md(static_cast<size_t>(N)),
      rd(static_cast<size_t>(N));
  xd.upload(x.data());
  bd.upload(b.data());
  for (float eps : {1e-5f, 0.0f}) {
    layer_norm(TensorView::matrix(xd.data(), DType::f32, N, D, D, Device::cuda), {},
               TensorView::vector(bd.data(), DType::f32, D, Device::cuda), eps,
               TensorView::matrix(yd.data(), DType::f32, N, D, D, Device::cuda),
               TensorView::vector(md.data(), DType::f32, N, Device::cuda),
               TensorView::vector(rd.data(), DType::f32, N, Device::cuda));
    const std::vector<float> y = yd.download(), r = rd.download();
    for (int64_t i = 0; i < D; ++i) {
      if (eps > 0) EXPECT_EQ(y[size_t(i)], b[size_t(i)]) << i;
      else EXPECT_TRUE(std::isnan(y[size_t(i)])) << i;
      EXPECT_TRUE(std::isnan(y[size_t(D + i)]) && std::isnan(y[size_t(2 * D + i)])) << i;
      EXPECT_TRUE(std::isfinite(y[size_t(3 * D + i)])) << i;
    }
    if (eps == 0) EXPECT_EQ(r[0], std::numeric_limits<float>::infinity());
  }
  DeviceGuarded<float> dw(static_cast<size_t>(D)), db(static_cast<size_t>(D));
  const auto empty = TensorView::matrix(xd.data(), DType::f32, 0, D, D, Device::cuda);
  const auto v0 = TensorView::vector(md.data(), DType::f32, 0, Device::cuda);
  layer_norm_backward(empty, empty, {}, v0, v0, empty, TensorView::vector(dw.data(), DType::f32, D, Device::cuda),
                      TensorView::vector(db.data(), DType::f32, D, Device::cuda));
  for (float v : dw.download()) EXPECT_EQ(v, 0.0f);
  for (float v : db.download()) EXPECT_EQ(v, 0.0f);
}

TEST(CudaNorm, BackwardIsBitwiseRepeatable) {
  LLMK_REQUIRE_CUDA();
  const NormData<float> d(NormCase{.N = 3000, .D = 1000});
  const NormOut a = run_cuda(d, nullptr, nullptr, "run 1"), b = run_cuda(d, nullptr, nullptr, "run 2");
  EXPECT_EQ(0, std::memcmp(a.dw.data(), b.dw.data(), a.dw.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.db.data(), b.db.data(), a.db.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dx.data(), b.dx.data(), a.dx.size() * 4));
}

// Small cases, every configuration: what compute-sanitizer memcheck and
// racecheck run in scripts/gpu-check.
TEST(CudaSanitizeNorm, SmallCasesEveryConfig) {
  LLMK_REQUIRE_CUDA();
  for (const NormCase& c : {NormCase{.N = 3, .D = 33, .pad = 1, .misalign = 1}, NormCase{.N = 5, .D = 64},
                            NormCase{.N = 2, .D = 72, .rms = true, .has_b = false}})
    for (DType t : {DType::f32, DType::bf16})
      with_dtype(t, [&]<class T>() { run_every_config(NormData<T>(c), c.name() + " " + dtype_name(t)); });
}

}  // namespace
}  // namespace llmk::test
