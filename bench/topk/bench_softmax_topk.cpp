// `llmk bench softmax-topk`: fused softmax + top-k on the CPU, llmk against
// the naive two-step (safe softmax written to memory, then a heap top-k:
// softmax_topk_naive), PyTorch (torch.softmax then torch.topk, a Python peer)
// and this machine's STREAM triad, on the same f32 logits. Bytes = 4 * B * V:
// the logits, which a fused op reads once (outputs are B * K, negligible).
// llmk's rows also print its fraction of the triad bandwidth. Every
// implementation cycles through copies of the logits worth >= 256 MiB
// (logit_copies), so no shape is timed from the cache; llmk_warm rows time
// llmk on one copy, from the cache where it fits (the compute side). Three rounds
// (one with --quick) of llmk + naive over every shape, then the torch peer; each
// row is its median round. llmk rows name the SIMD path that ran (`simd`).

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common/bench.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "llmk/topk.hpp"

namespace llmk::bench {
namespace {

struct Shape {
  int64_t b, v, k;
};

std::string op_of(const Shape& s) { return "softmax_topk_k" + std::to_string(s.k); }

// Copies of the n logits that successive calls cycle through, so that the
// calls together read at least 256 MiB: a shape that fits the last-level cache
// would otherwise be re-read from it (64 x 50257 f32 is 12.9 MB), and
// of_triad would compare a cache's bandwidth with DRAM's. The torch peer does the same.
int64_t logit_copies(int64_t n) {
  constexpr int64_t kWorkingSet = int64_t(256) << 20;
  return std::max<int64_t>(1, (kWorkingSet + 4 * n - 1) / (4 * n));
}

// "BxVxK" with B, V >= 1 and 1 <= K <= V, else InvalidArgument naming --only.
Shape parse_shape(const std::string& o) {
  Shape s{0, 0, 0};
  int used = -1;
  const bool parsed = std::sscanf(o.c_str(), "%" SCNd64 "x%" SCNd64 "x%" SCNd64 "%n", &s.b, &s.v, &s.k, &used) == 3 &&
                      used == int(o.size());
  LLMK_CHECK_ARG(parsed && s.b >= 1 && s.v >= 1 && s.k >= 1 && s.k <= s.v, "bench softmax-topk", "--only", o,
                 "must be BxVxK shapes with B, V >= 1 and 1 <= K <= V, e.g. 64x128256x50");
  return s;
}

int run(const Options& opt) {
  std::vector<Shape> shapes;
  if (opt.quick) {
    shapes = {{1, 50257, 50}, {64, 50257, 50}, {4096, 64, 8}};
  } else {
    for (int64_t b : {1, 8, 64, 256})
      for (int64_t v : {50257, 128256, 151936})
        for (int64_t k : {1, 50, 256}) shapes.push_back({b, v, k});
    for (int64_t v : {8, 64, 256})
      for (int64_t k : {2, 8}) shapes.push_back({4096, v, k});
  }
  if (!opt.only.empty()) {  // --only 64x128256x50,16x49152x40: just these BxVxK shapes, listed above or not
    shapes.clear();
    for (const std::string& o : opt.only) shapes.push_back(parse_shape(o));
  }
  Reporter rep(opt, "softmax-topk",
               "bytes = 4*B*V (f32 logits read once); naive = softmax to memory + heap top-k; torch = "
               "torch.softmax + torch.topk");
  rep.note(simd_note());
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  set_num_threads(threads);
  const double min_s = opt.quick ? 0.02 : 0.3;
  const Row tr = triad_row("softmax-topk", threads, opt.quick);
  const double triad = tr.gbps;
  rep.add(tr);
  std::string peer_shapes;
  for (const Shape& s : shapes)
    peer_shapes += (peer_shapes.empty() ? "" : ",") + std::to_string(s.b) + "x" + std::to_string(s.v) + "x" +
                   std::to_string(s.k);
  // Rounds: every shape's llmk and naive rows, then the torch peer's rows, in
  // turn; each row reports its median round (median_rounds), so llmk and torch
  // see the same mix of quiet and loaded phases of a shared machine.
  const int rounds = opt.quick ? 1 : 3;
  std::vector<std::vector<Row>> all;
  std::string why;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Row> rows;
    for (const Shape& s : shapes) {
      const int64_t n = s.b * s.v, copies = logit_copies(n);
      Buffer x(size_t(n * copies) * 4), probs(size_t(s.b * s.k) * 4), idx(size_t(s.b * s.k) * 4), mx(size_t(s.b) * 4),
          lse(size_t(s.b) * 4);
      float* xp = x.as<float>();
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t i = 0; i < n * copies; ++i) {  // first touch by the threads that read it; pseudo-random in [-4, 4)
        uint32_t h = uint32_t(i % n) * 2654435761u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        xp[i] = float(h >> 8) * (8.0f / 16777216.0f) - 4.0f;
      }
      int64_t call = 0;  // each call reads the next copy
      const auto view = [&] { return TensorView::matrix(xp + (call++ % copies) * n, DType::f32, s.b, s.v); };
      const SoftmaxTopkOut out{probs.as<float>(), idx.as<int32_t>(), mx.as<float>(), lse.as<float>()};
      const double bytes = 4.0 * double(n);
      const std::string shape = shape_str({s.b, s.v});
      const double t_llmk = median_ms([&] { softmax_topk(view(), s.k, 1.0f, out); }, 5, min_s);
      Row r{"softmax-topk", "llmk", op_of(s), shape, "f32", t_llmk, bytes / (t_llmk * 1e6), {}};
      r.extra["of_triad"] = std::to_string(r.gbps / triad);
      r.extra["simd"] = simd_name(simd_level());
      if (copies > 1) r.extra["copies"] = std::to_string(copies);
      rows.push_back(r);
      // llmk_warm: the same op on one copy, call after call, so from the cache
      // when the shape fits it, as a decode step's logits come straight from
      // the LM head's matmul: the op's compute side, not held to the triad.
      const auto first = TensorView::matrix(xp, DType::f32, s.b, s.v);
      const double t_warm = median_ms([&] { softmax_topk(first, s.k, 1.0f, out); }, 5, min_s);
      rows.push_back(Row{"softmax-topk",
                         "llmk_warm",
                         op_of(s),
                         shape,
                         "f32",
                         t_warm,
                         bytes / (t_warm * 1e6),
                         {{"simd", simd_name(simd_level())}}});
      const double t_naive = median_ms([&] { softmax_topk_naive(view(), s.k, 1.0f, out); }, 5, min_s);
      rows.push_back(Row{"softmax-topk", "naive", op_of(s), shape, "f32", t_naive, bytes / (t_naive * 1e6), {}});
    }
    all.push_back(std::move(rows));
    if (why.empty()) {  // a peer that failed once is not retried
      auto peer = run_python_peer("bench/topk/peer_torch.py",
                                  {"--shapes", peer_shapes, "--threads", std::to_string(threads), "--min-seconds",
                                   std::to_string(min_s)},
                                  &why);
      if (!peer.empty()) all.push_back(std::move(peer));
    }
  }
  if (!why.empty()) rep.note("torch peer skipped: " + why);
  for (const Row& m : median_rounds(all)) rep.add(m);
  rep.ratios("llmk", {"naive", "torch"});
  return 0;
}

}  // namespace
LLMK_BENCH("softmax-topk", "fused softmax + top-k (CPU) vs naive two-step, PyTorch and the triad", run);
}  // namespace llmk::bench
