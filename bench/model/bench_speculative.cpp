// `llmk bench speculative`: batch-1 greedy decode with n-gram speculation (EngineConfig::spec)
// against the same requests without it, on input-grounded workloads (texts in
// bench/model/speculative/: summarise or rewrite an article, edit a code file, extract JSON
// from an order) and one open-ended chat prompt; each prompt rendered with the model's chat
// template (its family's when the file has none). Beside it llama.cpp (llama-cpp-python) plain and with its
// prompt-lookup drafts (LlamaPromptLookupDecoding as draft_model), the same prompt ids, max tokens and threads. tok/s =
// generated tokens after the first / the time after the first (the prefill step's); median_ms = ms per generated token;
// gbps = weight bytes x tok/s (effective weight bytes a generated token reads are weight bytes / tokens per forward).
// bw_limit_tok_s = triad GB/s / weight bytes: the decode rate of one token per read of the weights; x_bw_limit = tok/s
// over it. Each model (SmolLM2 and Gemma-3-270M where fetched; --model one of them) runs its workloads once, llmk
// plain, llmk-ngram, then the peer, so the ratios are of one run.
// --quick: a 2-layer random model on a repeating synthetic prompt, llmk only.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench/common/bench.hpp"
#include "llmk/chat_template.hpp"
#include "llmk/engine.hpp"
#include "llmk/gguf.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk::bench {
namespace {

struct Workload {
  std::string name;
  std::vector<int32_t> ids;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  LLMK_CHECK_ARG(bool(in), "bench speculative", "workload file", path, "cannot be read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The model's chat template; a file without one (Gemma-3-270M's) gets its family's.
ChatTemplate template_for(const Tokenizer& tok, const Model& m) {
  try {
    return chat_template_of(tok);
  } catch (const InvalidArgument&) {
    return ChatTemplate::from_name(m.config().arch == Arch::gemma3 ? "gemma" : "chatml");
  }
}

std::vector<Workload> workloads(const Tokenizer& tok, const Model& m) {
  const std::string dir = source_dir() + "/bench/model/speculative/";
  const std::string article = read_file(dir + "article.txt"), code = read_file(dir + "inventory.py"),
                    order = read_file(dir + "order.txt");
  const std::vector<std::pair<std::string, std::string>> asks = {
      {"summarise", "Summarise the following text in five sentences, keeping its wording where you can.\n\n" + article},
      {"rewrite",
       "Rewrite the following text with the town's name changed from Millbrook to Riverton. Output the whole text and "
       "nothing else.\n\n" +
           article},
      {"code_edit",
       "Rename the method total_value to inventory_value in this Python file, and output the whole edited file.\n\n"
       "```python\n" +
           code + "```"},
      {"extract_json",
       "Extract the customer's name, the order number, the address, the items (name, quantity, unit price) and the "
       "total from this order, as JSON.\n\n" +
           order},
      {"chat", "Write a short story about a lighthouse keeper who finds a message in a bottle."},
  };
  const ChatTemplate tpl = template_for(tok, m);
  const ChatRenderOptions ro = chat_render_options(tok);
  std::vector<Workload> out;
  for (const auto& [name, text] : asks) {
    const std::vector<ChatMessage> msgs = {{"user", text}};
    out.push_back({name, encode_chat_prompt(tok, tpl.render(msgs, ro))});
  }
  return out;
}

struct Result {
  double tok_s = 0;
  int64_t tokens = 0;
  EngineStats st;
};

Result decode(Model& m, const Tokenizer* tok, SpecMode mode, const std::vector<int32_t>& ids, int64_t n) {
  EngineConfig ec;
  ec.kv_type = KvType::f16;
  ec.kv_tokens = int64_t(ids.size()) + n + 64;
  ec.spec.mode = mode;
  Engine e(m, tok, ec);
  Request r;
  r.prompt = ids;
  r.max_tokens = n;
  e.submit(r);
  const Output o = e.run()[0];
  Result res;
  res.st = e.stats();
  res.tokens = int64_t(o.tokens.size());
  res.tok_s = res.st.decode_seconds > 0 ? double(res.st.decode_generated) / res.st.decode_seconds : 0;
  return res;
}

int run(const Options& opt) {
  Reporter rep(opt, "speculative",
               "batch 1, greedy, f16 KV; tok/s = generated tokens after the first / their time; median_ms = ms per "
               "generated token; gbps = weight bytes x tok/s; x_bw_limit = tok/s / (triad GB/s / weight bytes)");
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  set_num_threads(threads);
  const double triad = stream_triad_gbps(threads, opt.quick ? (48u << 20) : (384u << 20));
  rep.note("triad " + std::to_string(triad) + " GB/s, " + std::to_string(threads) + " threads");
  std::vector<std::string> paths;
  if (!opt.quick) {
    if (!opt.model.empty()) {
      paths.push_back(gguf::resolve_model(opt.model));
    } else {
      for (const char* name : {"smollm2-135m", "gemma-3-270m"}) {
        try {
          paths.push_back(gguf::resolve_model(name));
        } catch (const std::exception& e) {
          rep.note(std::string(name) + " skipped: " + e.what());
        }
      }
    }
  }
  const int64_t n = opt.quick ? 24 : 128;
  auto add = [&](const std::string& impl, const std::string& op, const std::string& model, double wbytes, double tok_s,
                 const std::map<std::string, std::string>& extra) {
    Row r{"speculative", impl, op, model, "kv f16", tok_s > 0 ? 1e3 / tok_s : 0, wbytes * tok_s / 1e9, extra};
    r.extra["tok_s"] = std::to_string(tok_s);
    r.extra["threads"] = std::to_string(threads);
    r.extra["x_bw_limit"] = std::to_string(tok_s / (triad * 1e9 / wbytes));
    rep.add(r);
  };
  auto run_llmk = [&](Model& m, const Tokenizer* tok, const std::string& mname, const Workload& w) {
    const double wbytes = double(m.weight_bytes());
    const Result plain = decode(m, tok, SpecMode::off, w.ids, n);
    const Result spec = decode(m, tok, SpecMode::ngram, w.ids, n);
    char acc[64];
    std::snprintf(acc, sizeof acc, "%.3f",
                  spec.st.drafted_tokens ? double(spec.st.accepted_tokens) / double(spec.st.drafted_tokens) : 0.0);
    const std::string bw = std::to_string(triad * 1e9 / wbytes);
    add("llmk", w.name, mname, wbytes, plain.tok_s, {{"tokens", std::to_string(plain.tokens)}, {"bw_limit_tok_s", bw}});
    add("llmk-ngram", w.name, mname, wbytes, spec.tok_s,
        {{"tokens", std::to_string(spec.tokens)},
         {"accept", acc},
         {"drafted", std::to_string(spec.st.drafted_tokens)},
         {"tokens_per_forward", std::to_string(double(spec.tokens) / double(spec.st.steps))},
         {"bw_limit_tok_s", bw},
         {"same_tokens", spec.tokens == plain.tokens ? "yes" : "no"}});
  };
  if (opt.quick) {
    ModelConfig c;
    c.n_vocab = 512, c.n_ctx = 1024, c.d_model = 128, c.n_layer = 2, c.n_head = 4, c.n_head_kv = 2, c.d_ff = 256;
    Model m = Model::random(c, WType::q4_1, 1);
    Workload w{"synthetic", {}};
    for (int rep_i = 0; rep_i < 4; ++rep_i)
      for (int32_t i = 0; i < 40; ++i) w.ids.push_back((i * 37) % 512);
    run_llmk(m, nullptr, "random-2-layer", w);
    rep.ratios("llmk-ngram", {"llmk"});
    return 0;
  }
  std::string why;
  for (const std::string& path : paths) {
    const gguf::File file = gguf::File::open(path);
    Model m = Model::from_gguf(file);
    const Tokenizer tok = Tokenizer::from_gguf(file);
    std::string mname = path.substr(path.find_last_of('/') + 1);
    mname = mname.substr(0, mname.find('.'));
    const std::vector<Workload> ws = workloads(tok, m);
    decode(m, &tok, SpecMode::off, ws[0].ids, 2);  // warm-up: pages in the weights
    for (const Workload& w : ws) run_llmk(m, &tok, mname, w);
    if (why.empty()) {
      const std::string ids_path = "/tmp/llmk_bench_speculative_ids.txt";
      {
        std::ofstream out(ids_path);
        for (const Workload& w : ws) {
          out << w.name;
          for (int32_t t : w.ids) out << ' ' << t;
          out << '\n';
        }
      }
      setenv("WEIGHT_BYTES", std::to_string(m.weight_bytes()).c_str(), 1);
      setenv("TRIAD_GBPS", std::to_string(triad).c_str(), 1);
      auto peer = run_python_peer("bench/model/peer_llamacpp_spec.py",
                                  {path, ids_path, std::to_string(threads), std::to_string(n), mname}, &why);
      for (Row& r : peer) rep.add(r);
    }
  }
  if (!why.empty()) rep.note("peer skipped: " + why);
  rep.ratios("llmk-ngram", {"llmk", "llama.cpp-lookup", "llama.cpp"});
  rep.ratios("llama.cpp-lookup", {"llama.cpp"});
  return 0;
}
}  // namespace
LLMK_BENCH("speculative", "batch-1 decode with n-gram speculation vs plain, vs llama.cpp prompt lookup", run);
}  // namespace llmk::bench
