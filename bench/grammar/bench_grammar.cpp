// `llmk bench grammar`: structured-output mask time per token and compile time, llmk beside llguidance
// (peer_llguidance.py), on the schemas of bench/grammar/schemas.jsonl (gen_schemas.py) and the Llama 3
// vocabulary (llama.cpp's ggml-vocab-llama-bpe.gguf, scripts/fetch-llamacpp-vocab). One thread.
// Per schema: compile, then a random walk (seeded by the schema's line) of up to N tokens, each drawn
// uniformly from the tokens the mask allows (end-of-generation excluded; the walk ends where only it is
// left); every mask is timed. The peer replays the same tokens, so both time masks of the same states.
// Rows: mask_mean / p50 / p99 / max over all masks and compile_mean, median_ms holding the figure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <unistd.h>

#include "bench/common/bench.hpp"
#include "llmk/gguf.hpp"
#include "llmk/grammar.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Options& opt) {
  const char* cache = std::getenv("LLMK_CACHE");
  const char* home = std::getenv("HOME");
  const std::string vocab_path = (cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/llmk") +
                                 "/llamacpp-vocab/ggml-vocab-llama-bpe.gguf";
  Reporter rep(opt, "grammar",
               "figures in median_ms are the statistic named by op, in ms: mask_* over every mask of every walk, "
               "compile_mean per schema; one thread");
  if (!std::ifstream(vocab_path)) {
    rep.note("skipped: " + vocab_path + " not found (run scripts/fetch-llamacpp-vocab)");
    return 0;
  }
  const gguf::File f = gguf::File::open(vocab_path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const auto vocab = TokenVocab::of(tok);
  std::vector<std::string> schemas;
  {
    std::ifstream in(source_dir() + "/bench/grammar/schemas.jsonl");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) schemas.push_back(line);
  }
  const size_t n_schemas = opt.quick ? std::min<size_t>(schemas.size(), 12) : schemas.size();
  // Compile times over every schema; walks on every `stride`-th one (a walk inside a long string costs up to
  // a second a mask here).
  const int walk = opt.quick ? 6 : 16;
  const size_t stride = opt.quick ? 1 : 10;
  rep.note("vocabulary: " + vocab_path + " (" + std::to_string(vocab->size()) + " tokens, " +
           std::to_string(vocab->nodes()) + " trie nodes); " + std::to_string(n_schemas) +
           " schemas compiled, walks of up to " + std::to_string(walk) + " tokens on every " + std::to_string(stride) +
           "th");
  std::vector<double> masks, compiles;
  int failed = 0;
  char cases_path[] = "/tmp/llmk-bench-grammar-XXXXXX";
  const int fd = mkstemp(cases_path);
  if (fd < 0) {
    rep.note("cannot create a temporary file for the peer's cases");
    return 1;
  }
  close(fd);
  {
    std::ofstream cases(cases_path);
    std::vector<uint32_t> mask(size_t((vocab->size() + 31) / 32));
    for (size_t i = 0; i < n_schemas; ++i) {
      std::shared_ptr<const Grammar> g;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        g = grammar_from_json_schema(schemas[i]);
      } catch (const GrammarError& e) {
        ++failed;
        continue;
      }
      compiles.push_back(seconds_since(t0));
      if (i % stride != 0) {
        cases << nlohmann::json{{"schema", schemas[i]}, {"tokens", nlohmann::json::array()}}.dump() << "\n";
        continue;
      }
      GrammarMatcher m(g, vocab);
      std::mt19937 rng{uint32_t(i)};
      nlohmann::json toks = nlohmann::json::array();
      for (int s = 0; s < walk && !m.done(); ++s) {
        const auto t1 = std::chrono::steady_clock::now();
        m.fill_mask(mask.data());
        masks.push_back(seconds_since(t1));
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < vocab->size(); ++t)
          if (((mask[size_t(t >> 5)] >> (t & 31)) & 1) && !tok.is_eog(t)) allowed.push_back(t);
        if (allowed.empty()) break;
        const int32_t t = allowed[rng() % allowed.size()];
        m.accept_token(t);
        toks.push_back(t);
      }
      cases << nlohmann::json{{"schema", schemas[i]}, {"tokens", toks}}.dump() << "\n";
    }
  }
  std::sort(masks.begin(), masks.end());
  const size_t n = masks.size();
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / double(v.size());
  };
  const std::pair<const char*, double> stats[] = {{"mask_mean", mean(masks)},
                                                  {"mask_p50", n ? masks[n / 2] : 0},
                                                  {"mask_p99",
                                                   n ? masks[std::min(n - 1, size_t(double(n) * 0.99))] : 0},
                                                  {"mask_max", n ? masks.back() : 0},
                                                  {"compile_mean", mean(compiles)}};
  for (const auto& [op, v] : stats) {
    Row r{"grammar", "llmk", op, std::to_string(n_schemas) + " schemas", "llama3", v * 1e3, 0, {}};
    r.extra["masks"] = std::to_string(n);
    r.extra["failed"] = std::to_string(failed);
    rep.add(r);
  }
  std::string why;
  const std::vector<Row> peer = run_python_peer("bench/grammar/peer_llguidance.py", {vocab_path, cases_path}, &why);
  std::remove(cases_path);
  if (peer.empty()) rep.note("llguidance skipped: " + why);
  for (const Row& r : peer) rep.add(r);
  rep.note(
      "failed: schemas the compiler refused; refused_llmk_token: walks where the peer refused a token llmk's "
      "mask allowed (from there the peer draws its own tokens; it keeps to canonical tokenizations)");
  rep.note("xgrammar: not run (its wheel needs torch, triton and transformers, not installed here)");
  rep.ratios("llmk", {"llguidance"});
  return 0;
}

}  // namespace
LLMK_BENCH("grammar", "structured-output mask time per token and compile time, llmk vs llguidance", run);
}  // namespace llmk::bench
