// `llmk perplexity --file F`: perplexity of a text under the model with the given
// KV-cache type and, for a type other than f32, the KL divergence of its next-token distributions from the
// f32 cache's on the same tokens. Like llama.cpp's perplexity tool, the text is cut into
// chunks of --ctx tokens (default 512), each evaluated from position 0, and the second half
// of each chunk is scored (every scored token sees at least ctx/2 tokens of context).
#include <cmath>

#include "model_cli.hpp"

namespace {
using namespace llmk;
using namespace llmk::cli;

constexpr const char* kKvType = "f32";

// log-softmax of one row, in double.
void log_softmax(const float* z, int64_t V, std::vector<double>& out) {
  out.resize(size_t(V));
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(z[i]));
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(z[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < V; ++i) out[size_t(i)] = double(z[i]) - lse;
}

int run_perplexity(Args& args) {
  const std::string file = args.get("file");
  const std::string model = model_arg(args);
  EngineConfig kv;
  kv_args(args, kKvType, kv);
  const int64_t ctx = args.get_int("ctx"), max_chunks = args.get_int("chunks");  // 0: all
  const bool json = args.flag("json");
  threads_arg(args);
  args.finish();
  args.no_positionals("perplexity", "the text is --file FILE");
  LLMK_CHECK_ARG(args.has("file"), "perplexity", "--file", "(missing)", "give the text to score");
  const std::string text = read_text_file("perplexity", "--file", file);

  LoadedModel lm(model_path(model));
  const std::vector<int32_t> toks = lm.tok.encode(text, false, lm.tok.add_bos());
  int64_t chunks = int64_t(toks.size()) / ctx;
  if (max_chunks > 0) chunks = std::min(chunks, max_chunks);
  LLMK_CHECK_ARG(chunks > 0, "perplexity", "--file", file,
                 "holds " + std::to_string(toks.size()) + " tokens, fewer than --ctx = " + std::to_string(ctx));
  const int64_t V = lm.model.config().n_vocab;
  const bool kl = kv.kv_type != KvType::f32 || kv.kv_v_type.value_or(KvType::f32) != KvType::f32 || kv.kv_rotate;
  std::vector<float> lg(size_t(ctx * V)), base(kl ? size_t(ctx * V) : 0);
  std::vector<double> lp, lq;
  double nll = 0, nll_base = 0, kl_sum = 0, kl_max = 0;
  int64_t n = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const std::span<const int32_t> chunk(toks.data() + c * ctx, size_t(ctx));
    forward_sequence(lm.model, kv, chunk, lg.data());
    if (kl) forward_sequence(lm.model, EngineConfig{}, chunk, base.data());
    for (int64_t i = ctx / 2; i < ctx - 1; ++i) {
      log_softmax(lg.data() + i * V, V, lq);
      nll -= lq[size_t(chunk[size_t(i + 1)])];
      if (kl) {
        log_softmax(base.data() + i * V, V, lp);
        nll_base -= lp[size_t(chunk[size_t(i + 1)])];
        double k = 0;
        for (int64_t j = 0; j < V; ++j) k += std::exp(lp[size_t(j)]) * (lp[size_t(j)] - lq[size_t(j)]);
        kl_sum += k;
        kl_max = std::max(kl_max, k);
      }
      ++n;
    }
    if (!json)
      std::fprintf(stderr, "[%lld/%lld] ppl %.4f\n", (long long)c + 1, (long long)chunks, std::exp(nll / double(n)));
  }
  const double ppl = std::exp(nll / double(n)), ppl_base = kl ? std::exp(nll_base / double(n)) : ppl;
  if (json) {
    std::printf(
        "{\"kv_type\": \"%s\", \"kv_rotate\": %s, \"tokens_scored\": %lld, \"ctx\": %lld, \"ppl\": %.6f, \"ppl_f32\": "
        "%.6f, "
        "\"ppl_change_pct\": %.4f, \"kl_mean\": %.6g, \"kl_max\": %.6g}\n",
        kv_cli_name(kv, false).c_str(), kv.kv_rotate ? "true" : "false", (long long)n, (long long)ctx, ppl, ppl_base,
        100 * (ppl / ppl_base - 1), kl ? kl_sum / double(n) : 0.0, kl_max);
  } else {
    std::printf("kv %s: perplexity %.4f over %lld tokens (%lld chunks of %lld)\n", kv_cli_name(kv).c_str(), ppl,
                (long long)n, (long long)chunks, (long long)ctx);
    if (kl)
      std::printf("kv f32: perplexity %.4f; change %+.3f%%; KL(f32 || %s) mean %.3g, max %.3g\n", ppl_base,
                  100 * (ppl / ppl_base - 1), kv_cli_name(kv).c_str(), kl_sum / double(n), kl_max);
  }
  return 0;
}

}  // namespace
LLMK_COMMAND(
    "perplexity", "perplexity of a text file, and KL to the f32 KV cache", run_perplexity,
    options(path("file", "FILE", "the text to score").must("give the text to score"), model_option(),
            kv_options(kKvType),
            integer("ctx", "N", "tokens a chunk; the second half of each is scored").range(4, INT64_MAX).def("512"),
            integer("chunks", "N", "chunks scored at most (0: all)").range(0, INT64_MAX).def("0"),
            flag("json", "print one JSON object"), threads_option()));
