// `llmk bench layernorm`: LayerNorm forward and backward on the CPU, llmk
// against oneDNN (libdnnl, when found at build time), PyTorch (a Python peer,
// when torch imports), a naive unfused version (op by op, as an eager
// framework runs it), and the STREAM triad of this machine, side by side on
// the same data. Bytes are the minimum traffic: fwd reads x and writes y
// (2*N*D*s), bwd reads x and dy and writes dx (3*N*D*s); the N-sized stats and
// the D-sized weights are not counted. Three rounds (one with --quick) of the
// in-process rows then the torch peer; each row is its median round. Within a
// round, each shape's in-process implementations take turns (6 turns each).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/common/bench.hpp"
#include "llmk/norm.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tensor.hpp"
#ifdef LLMK_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace llmk::bench {
namespace {

constexpr float kEps = 1e-5f;

struct Data {
  int64_t N, D;
  Buffer x, dy, y, dx, w, b, mean, rstd, dw, db, tmp;
  Data(int64_t n, int64_t d)
      : N(n),
        D(d),
        x(bytes()),
        dy(bytes()),
        y(bytes()),
        dx(bytes()),
        w(4 * d),
        b(4 * d),
        mean(4 * n),
        rstd(4 * n),
        dw(4 * d),
        db(4 * d),
        tmp(bytes()) {
    uint32_t s = 12345;
    auto rnd = [&] { return (s = s * 1664525u + 1013904223u) / 4294967296.0f - 0.5f; };
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N * D; ++i) {  // first touch on the threads that use the rows
      x.as<float>()[i] = 0.0f;
      dy.as<float>()[i] = 0.0f;
      y.as<float>()[i] = 0.0f;
      dx.as<float>()[i] = 0.0f;
      tmp.as<float>()[i] = 0.0f;
    }
    for (int64_t i = 0; i < N * D; ++i) x.as<float>()[i] = 3.0f * rnd() + 1.0f, dy.as<float>()[i] = rnd();
    for (int64_t i = 0; i < D; ++i) w.as<float>()[i] = 1.0f + rnd(), b.as<float>()[i] = rnd();
  }
  size_t bytes() const { return size_t(N * D) * sizeof(float); }
  TensorView mat(const Buffer& p) const { return TensorView::matrix(p.data(), DType::f32, N, D); }
  TensorView vecN(const Buffer& p) const { return TensorView::vector(p.data(), DType::f32, N); }
  TensorView vecD(const Buffer& p) const { return TensorView::vector(p.data(), DType::f32, D); }
};

void llmk_fwd(Data& d) {
  layer_norm(d.mat(d.x), d.vecD(d.w), d.vecD(d.b), kEps, d.mat(d.y), d.vecN(d.mean), d.vecN(d.rstd));
}
void llmk_bwd(Data& d) {
  layer_norm_backward(d.mat(d.dy), d.mat(d.x), d.vecD(d.w), d.vecN(d.mean), d.vecN(d.rstd), d.mat(d.dx), d.vecD(d.dw),
                      d.vecD(d.db));
}

// The unfused version: each step a separate sweep over [N, D], through a
// temporary, as an eager framework would run the composite ops.
void naive_fwd(Data& d) {
  const int64_t N = d.N, D = d.D;
  const float *x = d.x.as<float>(), *w = d.w.as<float>(), *b = d.b.as<float>();
  float *y = d.y.as<float>(), *xc = d.tmp.as<float>(), *mean = d.mean.as<float>(), *rstd = d.rstd.as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {  // mean = x.mean(-1)
    float s = 0;
    for (int64_t i = 0; i < D; ++i) s += x[n * D + i];
    mean[n] = s / float(D);
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)  // xc = x - mean
    for (int64_t i = 0; i < D; ++i) xc[n * D + i] = x[n * D + i] - mean[n];
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {  // rstd = rsqrt((xc^2).mean(-1) + eps)
    float s = 0;
    for (int64_t i = 0; i < D; ++i) s += xc[n * D + i] * xc[n * D + i];
    rstd[n] = 1.0f / std::sqrt(s / float(D) + kEps);
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)  // y = xc * rstd * w + b
    for (int64_t i = 0; i < D; ++i) y[n * D + i] = xc[n * D + i] * rstd[n] * w[i] + b[i];
}

