// `llmk info`: what this build and machine offer (SIMD level, threads, CUDA);
// with --model, what a GGUF file holds: its architecture and shapes as llmk reads them, its
// tensor types, its tokenizer and chat template (each line says when llmk cannot use it).
#include <cstdio>
#include <map>

#include "cli.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/cuda.hpp"
#include "llmk/parallel.hpp"
#include "model_cli.hpp"

namespace {
using namespace llmk;

void model_info(const std::string& path) {
  const gguf::File f = gguf::File::open(path);
  const std::string arch(f.get_string_or("general.architecture", "(none)"));
  std::printf("file: %s (GGUF v%u, %zu tensors)\n", f.path().c_str(), f.version(), f.tensors().size());
  std::printf("name: %s\n", f.get_string_or("general.name", "(none)").c_str());
  std::printf("architecture: %s\n", arch.c_str());
  try {
    const Model m = Model::from_gguf(f);
    const ModelConfig& c = m.config();
    std::printf(
        "shapes: n_vocab %lld, n_ctx %lld, d_model %lld, n_layer %lld, n_head %lld, n_head_kv %lld, "
        "d_head %lld, d_ff %lld\n",
        (long long)c.n_vocab, (long long)c.n_ctx, (long long)c.d_model, (long long)c.n_layer, (long long)c.n_head,
        (long long)c.n_head_kv, (long long)c.d_head(), (long long)c.d_ff);
    std::printf("norm eps %g, tied embeddings %s", double(c.norm_eps), c.tied ? "yes" : "no");
    if (c.rope_dim > 0)
      std::printf(", rope: %lld dims, base %g, freq scale %g, attn factor %g", (long long)c.rope_dim,
                  double(c.rope_base), double(c.rope_freq_scale), double(c.rope_attn_factor));
    if (c.sliding_window > 0) std::printf(", sliding window %lld", (long long)c.sliding_window);
    std::printf("\nweights: %.1f MiB read per forward\n", double(m.weight_bytes()) / (1 << 20));
    if (c.n_expert > 0)
      std::printf("experts: %lld a layer, %lld a token, width %lld; %.1f MiB of weights read per token\n",
                  (long long)c.n_expert, (long long)c.n_expert_used, (long long)c.d_ff_expert(),
                  double(m.token_weight_bytes()) / (1 << 20));
  } catch (const std::exception& e) {
    std::printf("model: llmk cannot run it: %s\n", e.what());
  }
  std::map<std::string, std::pair<int64_t, int64_t>> types;  // type -> (tensors, bytes)
  for (const gguf::TensorInfo& t : f.tensors()) {
    auto& e = types[gguf::ggml_type_name(t.type)];
    ++e.first;
    e.second += t.n_bytes;
  }
  std::printf("tensor types:");
  for (const auto& [name, e] : types)
    std::printf(" %s x%lld (%.1f MiB)", name.c_str(), (long long)e.first, double(e.second) / (1 << 20));
  std::printf("%s\n", types.empty() ? " (none)" : "");
  const std::string tm(f.get_string_or("tokenizer.ggml.model", "(none)")),
      pre(f.get_string_or("tokenizer.ggml.pre", ""));
  const size_t n_tok = f.has("tokenizer.ggml.tokens") ? f.get_strings("tokenizer.ggml.tokens").size() : 0;
  std::printf("tokenizer: %s%s%s, %zu tokens, bos %lld, eos %lld", tm.c_str(), pre.empty() ? "" : ", pre-tokenizer ",
              pre.c_str(), n_tok, (long long)f.get_int_or("tokenizer.ggml.bos_token_id", -1),
              (long long)f.get_int_or("tokenizer.ggml.eos_token_id", -1));
  try {
    (void)Tokenizer::from_gguf(f);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::printf(" (llmk cannot use it: %s)\n", e.what());
  }
  const std::string tpl(f.get_string_or("tokenizer.chat_template", ""));
  if (tpl.empty()) {
    std::printf("chat template: (none)\n");
  } else {
    std::string head = tpl.substr(0, 72);
    for (char& ch : head)
      if (ch == '\n') ch = ' ';
    std::printf("chat template: %zu bytes: %s%s\n", tpl.size(), head.c_str(), tpl.size() > 72 ? "..." : "");
  }
}

int run_info(cli::Args& args) {
  const bool with_model = args.has("model");
  const std::string model = with_model ? cli::model_arg(args) : "";
  args.finish();
  args.no_positionals("info", "info takes no arguments but --model F");
  std::printf("simd: %s (cpu %s%s)\n", llmk::simd_name(llmk::simd_level()), llmk::simd_name(llmk::cpu_simd_level()),
              llmk::detected_simd_level() < llmk::cpu_simd_level() ? ", capped by LLMK_SIMD" : "");
  std::printf("threads: %d\n", llmk::num_threads());
  const int n = llmk::cuda_device_count();
  std::printf("cuda: %s, %d device(s)%s%s\n", llmk::cuda_compiled() ? "compiled" : "not compiled", n,
              n ? ", device 0: " : "", n ? llmk::cuda_device_name(0).c_str() : "");
  if (with_model) model_info(cli::model_path(model));
  return 0;
}
}  // namespace
LLMK_COMMAND("info", "print the build's SIMD level, threads and CUDA devices; --model F: what a GGUF file holds",
             run_info, llmk::cli::options(llmk::cli::model_option().shown_default("none: no model is read")));
