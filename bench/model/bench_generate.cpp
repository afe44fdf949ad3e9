// `llmk bench generate`: the engine against llama.cpp (llama-cpp-python, the same GGUF file,
// the same thread count, f16 KV cache on both sides, greedy):
//   prefill  one 512-token prompt (32 with --quick), time to its first logits;
//   decode_b1, decode_b8, decode_b32: 64 decode steps (4 with --quick) of one sequence after
//   that prompt, 32 (2) of 8 and of 32 concurrent sequences after 16-token prompts; aggregate tok/s;
//   decode_b1_long: 32 decode steps of one sequence after a 2048-token prompt, where
//   attention over the cache is a visible part of each step (not with --quick); llmk also
//   runs it with an int8 and an int4 KV cache (dtype "kv int8", "kv int4"; a note gives their
//   speed over f16's);
//   peak_rss_mb (every row): the process's peak resident set so far (llmk: this process, before
//   the peer runs; llama.cpp: the peer process).
// --model SHAPE (llama3-8b, qwen2.5-7b; synth_model.hpp) with --weights q4_k_m|q4_0|q8_0: a
// random-weight file of that real model's shapes and tokenizer, written once into the cache;
// rows prefill 512, decode_b1 (64 steps), decode_b8 (16 steps), decode_b1_long (16 steps
// after a 4096-token prompt, f16 KV only), one round; --quick: the shape with 1 layer, a
// 16-token prompt, 2 decode steps, 1 step of batch 8, no long row. --only decode_b8,... keeps
// those optional rows (prefill and decode_b1 always run).
// Bytes: the weight bytes a forward streams (every matrix; an untied token embedding, of
// which a forward reads one row a token, is left out), so gbps = those bytes x forwards /
// time (KV reads not counted), and bw_frac = gbps over the triad row's (the machine's
// streaming bandwidth, measured in the same run). Default model: scripts/fetch-model;
// --model NAME|PATH another (gemma-3-270m); without the default a random Llama model of its
// shape is run by llmk alone (peer skipped). --quick runs a 2-layer random model of that
// width (vocabulary 4096), llmk only; --quick --model runs that model, and its peer, at the
// quick sizes (one round, no long row).
// The vocabulary's share of a decode step (a real model only, impl "llmk-part"): the output
// matmul (the final normed activations [B, d] times the output weight, [V, d]) and the
// engine's per-row sampling (the defined-max check and sample(), greedy as the rows above) of
// B = 1 and 8 rows, timed alone in turns, as a share of the decode_b1 / decode_b8 step.
// median_ms is the time per forward. The rows run in 3 rounds (1 with --quick), llmk's round
// then the peer's, in turn, and each row reports its median round: on a shared machine whose
// speed drifts, both sides then see the same mix of quiet and loaded phases.
// ISA: llmk picks its SIMD level at run time (`simd` column); scripts/setup-peers builds
// llama.cpp for AVX2 + FMA + F16C (its `isa` column), so where llmk runs AVX-512 each round
// also runs llmk capped at AVX2 (impl llmk-avx2), the comparison at the same ISA.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>

#include "bench/common/bench.hpp"
#include "bench/model/synth_model.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/engine.hpp"
#include "llmk/ggml_quants.hpp"
#include "llmk/gguf.hpp"
#include "llmk/parallel.hpp"
#include "llmk/sample.hpp"
#include "llmk/tokenizer.hpp"
#include "sample/sample_math.hpp"

