// Built-in model shapes and device figures, storage-type sizes, and the
// reader for JSON model configs. Sources for every figure are in
// docs/capacity.md; model shapes are those of the published Hugging Face
// configs, and `params` is the published parameter count of each checkpoint.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "analyze/json.hpp"
#include "llmk/analyze.hpp"
#include "llmk/error.hpp"
#include "llmk/model.hpp"

namespace llmk::analyze {

Ratio kv_type_size(KvType t) {
  const KvTypeTraits& r = kv_type_traits(t);
  return {r.group_bytes, r.group_values};
}

Ratio weight_type_size(WeightType t) {
  const WTypeTraits& r = wtype_traits(t);
  return {r.block_bytes, r.block_elems};
}

const char* weight_type_name(WeightType t) { return wtype_traits(t).name; }

namespace {
std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}
}  // namespace

KvType parse_kv_type(std::string_view name) {
  const KvTypeTraits* r = kv_type_traits_named(lower(name));
  LLMK_CHECK_ARG(r != nullptr, "analyze::parse_kv_type", "kv type", name, "must be " + kv_type_choices());
  return r->type;
}

std::string weight_type_choices() {
  std::string names;
  for (WeightType t : weight_types()) names += (names.empty() ? "" : ", ") + std::string(weight_type_name(t));
  return names;
}

WeightType parse_weight_type(std::string_view name) {
  const std::string l = lower(name);
  for (WeightType t : weight_types())
    if (l == weight_type_name(t)) return t;
  throw_invalid_argument("analyze::parse_weight_type", "weight type", std::string(name),
                         "must be one of " + weight_type_choices());
}

const std::vector<KvType>& all_kv_types() {
  static const std::vector<KvType> all = [] {
    std::vector<KvType> v;
    for (int i = 0; i < kKvTypeCount; ++i) v.push_back(KvType(i));
    return v;
  }();
  return all;
}

const std::vector<WeightType>& weight_types() {
  static const std::vector<WeightType> all = {WType::f32,  WType::f16,  WType::bf16,
                                              WType::q8_0, WType::q4_0, WType::q4_1};
  return all;
}

ModelConfig shape_of(const llmk::ModelConfig& c, std::string name, int64_t params) {
  ModelConfig m;
  m.name = std::move(name);
  m.n_layers = c.n_layer, m.hidden = c.d_model, m.n_heads = c.n_head, m.n_kv_heads = c.n_head_kv;
  m.head_dim = c.d_head(), m.ffn = c.d_ff, m.vocab = c.n_vocab;
  m.tied_embeddings = c.tied, m.gated_ffn = arch_gated_ffn(c.arch);
  m.params = params, m.max_context = c.n_ctx;
  return m;
}

