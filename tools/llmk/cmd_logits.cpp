// `llmk logits --ids "1 2 3" --out FILE`: the logits of every position of one token sequence
// (positions 0..T-1, no BOS added), f32 [T, n_vocab] row-major into FILE, through the
// engine's paged cache (forward_sequence). It reads no tokenizer, so it runs on any file the
// model loader takes; a token's logits are the same bits as when it is decoded from the
// cache (tests/model/test_forward.cpp, CachedEqualsUncached). Prints one JSON line.
#include <cstdio>
#include <sstream>

#include "model_cli.hpp"

namespace {
using namespace llmk;
using namespace llmk::cli;

constexpr const char* kKvType = "f32";

int run_logits(Args& args) {
  const std::string model = model_arg(args);
  const std::string ids_arg = args.get("ids"), out = args.get("out");
  EngineConfig kv;
  kv_args(args, kKvType, kv);
  threads_arg(args);
  args.finish();
  args.no_positionals("logits", "the tokens are --ids \"1 2 3\"");
  LLMK_CHECK_ARG(args.has("out"), "logits", "--out", "(missing)", "give the file the logits go to");
  std::vector<int32_t> ids;
  std::string s = ids_arg;
  for (char& ch : s)
    if (ch == ',') ch = ' ';
  std::istringstream in(s);
  for (std::string w; in >> w;) {
    char* end = nullptr;
    const long long v = std::strtoll(w.c_str(), &end, 10);
    LLMK_CHECK_ARG(*end == '\0' && v >= 0 && v <= INT32_MAX, "logits", "--ids", w, "must be token ids >= 0");
    ids.push_back(int32_t(v));
  }
  LLMK_CHECK_ARG(!ids.empty(), "logits", "--ids", "\"" + ids_arg + "\"", "must hold at least one token id");

  const gguf::File file = gguf::File::open(model_path(model));
  Model m = Model::from_gguf(file);
  const int64_t V = m.config().n_vocab, T = int64_t(ids.size());
  for (int64_t i = 0; i < T; ++i)
    LLMK_CHECK_ARG(ids[size_t(i)] < V, "logits", "--ids[" + std::to_string(i) + "]", ids[size_t(i)],
                   "must be < n_vocab = " + std::to_string(V));
  kv.kv_tokens = T;
  std::vector<float> lg(size_t(T * V));
  forward_sequence(m, kv, ids, lg.data());
  std::FILE* f = std::fopen(out.c_str(), "wb");
  LLMK_CHECK_ARG(f, "logits", "--out", out, "cannot be written");
  const size_t wrote = std::fwrite(lg.data(), sizeof(float), lg.size(), f);
  const bool ok = std::fclose(f) == 0 && wrote == lg.size();
  LLMK_CHECK_ARG(ok, "logits", "--out", out, "could not be written in full");
  std::printf("{\"arch\": %s, \"tokens\": %lld, \"n_vocab\": %lld, \"kv_type\": %s}\n",
              json_str(arch_name(m.config().arch)).c_str(), static_cast<long long>(T), static_cast<long long>(V),
              json_str(kv_cli_name(kv)).c_str());
  return 0;
}
}  // namespace
LLMK_COMMAND("logits", "write the logits of every position of a token-id sequence (no tokenizer needed)", run_logits,
             options(model_option(), text("ids", "IDS", "the token ids, separated by spaces or commas"),
                     path("out", "FILE", "where the logits go: f32 [tokens, n_vocab], row-major")
                         .must("give the file the logits go to"),
                     kv_options(kKvType), threads_option()));