void naive_bwd(Data& d) {
  const int64_t N = d.N, D = d.D;
  const float *x = d.x.as<float>(), *dy = d.dy.as<float>(), *w = d.w.as<float>();
  const float *mean = d.mean.as<float>(), *rstd = d.rstd.as<float>();
  float *xh = d.tmp.as<float>(), *dx = d.dx.as<float>(), *dw = d.dw.as<float>(), *db = d.db.as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)  // x_hat
    for (int64_t i = 0; i < D; ++i) xh[n * D + i] = (x[n * D + i] - mean[n]) * rstd[n];
  // dw = (dy * x_hat).sum(0), db = dy.sum(0): column blocks, rows read in order
  constexpr int64_t kCols = 256;
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < D; i0 += kCols) {
    const int64_t i1 = std::min(D, i0 + kCols);
    for (int64_t i = i0; i < i1; ++i) dw[i] = db[i] = 0.0f;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = i0; i < i1; ++i) dw[i] += dy[n * D + i] * xh[n * D + i], db[i] += dy[n * D + i];
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {  // dx = rstd * (g - g.mean - x_hat * (g x_hat).mean), g = dy * w
    float c1 = 0, c2 = 0;
    for (int64_t i = 0; i < D; ++i) c1 += dy[n * D + i] * w[i], c2 += dy[n * D + i] * w[i] * xh[n * D + i];
    c1 /= float(D);
    c2 /= float(D);
    for (int64_t i = 0; i < D; ++i) dx[n * D + i] = rstd[n] * (dy[n * D + i] * w[i] - c1 - xh[n * D + i] * c2);
  }
}

#ifdef LLMK_HAVE_DNNL
// oneDNN's layer normalization (training forward, then backward with scale
// and shift gradients), on the same buffers.
struct Dnnl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::layer_normalization_forward fwd;
  dnnl::layer_normalization_backward bwd;
  std::unordered_map<int, dnnl::memory> fargs, bargs;
  Buffer var;
  explicit Dnnl(Data& d) : var(4 * d.N) {
    using namespace dnnl;
    const memory::desc md({d.N, d.D}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc sd({d.N}, memory::data_type::f32, memory::format_tag::a);
    const memory::desc pd({d.D}, memory::data_type::f32, memory::format_tag::a);
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    const layer_normalization_forward::primitive_desc fpd(layer_normalization_forward::desc(prop_kind::forward_training,
                                                                                            md, sd, kEps, flags),
                                                          eng);
    const layer_normalization_backward::primitive_desc bpd(layer_normalization_backward::desc(prop_kind::backward, md,
                                                                                              md, sd, kEps, flags),
                                                           eng, fpd);
    fwd = layer_normalization_forward(fpd);
    bwd = layer_normalization_backward(bpd);
    auto m = [&](const memory::desc& dd, const Buffer& p) { return memory(dd, eng, p.data()); };
    fargs = {{DNNL_ARG_SRC, m(md, d.x)},      {DNNL_ARG_DST, m(md, d.y)},   {DNNL_ARG_MEAN, m(sd, d.mean)},
             {DNNL_ARG_VARIANCE, m(sd, var)}, {DNNL_ARG_SCALE, m(pd, d.w)}, {DNNL_ARG_SHIFT, m(pd, d.b)}};
    bargs = {{DNNL_ARG_SRC, m(md, d.x)},       {DNNL_ARG_DIFF_DST, m(md, d.dy)},   {DNNL_ARG_MEAN, m(sd, d.mean)},
             {DNNL_ARG_VARIANCE, m(sd, var)},  {DNNL_ARG_SCALE, m(pd, d.w)},       {DNNL_ARG_SHIFT, m(pd, d.b)},
             {DNNL_ARG_DIFF_SRC, m(md, d.dx)}, {DNNL_ARG_DIFF_SCALE, m(pd, d.dw)}, {DNNL_ARG_DIFF_SHIFT, m(pd, d.db)}};
  }
  void run_fwd() {
    fwd.execute(strm, fargs);
    strm.wait();
  }
  void run_bwd() {
    bwd.execute(strm, bargs);
    strm.wait();
  }
};
#endif

