// `llmk generate`: generates from one prompt (streamed as it comes) or many (--prompts: one
// per line, all batched through the engine; outputs printed in order), then a throughput
// line on stderr. --json prints one object per prompt (ids, text, finish) and one with the
// stats; --dump-logits writes each prompt's next-token logits (f32, [prompts, n_vocab]) first.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include "llmk/grammar.hpp"
#include "model_cli.hpp"

namespace {
using namespace llmk;
using namespace llmk::cli;

constexpr const char* kKvType = "f16";

int run_generate(Args& args) {
  const std::vector<std::string>& pos = args.positional();
  const int64_t n = n_arg(args);
  const std::string model = model_arg(args);
  const bool json = args.flag("json");
  std::vector<std::string> prompts;
  if (args.has("prompts")) {
    const std::string file = args.get("prompts");
    std::istringstream in(read_text_file("generate", "--prompts", file));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
    LLMK_CHECK_ARG(!prompts.empty(), "generate", "--prompts", file,
                   "holds no prompt (one per line, blank lines skipped)");
  }
  if (args.has("prompt")) prompts.push_back(args.get("prompt"));
  if (!pos.empty()) {
    std::string text;
    for (const auto& p : pos) text += (text.empty() ? "" : " ") + p;
    prompts.push_back(text);
  }
  Request base;
  base.max_tokens = n;
  base.sampling.temperature = temp_arg(args);
  base.sampling.top_k = top_k_arg(args, base.sampling.temperature > 0 ? 40 : 0);
  base.sampling.top_p = top_p_arg(args);
  base.seed = seed_arg(args);
  if (args.has("stop")) base.stop.push_back(args.get("stop"));
  // Structured output: the grammar is compiled before the model loads, so a bad file fails fast.
  std::shared_ptr<const Grammar> grammar;
  for (const char* opt : {"json-schema", "grammar"}) {
    if (!args.has(opt)) continue;
    LLMK_CHECK_ARG(!grammar, "generate", std::string("--") + opt, args.get(opt),
                   "cannot be combined with --json-schema / --grammar");
    const std::string text = read_text_file("generate", std::string("--") + opt, args.get(opt));
    try {
      grammar = std::string(opt) == "grammar" ? grammar_from_gbnf(text) : grammar_from_json_schema(text);
    } catch (const GrammarError& e) {
      LLMK_CHECK_ARG(false, "generate", std::string("--") + opt, args.get(opt), e.what());
    }
  }
  EngineConfig ec;
  kv_args(args, kKvType, ec);
  ec.max_seqs = args.get_int("max-seqs");
  ec.spec.mode = parse_spec_mode(args.get("spec"), "--spec");
  const int64_t kv_tokens = args.get_int("kv-tokens");  // 0: sized from the prompts and -n
  const std::string dump = args.get("dump-logits");
  threads_arg(args);
  args.finish();
  LLMK_CHECK_ARG(!prompts.empty(), "generate", "--prompt", "(missing)", "give --prompt TEXT, --prompts FILE or TEXT");

  LoadedModel lm(model_path(model));
  if (grammar) base.constraint = std::make_shared<GrammarConstraint>(grammar, TokenVocab::of(lm.tok));
  std::vector<Request> reqs;
  int64_t need = 0;
  for (const auto& p : prompts) {
    Request r = base;
    r.prompt = lm.tok.encode(p, true, lm.tok.add_bos());
    LLMK_CHECK_ARG(!r.prompt.empty(), "generate", "prompt", p, "encodes to no tokens");
    // -n counts up to the cap only, so `need` cannot overflow
    const int64_t tokens = int64_t(r.prompt.size()) + std::min(n, kAutoKvTokens);
    need = std::min(need + (tokens + ec.block_tokens) / ec.block_tokens * ec.block_tokens, kAutoKvTokens);
    reqs.push_back(std::move(r));
  }
  ec.kv_tokens = kv_tokens > 0 ? kv_tokens : need;
  if (!dump.empty()) {
    std::FILE* f = std::fopen(dump.c_str(), "wb");
    LLMK_CHECK_ARG(f, "generate", "--dump-logits", dump, "cannot be written");
    const int64_t V = lm.model.config().n_vocab;
    for (const auto& r : reqs) {
      std::vector<float> lg(r.prompt.size() * size_t(V));
      forward_sequence(lm.model, ec, r.prompt, lg.data());
      std::fwrite(lg.data() + (r.prompt.size() - 1) * size_t(V), sizeof(float), size_t(V), f);
    }
    std::fclose(f);
  }
  // GPT-2 rejects positions past n_ctx (learned embeddings: Engine::submit);
  // RoPE models run on, but past their trained context the output degrades.
  const int64_t n_ctx = lm.model.config().n_ctx;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (lm.model.config().arch != Arch::gpt2 && n > n_ctx - int64_t(reqs[i].prompt.size()))
      std::fprintf(stderr,
                   "warning: prompt %zu (%zu tokens) + -n %lld passes the model's trained context (n_ctx = %lld); "
                   "tokens past it may degrade\n",
                   i, reqs[i].prompt.size(), static_cast<long long>(n), static_cast<long long>(n_ctx));
  Engine eng(lm.model, &lm.tok, ec);
  for (const auto& r : reqs) eng.submit(r);  // a copy: the JSON output reads reqs[i].prompt
  const bool stream = reqs.size() == 1 && !json;
  const auto outs = eng.run([&](const Event& e) {
    if (stream) {
      std::fputs(e.text.c_str(), stdout);
      std::fflush(stdout);
    }
  });
  const EngineStats& st = eng.stats();
  for (size_t i = 0; i < outs.size() && !stream; ++i) {
    const Output& o = outs[i];
    if (json) {
      std::string ids;
      for (size_t j = 0; j < o.tokens.size(); ++j) ids += (j ? ", " : "") + std::to_string(o.tokens[j]);
      std::printf(
          "{\"id\": %lld, \"prompt\": %s, \"prompt_tokens\": %zu, \"tokens\": [%s], \"text\": %s, \"finish\": \"%s\", "
          "\"preemptions\": %lld}\n",
          (long long)o.id, json_str(prompts[i]).c_str(), reqs[i].prompt.size(), ids.c_str(), json_str(o.text).c_str(),
          finish_name(o.finish), (long long)o.preemptions);
    } else {
      std::printf("--- [%zu] %s\n%s\n", i, prompts[i].c_str(), o.text.c_str());
    }
  }
  if (stream) std::printf("\n");
  std::fflush(stdout);
  const double pf = st.prefill_seconds > 0 ? st.prefill_tokens / st.prefill_seconds : 0;
  const double dc = st.decode_seconds > 0 ? st.decode_generated / st.decode_seconds : 0;
  if (json)
    std::printf(
        "{\"type\": \"stats\", \"prefill_tokens\": %lld, \"prefill_tok_s\": %.2f, \"decode_tokens\": %lld, "
        "\"decode_tok_s\": %.2f, \"preemptions\": %lld, \"kv_type\": \"%s\", \"threads\": %d, \"spec\": \"%s\", "
        "\"drafted_tokens\": %lld, \"accepted_tokens\": %lld}\n",
        (long long)st.prefill_tokens, pf, (long long)st.decode_generated, dc, (long long)st.preemptions,
        kv_cli_name(ec, false).c_str(), num_threads(), spec_mode_name(ec.spec.mode), (long long)st.drafted_tokens,
        (long long)st.accepted_tokens);
  std::fprintf(stderr,
               "prefill: %lld tokens, %.1f tok/s | decode: %lld tokens, %.1f tok/s | %zu sequences, kv %s, %d "
               "threads\n",
               (long long)st.prefill_tokens, pf, (long long)st.decode_generated, dc, outs.size(),
               kv_cli_name(ec).c_str(), num_threads());
  return 0;
}

}  // namespace
LLMK_COMMAND("generate", "generate text with a GGUF model", run_generate,
             options(model_option(), text("prompt", "TEXT", "the prompt"),
                     path("prompts", "FILE", "prompts, one a line (blank lines skipped), batched"), n_option("128"),
                     temp_option("0"), top_k_option(nullptr, "40 with --temp > 0, else 0"), top_p_option("1"),
                     seed_option(), text("stop", "STR", "end a sequence at this text"),
                     path("json-schema", "FILE", "constrain the output to JSON valid under this JSON Schema"),
                     path("grammar", "FILE", "constrain the output to this GBNF grammar (llama.cpp's format)"),
                     flag("json", "print one JSON object per prompt and one with the stats"), kv_options(kKvType),
                     integer("kv-tokens", "N", "KV cache size in tokens (0: sized from the prompts and -n)")
                         .range(0, INT64_MAX)
                         .def("0"),
                     integer("max-seqs", "N", "sequences decoded together at most").def("64"),
                     path("dump-logits", "FILE", "write each prompt's next-token logits (f32) to FILE first"),
                     text("spec", "MODE",
                          "speculative decoding, off or ngram (drafts from the prompt and output; the same output)")
                         .def("ngram"),
                     threads_option()),
             "TEXT...\tthe prompt (its words joined by spaces), as --prompt TEXT");
