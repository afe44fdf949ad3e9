// What `llmk generate`, `chat` and `perplexity` share: opening a model (the
// default one fetched when --model is absent), the --kv-type names, --threads,
// llama.cpp-style `-n N`, and JSON string escaping.
#pragma once
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli.hpp"
#include "llmk/engine.hpp"
#include "llmk/error.hpp"
#include "llmk/gguf.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk::cli {

struct LoadedModel {
  gguf::File file;
  Model model;
  Tokenizer tok;
  explicit LoadedModel(const std::string& path)
      : file(gguf::File::open(path)), model(Model::from_gguf(file)), tok(Tokenizer::from_gguf(file)) {}
};

// --model NAME|PATH, or "" for the default model. NAME is a short name of
// gguf::kKnownModels (smollm2-135m, gemma-3-270m); anything else is a path. A known model
// is fetched (a download when it is missing) by model_path() only once every option has
// been checked, so a typo is reported before any download.
inline std::string model_arg(Args& a) {
  const std::string m = a.get("model", "");
  LLMK_CHECK_ARG(!a.has("model") || !m.empty(), "cli", "--model", "\"\"",
                 "needs a path or a model name (" + gguf::known_model_names() + "; leave it out for the default model)");
  return m;
}
// Names resolve through gguf::resolve_model, as in Python (llmk.LLM).
inline std::string model_path(const std::string& model_arg) {
  const std::string path = gguf::resolve_model(model_arg);
  if (path != model_arg) return path;
  std::error_code ec;
  LLMK_CHECK_ARG(std::filesystem::exists(model_arg, ec), "cli", "--model", model_arg,
                 "cannot be opened: no such file, nor a known model name (" + gguf::known_model_names() + ")");
  check_file("cli", "--model", model_arg);
  return model_arg;
}

// A KV type by any spelling of the table (llmk/kv_quant.hpp: q8 or int8, ...).
inline KvType kv_type_named(const std::string& v, const std::string& flag) {
  const KvTypeTraits* t = kv_type_traits_named(v);
  LLMK_CHECK_ARG(t != nullptr, "cli", flag, v, "must be " + kv_type_choices());
  return t->type;
}

inline const char* kv_type_cli_name(KvType t) { return kv_type_traits(t).cli_name; }

// --kv-type T (K, and V unless --kv-v-type T is given), --kv-rotate (a flag:
// list it in the command's flags) into the engine config.
inline void kv_args(Args& a, const char* fallback, EngineConfig& ec) {
  ec.kv_type = kv_type_named(a.get("kv-type", fallback), "--kv-type");
  if (a.has("kv-v-type")) ec.kv_v_type = kv_type_named(a.get("kv-v-type", ""), "--kv-v-type");
  ec.kv_rotate = a.flag("kv-rotate");
}

// "q4", or "q4/q8" when V's type differs; " (K rotated)" appended when rotated.
inline std::string kv_cli_name(const EngineConfig& ec, bool with_rotation = true) {
  std::string s = kv_type_cli_name(ec.kv_type);
  if (ec.kv_v_type && *ec.kv_v_type != ec.kv_type) s += std::string("/") + kv_type_cli_name(*ec.kv_v_type);
  if (with_rotation && ec.kv_rotate) s += " (K rotated)";
  return s;
}

inline void threads_arg(Args& a) {
  if (a.has("threads")) set_num_threads(int(a.get_int("threads", 1, 1, kMaxThreads)));
}

// --top-k K: >= 0; every K >= the vocabulary is off, so K beyond int32 is clamped, never
// truncated (4294967297 is off, not 1: greedy). --seed S: >= 0 (there is no "random" seed).
inline int32_t top_k_arg(Args& a, int64_t fallback) {
  return int32_t(std::min<int64_t>(a.get_int("top-k", fallback, 0), INT32_MAX));
}
inline uint64_t seed_arg(Args& a) { return uint64_t(a.get_int("seed", 0, 0)); }
// --temp T >= 0 and --top-p P in (0, 1], checked here in double so the error names the
// option and the text given, not the request field and float(1e39) = inf or float(1e-50) = 0.
inline float temp_arg(Args& a, double fallback) {
  const double t = a.get_double("temp", fallback);
  LLMK_CHECK_ARG(t >= 0 && t <= FLT_MAX, "cli", "--temp", a.get("temp", ""), "must be finite and >= 0 (0 = greedy)");
  return float(t);
}
inline float top_p_arg(Args& a, double fallback) {
  const double p = a.get_double("top-p", fallback);
  LLMK_CHECK_ARG(p <= 1 && float(p) > 0, "cli", "--top-p", a.get("top-p", ""),
                 "must be in (0, 1] (and >= 1e-45, a float)");
  return float(p);
}

// The KV cache generate and chat size themselves (without --kv-tokens) holds at most this
// many tokens; -n beyond it still runs, until a sequence no longer fits.
inline constexpr int64_t kAutoKvTokens = int64_t(1) << 16;
// -n at most this (the engine adds it to the prompt's length in int64).
inline constexpr int64_t kMaxNewTokens = int64_t(1) << 31;

// `-n N` (llama.cpp's spelling; Args reads it as --n N).
inline int64_t n_arg(Args& a, int64_t fallback) { return a.get_int("n", fallback); }

inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"') o += "\\\"";
    else if (c == '\\') o += "\\\\";
    else if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += char(c);
    }
  }
  return o + "\"";
}

}  // namespace llmk::cli