int run(const Options& opt) {
  Reporter rep(opt, "layernorm",
               "bytes = minimum traffic: fwd reads x + writes y = 2*N*D*4, bwd reads x, dy + writes dx = 3*N*D*4 "
               "(f32; stats and weights not counted). Triad: 3*8 bytes per element, no write-allocate.");
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  set_num_threads(threads);
  omp_set_num_threads(threads);  // oneDNN and the naive version use OpenMP's default team
  const double min_s = opt.quick ? 0.02 : 0.3;
  const std::vector<std::pair<int64_t, int64_t>> shapes =
      opt.quick ? std::vector<std::pair<int64_t, int64_t>>{{256, 1024}, {1024, 4096}}
                : std::vector<std::pair<int64_t, int64_t>>{{1024, 1024}, {8192, 1024}, {16384, 4096}};
  rep.note("threads " + std::to_string(threads) + "; " +
           (opt.quick ? "--quick: small shapes, few reps (a smoke test)" : "16384x4096 f32 is 256 MiB per tensor"));

  const Row tr = triad_row("layernorm", threads, opt.quick);
  const double triad = tr.gbps;
  rep.add(tr);

  std::string shape_list;
  for (const auto& [N, D] : shapes) shape_list += (shape_list.empty() ? "" : ",") + shape_str({N, D});
  // Rounds: llmk, oneDNN and naive over every shape, then the torch peer, in
  // turn (3 rounds, 1 with --quick); each row reports its median round.
  const int rounds = opt.quick ? 1 : 3;
  std::vector<std::vector<Row>> all;
  std::string why;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Row> rows;
    for (const auto& [N, D] : shapes) {
      const std::string shape = shape_str({N, D});
      Data d(N, D);
      const double fb = 2.0 * double(d.bytes()), bb = 3.0 * double(d.bytes());
      auto add = [&](const char* impl, const char* op, double ms, double bytes) {
        rows.push_back(Row{"layernorm", impl, op, shape, "f32", ms, bytes / (ms * 1e6), {}});
      };
      llmk_fwd(d);  // stats for every backward below
      // The implementations in turns within the round (interleaved_median_ms):
      // a slow phase of this shared machine then hits each of them alike.
      struct Fn {
        const char* impl;
        const char* op;
        double bytes;
        std::function<void()> fn;
      };
      std::vector<Fn> fns = {{"llmk", "fwd", fb, [&] { llmk_fwd(d); }}, {"llmk", "bwd", bb, [&] { llmk_bwd(d); }}};
#ifdef LLMK_HAVE_DNNL
      Dnnl dn(d);
      fns.push_back({"onednn", "fwd", fb, [&] { dn.run_fwd(); }});
      fns.push_back({"onednn", "bwd", bb, [&] { dn.run_bwd(); }});
#endif
      fns.push_back({"naive", "fwd", fb, [&] { naive_fwd(d); }});
      fns.push_back({"naive", "bwd", bb, [&] { naive_bwd(d); }});
      std::vector<std::function<void()>> calls;
      for (const Fn& f : fns) calls.push_back(f.fn);
      const std::vector<double> ms = interleaved_median_ms(calls, 6, min_s / 6);
      for (size_t i = 0; i < fns.size(); ++i) add(fns[i].impl, fns[i].op, ms[i], fns[i].bytes);
    }
    all.push_back(std::move(rows));
    if (why.empty()) {  // a peer that failed once is not retried
      auto peer = run_python_peer("bench/norm/peer_torch.py",
                                  {"--shapes", shape_list, "--dtype", "f32", "--threads", std::to_string(threads),
                                   "--min-seconds", opt.quick ? "0.02" : "0.3"},
                                  &why);
      if (!peer.empty()) all.push_back(std::move(peer));
    }
  }
#ifndef LLMK_HAVE_DNNL
  rep.note("onednn skipped: not found at build time (apt-get install libdnnl-dev)");
#endif
  if (!why.empty()) rep.note("torch skipped: " + why);
  for (Row r : median_rounds(all)) {
    r.extra["x_triad"] = std::to_string(r.gbps / triad);
    rep.add(r);
  }
  rep.ratios("llmk", {"onednn", "torch", "naive"});
  return 0;
}

}  // namespace
LLMK_BENCH("layernorm", "LayerNorm fwd/bwd on the CPU: llmk vs oneDNN, PyTorch, naive unfused, triad", run);
}  // namespace llmk::bench
