// `llmk chat [--model PATH] [--system TEXT] [--prompt TEXT] [-n N] [--temp T] [--top-k K]
// [--top-p P] [--seed S] [--kv-type f32|f16|q8|q4] [--threads N]`: a conversation with an
// instruct model through its ChatML template (SmolLM2-Instruct's, with its default system
// prompt unless --system). Reads user turns from stdin (one line each; an empty line or EOF
// ends), streams each reply; with --prompt, answers that one message and exits. Each turn
// re-runs the whole conversation through the engine (no prefix reuse across turns yet).
#include <algorithm>
#include <iostream>

#include "model_cli.hpp"

namespace {
using namespace llmk;
using namespace llmk::cli;

int run_chat(Args& args) {
  const std::vector<std::string>& pos = args.positional();
  const int64_t n = n_arg(args, 256);
  const std::string model = model_arg(args);
  Request base;
  base.max_tokens = n;
  base.sampling.temperature = temp_arg(args, 0.7);
  base.sampling.top_k = top_k_arg(args, 40);
  base.sampling.top_p = top_p_arg(args, 0.95);
  base.seed = seed_arg(args);
  EngineConfig ec;
  kv_args(args, "f16", ec);
  const bool has_system = args.has("system");
  const std::string system = args.get("system", "");
  const bool one_shot = args.has("prompt");
  const std::string prompt = args.get("prompt", "");
  threads_arg(args);
  args.finish();
  LLMK_CHECK_ARG(pos.empty(), "chat", "positional", pos.front(), "unexpected (use --prompt TEXT)");
  // an empty line ends an interactive chat; as --prompt it was sent as a message
  LLMK_CHECK_ARG(!one_shot || !prompt.empty(), "chat", "--prompt", "\"\"", "must not be empty");
  LLMK_CHECK_ARG(n >= 1 && n <= kMaxNewTokens, "chat", "-n", n, "must be in [1, 2^31]");

  LoadedModel lm(model_path(model));
  std::vector<ChatMessage> messages;
  if (has_system) messages.push_back({"system", system});
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
    r.prompt = lm.tok.encode(render_chat(lm.tok, messages), true, lm.tok.add_bos());
    // a -n beyond the cap runs until the reply no longer fits (it overflowed, or asked for a huge cache)
    ec.kv_tokens = int64_t(r.prompt.size()) + std::min(n, kAutoKvTokens) + ec.block_tokens;
    Engine eng(lm.model, &lm.tok, ec);
    eng.submit(r);
    const Output out = eng.run([](const Event& e) {
      std::fputs(e.text.c_str(), stdout);
      std::fflush(stdout);
    })[0];
    std::fputs("\n", stdout);
    messages.push_back({"assistant", out.text});
    const EngineStats& st = eng.stats();
    std::fprintf(stderr, "[%zu prompt tokens, %.1f tok/s; %lld new tokens, %.1f tok/s; %s]\n", r.prompt.size(),
                 st.prefill_seconds > 0 ? st.prefill_tokens / st.prefill_seconds : 0.0, (long long)out.tokens.size(),
                 st.decode_seconds > 0 ? st.decode_tokens / st.decode_seconds : 0.0, finish_name(out.finish));
  }
  return 0;
}

}  // namespace
LLMK_COMMAND("chat", "chat with an instruct model (ChatML; --prompt for one turn, --system, -n, --temp)", run_chat, {"kv-rotate"});
