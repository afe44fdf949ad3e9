// `llmk bench sample-gpu`: the device sampling step (sample_cuda: logits on
// the GPU -> token ids on the GPU) against torch on CUDA doing the same step
// (bench/sample/peer_torch.py: softmax(x / T) -> topk -> top-p cut ->
// torch.multinomial, or argmax for greedy, or multinomial over the full row),
// with the device copy bandwidth. Cold L2. Bytes = 4 * B * V: the f32 logits,
// read once (llmk reads the row twice on the full-row path; the figure still
// counts one read). Ops: greedy, top-k 50 + top-p 0.9 (T 0.8), top-p 0.9
// alone (llmk's K = 1024 cap; torch topk(1024) likewise) and the full row (T 1).
// Without a CUDA device the bench prints a note and returns.
#include <string>
#include <vector>

#include "bench/common/bench.hpp"
#include "bench/common/gpu.cuh"
#include "llmk/cuda.hpp"
#include "llmk/sample.hpp"

namespace llmk::bench {
namespace {

struct Op {
  const char* name;
  SamplingParams p;
};

int run(const Options& opt) {
  Reporter rep(opt, "sample-gpu",
               "bytes = 4*B*V (f32 logits read once), cold L2; torch = softmax -> topk -> top-p cut -> "
               "multinomial on CUDA");
  const double copy = open_gpu_bench(rep, opt, "sample-gpu");
  if (copy == 0) return 0;
  const std::vector<Op> ops = {{"greedy", {0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f}},
                               {"topk50_topp0.9", {0.8f, 50, 0.9f, 0.0f, 1.0f, 0.0f}},
                               {"topp0.9", {0.8f, 0, 0.9f, 0.0f, 1.0f, 0.0f}},
                               {"full", {1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f}}};
  std::vector<std::pair<int64_t, int64_t>> shapes = {{256, 131072}};
  if (!opt.quick) shapes.insert(shapes.end(), {{1, 131072}, {64, 151936}, {256, 151936}});
  std::string peer_shapes;
  for (const auto& [b, v] : shapes) {
    const int64_t n = b * v;
    std::vector<float> h(n);
    uint32_t st = 12345;
    for (auto& e : h) e = float((st = st * 1664525u + 1013904223u) >> 8) * (16.0f / 16777216.0f) - 8.0f;
    float* x = nullptr;
    int32_t* tok = nullptr;
    LLMK_CUDA_CHECK(cudaMalloc(&x, n * 4));
    LLMK_CUDA_CHECK(cudaMalloc(&tok, b * 4));
    LLMK_CUDA_CHECK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
    const auto view = TensorView::matrix(x, DType::f32, b, v, -1, Device::cuda);
    for (const Op& op : ops) {
      const std::vector<SamplingParams> params(b, op.p);
      uint64_t step = 0;
      const double ms = gpu_median_ms(
          [&](cudaStream_t s) { sample_cuda(view, params.data(), {}, 7, step++, tok, reinterpret_cast<Stream>(s)); },
          opt.quick ? 5 : 20);
      Row r{"sample-gpu",         "llmk", std::string("sample_") + op.name, shape_str({b, v}), "f32", ms,
            4.0 * n / (ms * 1e6), {}};
      r.extra["of_copy"] = std::to_string(r.gbps / copy);
      rep.add(r);
    }
    cudaFree(x);
    cudaFree(tok);
    peer_shapes += (peer_shapes.empty() ? "" : ",") + std::to_string(b) + "x" + std::to_string(v);
  }
  std::string why;
  const auto peer = run_python_peer("bench/sample/peer_torch.py", {"--shapes", peer_shapes}, &why);
  if (peer.empty()) rep.note("torch peer skipped: " + why);
  for (const Row& p : peer) rep.add(p);
  rep.ratios("llmk", {"torch"});
  return 0;
}

}  // namespace
LLMK_BENCH("sample-gpu", "device sampling step (penalties, top-k/top-p, Philox draw) vs torch on CUDA", run);
}  // namespace llmk::bench
