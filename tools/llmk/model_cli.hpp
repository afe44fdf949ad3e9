// What the model commands share: the declarations of their common options (--model,
// the KV cache's, --threads, sampling, llama.cpp-style `-n N`) with the functions that
// read them, opening a model (the default one fetched when --model is absent), and JSON
// string escaping.
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

// --model NAME|PATH. NAME is a short name of gguf::kKnownModels; anything else is a path.
inline Option model_option() {
  return path("model", "NAME|PATH", "a GGUF file, or a known model's name (" + gguf::known_model_names() + ")")
      .shown_default(std::string(gguf::kKnownModels[0].name) + ", fetched when missing")
      .must("needs a path or a model name (" + gguf::known_model_names() + "; leave it out for the default model)");
}
// The --model given, or "" for the default model. A known model is fetched (a download when
// it is missing) by model_path() only once every option has been checked, so a typo is
// reported before any download.
inline std::string model_arg(Args& a) { return a.get("model", ""); }
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

// --kv-type T (K, and V unless --kv-v-type T is given) and --kv-rotate; `fallback` is the
// command's default type, given to kv_options and kv_args alike.
inline std::vector<Option> kv_options(const char* fallback) {
  return {text("kv-type", "T", "the KV cache's type, K's and V's: " + llmk::kv_type_choices()).shown_default(fallback),
          text("kv-v-type", "T", "V's type, when it differs from K's").shown_default("--kv-type's"),
          flag("kv-rotate", "store K Hadamard-rotated (llmk/kv_quant.hpp); most useful with q4")};
}
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

inline Option threads_option() {
  return integer("threads", "N", "CPU threads").range(1, kMaxThreads).shown_default("all cores");
}
inline void threads_arg(Args& a) {
  if (a.has("threads")) set_num_threads(int(a.get_int("threads")));
}

// Sampling. --temp and --top-p are checked in double, so the error names the option and the
// text given, not the request field and float(1e39) = inf or float(1e-50) = 0.
inline Option temp_option(const char* fallback) {
  return number("temp", "T", "sampling temperature")
      .range(0.0, double(FLT_MAX))
      .must("must be finite and >= 0 (0 = greedy)")
      .def(fallback);
}
inline float temp_arg(Args& a) { return float(a.get_double("temp")); }
// float(P) > 0 exactly when P > 2^-150 (2^-150 itself rounds to even: 0).
inline Option top_p_option(const char* fallback) {
  return number("top-p", "P", "nucleus sampling: the most likely tokens whose probabilities sum to P")
      .range(0x1p-150, 1.0, true)
      .must("must be in (0, 1] (and >= 1e-45, a float)")
      .def(fallback);
}
inline float top_p_arg(Args& a) { return float(a.get_double("top-p")); }
// Every K >= the vocabulary is off, so K beyond int32 is clamped, never truncated
// (4294967297 is off, not 1: greedy). A default that depends on other options is the
// fallback of top_k_arg, and `shown` says it in --help.
inline Option top_k_option(const char* fallback, const char* shown = "") {
  Option o = integer("top-k", "K", "sample among the K most likely tokens (0: all)").range(0, INT64_MAX);
  return fallback ? std::move(o).def(fallback) : std::move(o).shown_default(shown);
}
inline int32_t top_k_arg(Args& a, std::optional<int64_t> fallback = std::nullopt) {
  return int32_t(std::min<int64_t>(a.get_int("top-k", fallback), INT32_MAX));
}
// There is no "random" seed.
inline Option seed_option() { return integer("seed", "S", "the sampler's seed").range(0, INT64_MAX).def("0"); }
inline uint64_t seed_arg(Args& a) { return uint64_t(a.get_int("seed")); }

// The KV cache generate and chat size themselves (without --kv-tokens) holds at most this
// many tokens; -n beyond it still runs, until a sequence no longer fits.
inline constexpr int64_t kAutoKvTokens = int64_t(1) << 16;
// -n at most this (the engine adds it to the prompt's length in int64).
inline constexpr int64_t kMaxNewTokens = int64_t(1) << 31;

// `-n N` (llama.cpp's spelling; also --n N).
inline Option n_option(const char* fallback) {
  return integer("n", "N", "new tokens at most").range(1, kMaxNewTokens).must("must be in [1, 2^31]").def(fallback);
}
inline int64_t n_arg(Args& a) { return a.get_int("n"); }

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
