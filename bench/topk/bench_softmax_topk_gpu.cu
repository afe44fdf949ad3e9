// `llmk bench softmax-topk-gpu`: fused softmax + top-k on the GPU against
// torch.softmax + torch.topk on CUDA (the Python peer with --device cuda) and
// the device's copy bandwidth. Cold L2 (flushed before every rep). Bytes =
// 4 * B * V: the f32 logits, read once. llmk's rows print the launch
// configuration auto_pick chose and the fraction of the copy bandwidth; for
// V > 1024 each configuration it could be forced into (block_per_row,
// split_row at 2, 4, 8, .. splits) is timed too.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/bench.hpp"
#include "bench/common/gpu.cuh"
#include "llmk/cuda.hpp"
#include "llmk/topk.hpp"

namespace llmk::bench {
namespace {

struct Shape {
  int64_t b, v, k;
};

int run(const Options& opt) {
  Reporter rep(opt, "softmax-topk-gpu",
               "bytes = 4*B*V (f32 logits read once), cold L2; torch = torch.softmax + torch.topk on CUDA");
  const double copy = open_gpu_bench(rep, opt, "softmax-topk-gpu");
  if (copy == 0) return 0;
  std::vector<Shape> shapes = {{256, 131072, 1}, {256, 131072, 50}, {256, 131072, 256}};
  if (!opt.quick)
    shapes.insert(
        shapes.end(),
        {{256, 131072, 1024}, {1, 131072, 50}, {8, 131072, 50}, {64, 151936, 50}, {4096, 64, 8}, {4096, 256, 8}});
  std::string peer_shapes;
  for (const Shape& s : shapes) {
    const int64_t n = s.b * s.v;
    std::vector<float> h(n);
    uint32_t st = 12345;
    for (auto& e : h) e = float((st = st * 1664525u + 1013904223u) >> 8) * (8.0f / 16777216.0f) - 4.0f;
    float *x = nullptr, *probs = nullptr, *mx = nullptr, *lse = nullptr;
    int32_t* idx = nullptr;
    LLMK_CUDA_CHECK(cudaMalloc(&x, n * 4));
    LLMK_CUDA_CHECK(cudaMalloc(&probs, s.b * s.k * 4));
    LLMK_CUDA_CHECK(cudaMalloc(&idx, s.b * s.k * 4));
    LLMK_CUDA_CHECK(cudaMalloc(&mx, s.b * 4));
    LLMK_CUDA_CHECK(cudaMalloc(&lse, s.b * 4));
    LLMK_CUDA_CHECK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
    const auto view = TensorView::matrix(x, DType::f32, s.b, s.v, -1, Device::cuda);
    const SoftmaxTopkOut out{probs, idx, mx, lse};
    const double ms = gpu_median_ms(
        [&](cudaStream_t st) { softmax_topk(view, s.k, 1.0f, out, reinterpret_cast<Stream>(st)); }, opt.quick ? 5 : 20);
    Row r{"softmax-topk-gpu",   "llmk", "softmax_topk_k" + std::to_string(s.k), shape_str({s.b, s.v}), "f32", ms,
          4.0 * n / (ms * 1e6), {}};
    r.extra["config"] = topk_cuda_config_name(softmax_topk_cuda_config(s.b, s.v, s.k));
    r.extra["of_copy"] = std::to_string(r.gbps / copy);
    rep.add(r);
    // Every other configuration auto_pick could be made to take at this shape
    // (rows "llmk_block_per_row", "llmk_split_row_sN"), so one run shows where
    // its choice between them should fall.
    if (s.v > 1024) {
      std::vector<std::pair<TopkCudaConfig, int>> forced = {{TopkCudaConfig::block_per_row, 0}};
      for (int sp = 2; sp <= std::min<int64_t>({32, 4096 / s.k, s.v}); sp *= 2)
        forced.push_back({TopkCudaConfig::split_row, sp});
      for (const auto& [config, sp] : forced) {
        const double fms = gpu_median_ms(
            [&](cudaStream_t st) { softmax_topk_cuda(view, s.k, 1.0f, out, reinterpret_cast<Stream>(st), config, sp); },
            opt.quick ? 5 : 20);
        Row f{"softmax-topk-gpu",
              std::string("llmk_") + topk_cuda_config_name(config) + (sp ? "_s" + std::to_string(sp) : std::string()),
              r.op,
              r.shape,
              "f32",
              fms,
              4.0 * n / (fms * 1e6),
              {}};
        f.extra["of_copy"] = std::to_string(f.gbps / copy);
        rep.add(f);
      }
    }
    cudaFree(x);
    cudaFree(probs);
    cudaFree(idx);
    cudaFree(mx);
    cudaFree(lse);
    peer_shapes += (peer_shapes.empty() ? "" : ",") + std::to_string(s.b) + "x" + std::to_string(s.v) + "x" +
                   std::to_string(s.k);
  }
  std::string why;
  const auto peer = run_python_peer("bench/topk/peer_torch.py", {"--shapes", peer_shapes, "--device", "cuda"}, &why);
  if (peer.empty()) rep.note("torch peer skipped: " + why);
  for (const Row& p : peer) rep.add(p);
  rep.ratios("llmk", {"torch"});
  return 0;
}

}  // namespace
LLMK_BENCH("softmax-topk-gpu", "fused softmax + top-k on CUDA vs torch and the device copy bandwidth", run);
}  // namespace llmk::bench