const std::vector<ModelConfig>& builtin_models() {
  // name, layers, hidden, heads, kv heads, head_dim, ffn, vocab, tied, gated, params, context
  static const std::vector<ModelConfig> models = {
      {"gpt2-124m", 12, 768, 12, 12, 64, 3072, 50257, true, false, 124439808, 1024},
      {"gpt2-1.5b", 48, 1600, 25, 25, 64, 6400, 50257, true, false, 1557611200, 1024},
      {"llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, false, true, 6738415616, 4096},
      {"llama-2-13b", 40, 5120, 40, 40, 128, 13824, 32000, false, true, 13015864320, 4096},
      {"llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, false, true, 68976648192, 4096},
      {"llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256, false, true, 8030261248, 8192},
      {"llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256, false, true, 70553706496, 8192},
      {"mistral-7b", 32, 4096, 32, 8, 128, 14336, 32768, false, true, 7248023552, 32768},  // v0.3
      {"qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, false, true, 7615616512, 32768},
      {"smollm2-135m", 30, 576, 9, 3, 64, 1536, 49152, true, true, 134515008, 8192},
  };
  return models;
}

ModelConfig find_model(std::string_view name) {
  std::string names;
  for (const auto& m : builtin_models()) {
    if (m.name == lower(name)) return m;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  throw_invalid_argument("analyze::find_model", "model", std::string(name),
                         "not a built-in model (" + names + "); use --config FILE for others");
}

void validate(const ModelConfig& m) {
  const char* fn = "analyze::validate";
  const std::pair<const char*, int64_t> sizes[] = {{"n_layers", m.n_layers}, {"hidden", m.hidden},
                                                   {"n_heads", m.n_heads},   {"n_kv_heads", m.n_kv_heads},
                                                   {"head_dim", m.head_dim}, {"ffn", m.ffn},
                                                   {"vocab", m.vocab},       {"params", m.params}};
  for (const auto& [key, v] : sizes) LLMK_CHECK_ARG(v > 0, fn, key, v, "must be > 0");
  LLMK_CHECK_ARG(m.max_context >= 0, fn, "max_context", m.max_context, "must be >= 0 (0 = unknown)");
  LLMK_CHECK_ARG(m.n_heads % m.n_kv_heads == 0, fn, "n_kv_heads", m.n_kv_heads,
                 "must divide n_heads = " + std::to_string(m.n_heads));
}

ModelConfig parse_model_config(std::string_view text, std::string_view source) {
  const std::string fn = "analyze config " + std::string(source);
  const json::Value root = json::parse(text, source);
  LLMK_CHECK_ARG(root.kind == json::Value::Kind::object, fn, "top level", root.repr(), "must be a JSON object");
  ModelConfig m;
  struct Int {
    const char* key;
    int64_t* dst;
    bool required;
  };
  const Int ints[] = {
      {"n_layers", &m.n_layers, true},     {"hidden", &m.hidden, true},     {"n_heads", &m.n_heads, true},
      {"n_kv_heads", &m.n_kv_heads, true}, {"head_dim", &m.head_dim, true}, {"ffn", &m.ffn, true},
      {"vocab", &m.vocab, true},           {"params", &m.params, true},     {"max_context", &m.max_context, false}};
  const std::pair<const char*, bool*> bools[] = {{"tied_embeddings", &m.tied_embeddings}, {"gated_ffn", &m.gated_ffn}};
  std::string known = "name";
  for (const auto& i : ints) known += std::string(", ") + i.key;
  for (const auto& b : bools) known += std::string(", ") + b.first;

  std::vector<std::string> seen;
  for (const auto& [key, v] : root.members) {
    const std::string& arg = key;
    seen.push_back(key);
    if (key == "name") {
      LLMK_CHECK_ARG(v.kind == json::Value::Kind::string, fn, arg, v.repr(), "must be a string");
      m.name = v.text;
      continue;
    }
    bool done = false;
    for (const auto& i : ints) {
      if (key != i.key) continue;
      // Integers only: digits with an optional '-', no fraction or exponent.
      const bool integral = v.kind == json::Value::Kind::number && v.text.find_first_of(".eE") == std::string::npos;
      LLMK_CHECK_ARG(integral, fn, arg, v.repr(), "must be an integer (no fraction or exponent)");
      errno = 0;
      char* end = nullptr;
      const long long x = std::strtoll(v.text.c_str(), &end, 10);
      LLMK_CHECK_ARG(errno != ERANGE, fn, arg, v.repr(), "does not fit in a 64-bit integer");
      LLMK_CHECK_ARG(i.required ? x > 0 : x >= 0, fn, arg, v.repr(), i.required ? "must be > 0" : "must be >= 0");
      *i.dst = x;
      done = true;
    }
    for (const auto& [bkey, dst] : bools) {
      if (key != bkey) continue;
      LLMK_CHECK_ARG(v.kind == json::Value::Kind::boolean, fn, arg, v.repr(), "must be true or false");
      *dst = v.b;
      done = true;
    }
    LLMK_CHECK_ARG(done, fn, arg, v.repr(), "unknown key; the keys are " + known);
  }
  auto has = [&](const char* k) { return std::find(seen.begin(), seen.end(), k) != seen.end(); };
  for (const auto& i : ints) LLMK_CHECK_ARG(!i.required || has(i.key), fn, i.key, "(missing)", "is required");
  for (const auto& [bkey, _] : bools) LLMK_CHECK_ARG(has(bkey), fn, bkey, "(missing)", "is required");
  if (m.name.empty()) m.name = std::string(source);
  LLMK_CHECK_ARG(m.n_heads % m.n_kv_heads == 0, fn, "n_kv_heads", m.n_kv_heads,
                 "must divide n_heads = " + std::to_string(m.n_heads));
  validate(m);
  return m;
}

ModelConfig load_model_config(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  LLMK_CHECK_ARG(f.good(), "analyze::load_model_config", "path", path, "cannot be opened");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_model_config(ss.str(), path);
}

const std::vector<Device>& builtin_devices() {
  // key, name, memory bytes (datasheet GB x 1e9), GB/s, dense bf16/f16 tensor TFLOP/s, f32 non-tensor
  // TFLOP/s, source
  static const std::vector<Device> devices = {
      {"h100", "NVIDIA H100 SXM 80GB", 80'000'000'000, 3350, 989.4, 67,
       "H100 datasheet: 80 GB HBM3, 3.35 TB/s, BF16 tensor 1979 TFLOPS with sparsity (989.4 dense), FP32 67 TFLOPS"},
      {"h200", "NVIDIA H200 SXM 141GB", 141'000'000'000, 4800, 989.4, 67,
       "H200 datasheet: 141 GB HBM3e, 4.8 TB/s, BF16 tensor 1979 TFLOPS with sparsity (989.4 dense), FP32 67 TFLOPS"},
      {"a100-40", "NVIDIA A100 SXM 40GB", 40'000'000'000, 1555, 312, 19.5,
       "A100 datasheet: 40 GB HBM2, 1555 GB/s, BF16 tensor 312 TFLOPS dense, FP32 19.5 TFLOPS"},
      {"a100-80", "NVIDIA A100 SXM 80GB", 80'000'000'000, 2039, 312, 19.5,
       "A100 datasheet: 80 GB HBM2e (SXM), 2039 GB/s, BF16 tensor 312 TFLOPS dense, FP32 19.5 TFLOPS"},
      {"l4", "NVIDIA L4", 24'000'000'000, 300, 121, 30.3,
       "L4 datasheet: 24 GB GDDR6, 300 GB/s, BF16 tensor 242 TFLOPS with sparsity (121 dense), FP32 30.3 TFLOPS"},
      {"rtx4090", "NVIDIA GeForce RTX 4090", 24'000'000'000, 1008, 165.2, 82.6,
       "Ada architecture whitepaper: 24 GB GDDR6X, 1008 GB/s, FP16/BF16 tensor with FP32 accumulate 165.2 TFLOPS "
       "dense, FP32 82.6 TFLOPS"},
  };
  return devices;
}

Device find_device(std::string_view key) {
  std::string keys;
  for (const auto& d : builtin_devices()) {
    if (d.key == lower(key)) return d;
    keys += d.key + ", ";
  }
  throw_invalid_argument("analyze::find_device", "device", std::string(key), "must be one of " + keys + "cpu or all");
}

}  // namespace llmk::analyze