namespace llmk::bench {
namespace {

ModelConfig smollm_like(bool quick) {
  ModelConfig c;
  c.n_vocab = quick ? 4096 : 49152;
  c.n_ctx = 8192;
  c.d_model = 576;
  c.n_layer = quick ? 2 : 30;
  c.n_head = 9;
  c.n_head_kv = 3;
  c.d_ff = 1536;
  c.rope_base = 100000.0f;
  return c;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// The output matmul and the sampler of B = 1 and 8 rows, timed alone (interleaved), and their
// share of llmk's decode_b1 / decode_b8 step (rows of `med`).
void vocab_share(Reporter& rep, const gguf::File& f, const Model& m, const std::vector<Row>& med, bool quick) {
  const ModelConfig& c = m.config();
  const gguf::TensorInfo& t = f.find_tensor("output.weight") ? f.tensor("output.weight")
                                                             : f.tensor("token_embd.weight");
  const WTypeTraits* tr = wtype_traits_for_ggml(uint32_t(t.type));
  if (!tr) return;
  const WeightView w{t.data, tr->type, c.n_vocab, c.d_model, t.row_bytes};
  const int64_t V = c.n_vocab, d = c.d_model;
  std::vector<float> x(size_t(8 * d)), logits(size_t(8 * V));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int64_t(i * 2654435761u % 2001) - 1000) / 1000.0f;
  matmul(x.data(), d, w, logits.data(), V, 8);  // realistic logits for the sampler
  SamplingParams sp{0.0f};                      // greedy, as the decode rows
  std::vector<int32_t> tok(8);
  uint64_t step = 0;
  const auto sample_rows = [&](int64_t B) {
    for (int64_t b = 0; b < B; ++b) {  // as the engine: the defined-max check, then sample() of one row
      const float* row = logits.data() + b * V;
      if (!std::isnan(sample_math::defined_max(row, V)))
        sample(TensorView::matrix(row, DType::f32, 1, V), &sp, nullptr, 1, step++, &tok[size_t(b)]);
    }
  };
  const std::vector<std::function<void()>> fns = {[&] { matmul(x.data(), d, w, logits.data(), V, 1); },
                                                  [&] { sample_rows(1); },
                                                  [&] { matmul(x.data(), d, w, logits.data(), V, 8); },
                                                  [&] { sample_rows(8); }};
  const std::vector<double> ms = interleaved_median_ms(fns, quick ? 1 : 7, quick ? 0.002 : 0.05);
  const char* ops[] = {"output_matmul", "sampler", "output_matmul", "sampler"};
  for (size_t i = 0; i < 4; ++i) {
    const int64_t B = i < 2 ? 1 : 8;
    rep.add({"generate",
             "llmk-part",
             ops[i],
             std::to_string(B) + " rows",
             std::string(wtype_name(w.type)) + " [" + std::to_string(V) + ", " + std::to_string(d) + "]",
             ms[i],
             i % 2 ? 0.0 : double(t.n_bytes) / (ms[i] * 1e6),
             {{"simd", simd_name(simd_level())}}});
  }
  for (int64_t B : {int64_t(1), int64_t(8)})
    for (const Row& r : med)
      if (r.impl == "llmk" && r.op == "decode_b" + std::to_string(B)) {
        const size_t i = B == 1 ? 0 : 2;
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "decode_b%lld step %.3f ms: output matmul %.3f ms (%.0f%%), sampler %.3f ms (%.0f%%), the rest "
                      "%.0f%%",
                      static_cast<long long>(B), r.median_ms, ms[i], 100 * ms[i] / r.median_ms, ms[i + 1],
                      100 * ms[i + 1] / r.median_ms, 100 * (1 - (ms[i] + ms[i + 1]) / r.median_ms));
        rep.note(buf);
      }
}

int run(const Options& opt) {
  Reporter rep(opt, "generate",
               "tok/s = tokens / wall time; gbps = model weight bytes x forwards / time (KV reads not counted); "
               "bw_frac = gbps / the triad row's GB/s; median_ms = time per forward; greedy, f16 KV; each row the "
               "median of its rounds (llmk and the peer in turn)");
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  set_num_threads(threads);
  const SynthShape* shape = synth_shape(opt.model);
  LLMK_CHECK_ARG(opt.weights.empty() || shape, "bench generate", "--weights", opt.weights,
                 "needs --model SHAPE (" + synth_shape_names() + ")");
  // A real-scale shape: prefill 512, decode 64 steps, batch 8, batch 1 after 4096 tokens, one
  // round (an 8B model takes minutes a row on 2 cores); --quick: the shape with 1 layer, 16
  // prompt tokens, 2 decode steps, 1 step of batch 8, no long row.
  const int64_t plen = opt.quick ? (shape ? 16 : 32) : 512, dn = opt.quick ? (shape ? 2 : 4) : 64;
  const int64_t bn = opt.quick ? (shape ? 1 : 2) : (shape ? 16 : 32);
  const int64_t lplen = opt.quick ? 0 : (shape ? 4096 : 2048), ln = shape ? 16 : 32;  // the long-context decode row
  const auto wanted = [&](const std::string& op) {  // --only: the optional rows to run
    return opt.only.empty() || std::find(opt.only.begin(), opt.only.end(), op) != opt.only.end();
  };
  for (const std::string& o : opt.only)
    LLMK_CHECK_ARG(o == "decode_b8" || o == "decode_b32" || o == "decode_b1_long", "bench generate", "--only", o,
                   "must be decode_b8, decode_b32 or decode_b1_long (prefill and decode_b1 always run)");
  std::vector<int64_t> batches;
  for (const int64_t b : shape ? std::vector<int64_t>{8} : std::vector<int64_t>{8, 32})
    if (wanted("decode_b" + std::to_string(b))) batches.push_back(b);
  const int64_t long_len = wanted("decode_b1_long") ? lplen : 0;
  const std::string path = shape                ? synth_model_file(*shape, opt.weights.empty() ? "q4_k_m" : opt.weights,
                                                    opt.quick ? 1 : 0)
                           : !opt.model.empty() ? gguf::resolve_model(opt.model)
                           : opt.quick          ? ""
                                                : gguf::default_model_path();
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Model> model;
  std::vector<int32_t> ids;
  if (!path.empty()) {
    file = std::make_unique<gguf::File>(gguf::File::open(path));
    model = std::make_unique<Model>(Model::from_gguf(*file));
    const Tokenizer tok = Tokenizer::from_gguf(*file);
    std::ifstream in("/usr/share/common-licenses/GPL-3");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.empty()) text = "The quick brown fox jumps over the lazy dog. ";
    while (int64_t(ids.size()) < std::max<int64_t>({plen, 16 * 32, lplen})) {
      const auto more = tok.encode(text, false);
      ids.insert(ids.end(), more.begin(), more.end());
    }
  } else {
    rep.note(opt.quick ? "--quick: a 2-layer random model of SmolLM2's width, llmk only"
                       : "default model not found (scripts/fetch-model): a random model of SmolLM2's shape, llmk only");
    model = std::make_unique<Model>(Model::random(smollm_like(opt.quick), WType::q4_1, 1));
    for (int64_t i = 0; i < std::max(16 * 32 + plen, lplen); ++i)
      ids.push_back(int32_t((i * 7919) % model->config().n_vocab));
  }
  // The bytes a forward streams: every matrix, but an untied embedding, of which a forward reads a row a token.
  double wbytes = double(model->weight_bytes());
  if (file && file->find_tensor("output.weight") && file->find_tensor("token_embd.weight"))
    wbytes -= double(file->tensor("token_embd.weight").n_bytes);
  std::string dtype = "kv f16";
  std::vector<Row> round;  // the rows of the current round
  std::string impl = "llmk";
  auto add = [&](const std::string& op, const std::string& shape, double seconds, int64_t tokens, int64_t forwards) {
    Row r{
        "generate", impl, op, shape, dtype, 1e3 * seconds / double(forwards), wbytes * double(forwards) / seconds / 1e9,
        {}};
    r.extra["simd"] = simd_name(simd_level());
    r.extra["tok_s"] = std::to_string(double(tokens) / seconds);
    r.extra["threads"] = std::to_string(threads);
    r.extra["peak_rss_mb"] = std::to_string(peak_rss_mb());
    round.push_back(r);
  };
  EngineConfig ec;
  ec.kv_type = KvType::f16;
  ec.kv_tokens = std::max<int64_t>({plen + dn, 32 * (16 + bn), lplen + ln}) + 64;
  auto run_batch = [&](int64_t b, int64_t prompt_len, int64_t n) {
    Engine e(*model, nullptr, ec);
    for (int64_t s = 0; s < b; ++s) {
      Request r;
      const int64_t off = b == 1 ? 0 : s * 16;
      r.prompt.assign(ids.begin() + off, ids.begin() + off + prompt_len);
      r.max_tokens = n;
      e.submit(r);
    }
    e.run();
    return e.stats();
  };
  run_batch(1, 16, 2);  // warm-up: pages in the weights
  const auto llmk_round = [&] {
    round.clear();
    {
      const auto t0 = std::chrono::steady_clock::now();
      run_batch(1, plen, 1);
      add("prefill", std::to_string(plen), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          plen, 1);
    }
    {
      const EngineStats st = run_batch(1, plen, dn + 1);
      add("decode_b1", "1x" + std::to_string(dn), st.decode_seconds, st.decode_tokens, st.steps - 1);
    }
    for (int64_t b : batches) {
      const EngineStats st = run_batch(b, 16, bn + 1);
      add("decode_b" + std::to_string(b), std::to_string(b) + "x" + std::to_string(bn), st.decode_seconds,
          st.decode_tokens, st.steps - 1);
    }
    if (long_len > 0)
      for (const KvType t :
           shape ? std::vector<KvType>{KvType::f16} : std::vector<KvType>{KvType::f16, KvType::int8, KvType::int4}) {
        ec.kv_type = t;
        dtype = std::string("kv ") + kv_type_name(t);
        const EngineStats st = run_batch(1, long_len, ln + 1);
        add("decode_b1_long", "1x" + std::to_string(ln) + "@" + std::to_string(long_len), st.decode_seconds,
            st.decode_tokens, st.steps - 1);
      }
    ec.kv_type = KvType::f16;
    dtype = "kv f16";
    return round;
  };
  std::string ids_path;
  if (file) {
    ids_path = "/tmp/llmk_bench_generate_ids.txt";
    std::ofstream out(ids_path);
    for (int32_t t : ids) out << t << ' ';
    setenv("WEIGHT_BYTES", std::to_string(int64_t(wbytes)).c_str(), 1);
  }
  const int rounds = opt.quick || shape ? 1 : 3;
  if (file && std::getenv("LLMK_SET_GOMP_SPINCOUNT")) {  // the CLI's OpenMP wait (tools/llmk/main.cpp), not the peer's
    unsetenv("GOMP_SPINCOUNT");
    rep.note("llama.cpp runs with libgomp's default OpenMP wait; llmk with the CLI's GOMP_SPINCOUNT");
  }
  std::vector<std::vector<Row>> all;  // every round's rows, llmk's and the peer's
  std::string why;
  const bool also_avx2 = simd_level() > SimdLevel::avx2;
  std::string batch_list;
  for (const int64_t b : batches) batch_list += (batch_list.empty() ? "" : ",") + std::to_string(b);
  for (int r = 0; r < rounds; ++r) {
    impl = "llmk";
    all.push_back(llmk_round());
    if (also_avx2) {
      ScopedSimdLimit cap(SimdLevel::avx2);
      impl = "llmk-avx2";
      all.push_back(llmk_round());
    }
    if (file && why.empty()) {
      auto peer = run_python_peer("bench/model/peer_llamacpp.py",
                                  {path, ids_path, std::to_string(threads), std::to_string(plen), std::to_string(dn),
                                   batch_list, std::to_string(bn), std::to_string(long_len), std::to_string(ln)},
                                  &why);
      if (!peer.empty()) all.push_back(std::move(peer));
    }
  }
  std::vector<Row> med = median_rounds(all);
  const Row triad = triad_row("generate", threads, opt.quick);
  rep.add(triad);
  for (Row& m : med) {
    m.extra["bw_frac"] = std::to_string(triad.gbps > 0 ? m.gbps / triad.gbps : 0.0);
    rep.add(m);
  }
  for (const std::string who : {"llmk", "llmk-avx2"}) {  // the KV type's effect on a long-context decode
    const auto ms = [&](const std::string& dt) {
      for (const Row& m : med)
        if (m.impl == who && m.op == "decode_b1_long" && m.dtype == dt) return m.median_ms;
      return 0.0;
    };
    const double f16 = ms("kv f16"), q8 = ms("kv int8"), q4 = ms("kv int4");
    if (f16 > 0 && q8 > 0 && q4 > 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s decode_b1_long: an int8 KV cache decodes at %.2fx f16's speed, int4 at %.2fx",
                    who.c_str(), f16 / q8, f16 / q4);
      rep.note(buf);
    }
  }
  if (file) {
    if (!why.empty()) rep.note("peer skipped: " + why);
    rep.ratios("llmk", {"llama.cpp"});
    if (also_avx2) rep.ratios("llmk-avx2", {"llama.cpp"});
    vocab_share(rep, *file, *model, med, opt.quick);
  }
  return 0;
}
}  // namespace
LLMK_BENCH("generate", "text generation: prefill, decode at batch 1/8/32, peak RSS, vs llama.cpp", run);
}  // namespace llmk::bench
