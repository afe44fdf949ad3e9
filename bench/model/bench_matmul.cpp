// `llmk bench matmul`: y = x @ W^T on SmolLM2-135M's shapes with W stored as f32, f16,
// Q8_0 and Q4_1 (llmk reads the stored blocks), against PyTorch's f32 matmul on a
// dequantized W of the same shape (bench/model/peer_torch_matmul.py), plus the machine's
// triad bandwidth. Bytes = stored W + 4 (M K + M N) (x and y in f32); gflops = 2 M N K / time.
// Shapes: M = 1 (decode), 8 and 32 (batched decode), 512 (prefill); N x K = 1536 x 576
// (ffn_up) and 49152 x 576 (the output projection, Q8_0 in the default model). Then
// Gemma-3-270M's Q4_K / Q6_K / Q5_0 shapes, each beside Q8_0 at the same shape (llmk only).
#include <array>
#include <utility>
#include <vector>

#include "bench/common/bench.hpp"
#include "llmk/matmul.hpp"
#include "llmk/model.hpp"
#include "llmk/parallel.hpp"

namespace llmk::bench {
namespace {
int run(const Options& opt) {
  Reporter rep(opt, "matmul", "bytes = stored W + 4*(M*K + M*N); gflops = 2*M*N*K / time");
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  set_num_threads(threads);
  std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1536, 576}, {8, 1536, 576}, {32, 1536, 576}, {512, 1536, 576}, {1, 49152, 576}};
  if (opt.quick) shapes = {{1, 1536, 576}, {8, 1536, 576}};
  std::string spec;
  for (const auto& shp : shapes) {
    const int64_t M = shp[0], N = shp[1], K = shp[2];  // not a structured binding: the lambda below captures them
    spec += (spec.empty() ? "" : ",") + std::to_string(M) + ":" + std::to_string(N) + ":" + std::to_string(K);
    // One layer's ffn_up of a random model supplies W in each type (ModelConfig with d_ff = N, d_model = K).
    for (WType t : {WType::f32, WType::f16, WType::q8_0, WType::q4_1}) {
      ModelConfig c;
      c.n_vocab = 32;
      c.n_ctx = 8;
      c.d_model = K;
      c.n_layer = 1;
      c.n_head = 9;
      c.n_head_kv = 3;
      c.d_ff = N;
      const Model m = Model::random(c, t, 1);
      const WeightView& w = m.layer(0).w_up;
      std::vector<float> x(size_t(M * K), 0.5f), y(size_t(M * N));
      const double ms = median_ms([&] { matmul(x.data(), K, w, y.data(), N, M); }, 5, opt.quick ? 0.05 : 0.3);
      const double bytes = double(w.rows * w.row_bytes) + 4.0 * double(M * K + M * N);
      Row r{"matmul", "llmk", "xWt", shape_str({M, N, K}), wtype_name(t), ms, bytes / ms / 1e6, {}};
      r.extra["gflops"] = std::to_string(2.0 * double(M * N * K) / ms / 1e6);
      rep.add(r);
    }
  }
  // Gemma-3-270M's Q4_K_M shapes, each type beside Q8_0 at the same shape (llmk only):
  // attn_output 640 x 1024 (Q4_K), ffn_down 640 x 2048 (Q6_K), ffn_up 2048 x 640 (Q5_0).
  const std::vector<std::pair<std::array<int64_t, 2>, WType>> gemma = {{{640, 1024}, WType::q4_k},
                                                                       {{640, 2048}, WType::q6_k},
                                                                       {{2048, 640}, WType::q5_0}};
  for (int64_t M : opt.quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 32, 512})
    for (const auto& [nk, type] : gemma)
      for (WType t : {type, WType::q8_0}) {
        const int64_t N = nk[0], K = nk[1];
        // rows of uniform values in [-1, 1) through the type's reference quantizer
        std::vector<float> v(size_t(N * K));
        for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 2654435761u) % 1000) / 500.0f - 1.0f;
        const int64_t rb = wtype_row_bytes(t, K);
        std::vector<uint8_t> buf(size_t(N * rb));
        for (int64_t n = 0; n < N; ++n) wtype_traits(t).from_float(v.data() + n * K, buf.data() + n * rb, K);
        const WeightView w{buf.data(), t, N, K, rb};
        std::vector<float> x(size_t(M * K), 0.5f), y(size_t(M * N));
        const double ms = median_ms([&] { matmul(x.data(), K, w, y.data(), N, M); }, 5, opt.quick ? 0.05 : 0.3);
        const double bytes = double(w.rows * w.row_bytes) + 4.0 * double(M * K + M * N);
        Row r{"matmul", "llmk", "xWt", shape_str({M, N, K}), wtype_name(t), ms, bytes / ms / 1e6, {}};
        r.extra["gflops"] = std::to_string(2.0 * double(M * N * K) / ms / 1e6);
        rep.add(r);
      }
  std::string why;
  const auto rows = run_python_peer("bench/model/peer_torch_matmul.py",
                                    {std::to_string(threads), opt.quick ? "1" : "0", spec}, &why);
  if (rows.empty()) rep.note("peer skipped: " + why);
  for (const auto& r : rows) rep.add(r);
  if (!opt.quick) {
    const double triad = stream_triad_gbps(threads, 192u << 20);
    rep.note("STREAM triad, " + std::to_string(threads) + " threads, 192 MiB: " + std::to_string(triad) + " GB/s");
  }
  rep.ratios("llmk", {"torch"});
  return 0;
}
}  // namespace
LLMK_BENCH("matmul",
           "y = x W^T on stored f32/f16/Q8_0/Q4_1 weights vs torch f32 (SmolLM2 shapes); Q4_K/Q6_K/Q5_0 (Gemma shapes)",
           run);
}  // namespace llmk::bench
