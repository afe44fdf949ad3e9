// `llmk chat`: a conversation with an instruct model through its own chat template
// (llmk/chat_template.hpp; SmolLM2's brings its default system prompt unless --system), or the
// family --chat-template names. Reads user turns from stdin (one line each; an empty line
// or EOF ends), streams each reply; with --prompt, answers that one message and exits. One engine
// serves the whole conversation: each turn's prompt starts with the earlier turns, whose KV blocks
// the prefix cache still holds, so a turn runs the model on its new tokens only.
#include <algorithm>
#include <iostream>

#include "llmk/chat_template.hpp"
#include "model_cli.hpp"

namespace {
using namespace llmk;
using namespace llmk::cli;

constexpr const char* kKvType = "f16";

int run_chat(Args& args) {
  const std::vector<std::string>& pos = args.positional();
  const int64_t n = n_arg(args);
  const std::string model = model_arg(args);
  Request base;
  base.max_tokens = n;
  base.sampling.temperature = temp_arg(args);
  base.sampling.top_k = top_k_arg(args);
  base.sampling.top_p = top_p_arg(args);
  base.seed = seed_arg(args);
  EngineConfig ec;
  kv_args(args, kKvType, ec);
  ec.kv_tokens = args.get_int("kv-tokens");
  ec.prefix_cache = !args.flag("no-prefix-cache");
  ec.max_seqs = 1;
  const bool has_system = args.has("system");
  const std::string system = args.get("system");
  const bool one_shot = args.has("prompt");
  const std::string prompt = args.get("prompt");
  const std::string template_name = args.get("chat-template");
  threads_arg(args);
  args.finish();
  LLMK_CHECK_ARG(pos.empty(), "chat", "positional", pos.front(), "unexpected (use --prompt TEXT)");
  // an empty line ends an interactive chat: an empty --prompt is no message either
  LLMK_CHECK_ARG(!one_shot || !prompt.empty(), "chat", "--prompt", "\"\"", "must not be empty");

  if (!template_name.empty()) ChatTemplate::from_name(template_name);  // a bad name fails before the model loads
  LoadedModel lm(model_path(model));
  const ChatTemplate tpl = chat_template_of(lm.tok, template_name);
  const ChatRenderOptions render_opts = chat_render_options(lm.tok);
  std::vector<ChatMessage> messages;
  if (has_system) messages.push_back({"system", system});
  Engine eng(lm.model, &lm.tok, ec);
  for (int turn = 0;; ++turn) {
    std::string line;
    if (one_shot) {
      if (turn > 0) break;
      line = prompt;
    } else {
      std::fputs("> ", stdout);
      std::fflush(stdout);
      if (!std::getline(std::cin, line) || line.empty()) break;
    }
    messages.push_back({"user", line});
    Request r = base;
    r.seed = base.seed + uint64_t(turn);
    r.prompt = encode_chat_prompt(lm.tok, tpl.render(messages, render_opts));
    // A reply ends when the conversation fills the cache (Finish::length).
    const EngineStats before = eng.stats();
    eng.submit(r);
    const Output out = eng.run([](const Event& e) {
      std::fputs(e.text.c_str(), stdout);
      std::fflush(stdout);
    })[0];
    std::fputs("\n", stdout);
    messages.push_back({"assistant", out.text});
    const EngineStats& st = eng.stats();
    const double ps = st.prefill_seconds - before.prefill_seconds, ds = st.decode_seconds - before.decode_seconds;
    std::fprintf(stderr, "[%zu prompt tokens (%lld cached), %.1f tok/s; %lld new tokens, %.1f tok/s; %s]\n",
                 r.prompt.size(), (long long)out.cached_tokens,
                 ps > 0 ? double(st.prefill_tokens - before.prefill_tokens) / ps : 0.0, (long long)out.tokens.size(),
                 ds > 0 ? double(st.decode_tokens - before.decode_tokens) / ds : 0.0, finish_name(out.finish));
  }
  return 0;
}

}  // namespace
LLMK_COMMAND("chat", "chat with an instruct model through its chat template (--prompt: one turn)", run_chat,
             options(model_option(),
                     text("system", "TEXT", "the system message").shown_default("the template's own, if any"),
                     text("prompt", "TEXT", "answer this one user message and exit (not empty)")
                         .shown_default("turns read from stdin"),
                     text("chat-template", "NAME|FILE", "a built-in chat template (chatml, gemma3) or a Jinja file")
                         .shown_default("the model's own"),
                     n_option("256"), temp_option("0.7"), top_k_option("40"), top_p_option("0.95"), seed_option(),
                     kv_options(kKvType),
                     integer("kv-tokens", "N", "KV cache size in tokens: the whole conversation")
                         .range(1, kAutoKvTokens)
                         .def("8192"),
                     flag("no-prefix-cache", "run every turn's prompt in full"), threads_option()));
