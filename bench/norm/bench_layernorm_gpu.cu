// `llmk bench layernorm-gpu`: LayerNorm forward and backward on CUDA, llmk
// against torch (aten native_layer_norm / native_layer_norm_backward through
// the Python peer with --device cuda), at 16384x4096 in bf16 and f32, timed
// with CUDA events on a cold L2 (bench/common/gpu.cuh), next to the device's
// own copy bandwidth. Bytes are the minimum traffic: fwd 2*N*D*s, bwd 3*N*D*s
// (stats, weights and the backward's partials not counted). Runs only where
// there is a GPU (scripts/gpu-check).
#include <cstdint>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "bench/common/bench.hpp"
#include "bench/common/gpu.cuh"
#include "llmk/cuda.hpp"
#include "llmk/norm.hpp"

namespace llmk::bench {
namespace {

struct DeviceBuf {
  void* p = nullptr;
  explicit DeviceBuf(size_t bytes) { LLMK_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuf() { cudaFree(p); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
};

// Fills a device buffer of n elements of t with N(mean, sd) values.
void fill(void* dst, DType t, size_t n, uint64_t seed, float mean, float sd) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> h(n);
  for (float& v : h) v = d(g);
  std::vector<uint8_t> conv(n * dtype_size(t));
  convert(h.data(), DType::f32, conv.data(), t, n);
  LLMK_CUDA_CHECK(cudaMemcpy(dst, conv.data(), conv.size(), cudaMemcpyHostToDevice));
}

int run(const Options& opt) {
  Reporter rep(opt, "layernorm-gpu",
               "bytes = minimum traffic: fwd reads x + writes y = 2*N*D*s, bwd reads x, dy + writes dx = 3*N*D*s; "
               "CUDA events, L2 flushed before every rep; copy = cudaMemcpy D2D, read + write counted");
  const double copy = open_gpu_bench(rep, opt, "layernorm-gpu");
  if (copy == 0) return 0;
  // The backward takes its partial buffer from the default stream-ordered
  // pool: keep freed memory there instead of returning it every sync.
  cudaMemPool_t pool;
  uint64_t keep = uint64_t(1) << 30;
  LLMK_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  LLMK_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const int64_t N = opt.quick ? 1024 : 16384, D = opt.quick ? 1024 : 4096;
  const std::string shape = shape_str({N, D});
  const int reps = opt.quick ? 5 : 20;
  for (DType t : {DType::bf16, DType::f32}) {
    const size_t bytes = size_t(N * D) * dtype_size(t);
    DeviceBuf x(bytes), dy(bytes), y(bytes), dx(bytes), w(4 * D), b(4 * D), mean(4 * N), rstd(4 * N), dw(4 * D),
        db(4 * D);
    fill(x.p, t, size_t(N * D), 1, 1.0f, 3.0f);
    fill(dy.p, t, size_t(N * D), 2, 0.0f, 1.0f);
    fill(w.p, DType::f32, size_t(D), 3, 1.0f, 0.5f);
    fill(b.p, DType::f32, size_t(D), 4, 0.0f, 0.5f);
    const auto mat = [&](void* p) { return TensorView::matrix(p, t, N, D, D, Device::cuda); };
    const auto vec = [&](void* p, int64_t n) { return TensorView::vector(p, DType::f32, n, Device::cuda); };
    auto fwd = [&](cudaStream_t s) {
      layer_norm(mat(x.p), vec(w.p, D), vec(b.p, D), 1e-5f, mat(y.p), vec(mean.p, N), vec(rstd.p, N),
                 reinterpret_cast<Stream>(s));
    };
    auto bwd = [&](cudaStream_t s) {
      layer_norm_backward(mat(dy.p), mat(x.p), vec(w.p, D), vec(mean.p, N), vec(rstd.p, N), mat(dx.p), vec(dw.p, D),
                          vec(db.p, D), reinterpret_cast<Stream>(s));
    };
    for (const auto& [op, fn, nbytes] :
         {std::tuple{"fwd", std::function<void(cudaStream_t)>(fwd), 2.0 * double(bytes)},
          std::tuple{"bwd", std::function<void(cudaStream_t)>(bwd), 3.0 * double(bytes)}}) {
      const double ms = gpu_median_ms(fn, reps);
      Row r{"layernorm-gpu", "llmk", op, shape, dtype_name(t), ms, nbytes / (ms * 1e6), {}};
      r.extra["x_copy"] = std::to_string(r.gbps / copy);
      rep.add(r);
    }
    std::string why;
    const auto peer = run_python_peer("bench/norm/peer_torch.py",
                                      {"--shapes", shape, "--dtype", dtype_name(t), "--device", "cuda"}, &why);
    for (Row r : peer) {
      r.extra["x_copy"] = std::to_string(r.gbps / copy);
      rep.add(r);
    }
    if (peer.empty()) rep.note(std::string("torch skipped (") + dtype_name(t) + "): " + why);
  }
  rep.ratios("llmk", {"torch"});
  return 0;
}

}  // namespace
LLMK_BENCH("layernorm-gpu", "LayerNorm fwd/bwd on CUDA (cold L2): llmk vs torch, device copy bandwidth", run);
}  // namespace llmk::bench
