// Random-weight GGUF files of real model shapes (synth_model.hpp).
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/model/synth_model.hpp"
#include "llmk/dtype.hpp"
#include "llmk/error.hpp"
#include "llmk/ggml_quants.hpp"
#include "llmk/gguf.hpp"
#include "model/arch.hpp"

namespace llmk::bench {
namespace {
using gguf::GgmlType;

std::string cache_root() {
  if (const char* c = std::getenv("LLMK_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/llmk";
  throw RuntimeError("bench generate: neither LLMK_CACHE nor HOME is set: no cache directory for the model file");
}

// llama.cpp's ggml-vocab-<name>.gguf, fetched by scripts/fetch-llamacpp-vocab when missing.
std::string vocab_file(const std::string& name) {
  const std::string p = cache_root() + "/llamacpp-vocab/ggml-vocab-" + name + ".gguf";
  if (std::filesystem::is_regular_file(p)) return p;
  const std::string cmd = std::string("'") + LLMK_SOURCE_DIR + "/scripts/fetch-llamacpp-vocab'";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::is_regular_file(p))
    throw RuntimeError("bench generate: llama.cpp's vocabulary " + p + " could not be fetched (" + cmd + ")");
  return p;
}

// llama.cpp's llama_tensor_get_type for a dense model, non-Falcon (src/llama-quant.cpp of
// llama-cpp-python 0.3.36): Q4_K_M puts Q6_K on the output, and on attn_v and ffn_down of
// the layers use_more_bits picks; Q4_0 stores the output in Q6_K too.
GgmlType tensor_type(const std::string& weights, const std::string& name, int64_t layer, int64_t n_layer) {
  const auto more_bits = [&] {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
  };
  if (weights == "q8_0") return GgmlType::Q8_0;
  if (name == "output.weight") return GgmlType::Q6_K;
  if (weights == "q4_0") return GgmlType::Q4_0;
  if ((name.find("attn_v.weight") != std::string::npos || name.find("ffn_down.weight") != std::string::npos) &&
      more_bits())
    return GgmlType::Q6_K;
  return GgmlType::Q4_K;
}

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One random block of type t (block index `blk` of the tensor seeded `seed`) into out: random
// codes, and scales chosen so that weights have an RMS of about 0.02 (logits stay finite and
// the attention scores moderate on both engines).
void random_block(GgmlType t, uint64_t seed, uint64_t blk, uint8_t* out, size_t bytes) {
  uint64_t s = mix(seed * 0x9e3779b97f4a7c15ull + blk);
  for (size_t i = 0; i < bytes; i += 8) {
    s = mix(s + 0x9e3779b97f4a7c15ull);
    std::memcpy(out + i, &s, std::min<size_t>(8, bytes - i));
  }
  const auto put_f16 = [](uint8_t* p, float v) {
    const uint16_t h = f32_to_f16_bits(v);
    std::memcpy(p, &h, 2);
  };
  switch (t) {
    case GgmlType::Q8_0: put_f16(out, 2.7e-4f); break;  // value d q, q uniform in [-128, 127]: RMS 74 d
    case GgmlType::Q4_0: put_f16(out, 4.3e-3f); break;  // d (q - 8): RMS 4.6 d
    case GgmlType::Q4_K: {                              // d sc q - dmin m, 6-bit sc and m
      put_f16(out, 1.4e-4f);
      put_f16(out + 2, 1.0e-3f);
      break;
    }
    case GgmlType::Q6_K: {  // d sc (q - 32): scales 1..8, RMS of q - 32 18.5
      auto* b = reinterpret_cast<BlockQ6_K*>(out);
      for (int8_t& sc : b->scales) sc = int8_t(1 + (uint8_t(sc) & 7));
      put_f16(out + offsetof(BlockQ6_K, d), 2.4e-4f);
      break;
    }
    default: throw InvalidArgument("bench generate: no random blocks of type " + std::string(ggml_type_name(t)));
  }
}

gguf::Writer::Fill random_fill(GgmlType t, uint64_t seed) {
  const size_t bs = size_t(gguf::ggml_block_bytes(t));
  return [t, seed, bs](uint64_t offset, std::span<uint8_t> out) {
    std::vector<uint8_t> blk(bs);
    for (uint64_t at = offset; at < offset + out.size();) {
      const uint64_t b = at / bs, in = at % bs, n = std::min<uint64_t>(bs - in, offset + out.size() - at);
      random_block(t, seed, b, blk.data(), bs);
      std::memcpy(out.data() + (at - offset), blk.data() + in, n);
      at += n;
    }
  };
}

gguf::Writer::Fill constant_f32(float v) {
  return [v](uint64_t, std::span<uint8_t> out) {
    for (size_t i = 0; i + 4 <= out.size(); i += 4) std::memcpy(out.data() + i, &v, 4);
  };
}

void write_file(const SynthShape& sh, const std::string& weights, int64_t n_layer, const std::string& path) {
  using gguf::Value;
  const gguf::File vocab = gguf::File::open(vocab_file(sh.vocab));
  ModelConfig c;
  c.arch = sh.arch;
  c.n_vocab = int64_t(vocab.get_strings("tokenizer.ggml.tokens").size());
  c.n_ctx = sh.n_ctx;
  c.d_model = sh.d_model;
  c.n_layer = n_layer;
  c.n_head = sh.n_head;
  c.n_head_kv = sh.n_head_kv;
  c.d_ff = sh.d_ff;
  c.norm_eps = sh.norm_eps;
  c.rope_base = sh.rope_base;
  c.tied = false;
  c.validate();
  const arch::ArchInfo& a = arch::info(c.arch);
  const std::string p = std::string(a.name) + ".";
  gguf::Writer w;
  w.set("general.architecture", Value::string(a.name));
  w.set("general.name", Value::string("random " + std::string(sh.name) + " " + weights));
  for (const arch::KeySpec& k : a.keys) {
    if (k.i && (k.required || c.*k.i != 0)) w.set(p + k.key, Value::of(uint32_t(c.*k.i)));
    if (k.f) w.set(p + k.key, Value::of(c.*k.f));
  }
  for (const auto& [key, v] : vocab.metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, v);
  uint64_t seed = 1;
  for (int64_t l = -1; l < c.n_layer; ++l) {
    for (const arch::TensorSpec& t : a.tensors) {
      if (t.per_layer != (l >= 0)) continue;
      const bool bias = t.slot == arch::Slot::bq || t.slot == arch::Slot::bk || t.slot == arch::Slot::bv;
      if (t.need != arch::Need::required && t.slot != arch::Slot::output && !(bias && sh.qkv_bias)) continue;
      const std::string name = t.per_layer ? "blk." + std::to_string(l) + "." + t.name : t.name;
      const int64_t rows = arch::dim(c, t.rows);
      if (t.cols == arch::Dim::none) {  // norms 1, biases 0
        w.add_tensor(name, GgmlType::F32, {rows}, constant_f32(bias ? 0.0f : 1.0f));
        continue;
      }
      const GgmlType ty = tensor_type(weights, name, l, c.n_layer);
      w.add_tensor(name, ty, {arch::dim(c, t.cols), rows}, random_fill(ty, seed++));
    }
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string tmp = path + ".part";  // a write cut short never leaves a cached file
  std::fprintf(stderr, "bench generate: writing %s (once; cached)\n", path.c_str());
  w.write(tmp);
  std::filesystem::rename(tmp, path);
}
}  // namespace

const SynthShape* synth_shape(std::string_view name) {
  for (const SynthShape& s : kSynthShapes)
    if (name == s.name) return &s;
  return nullptr;
}

std::string synth_shape_names() {
  std::string s;
  for (const SynthShape& x : kSynthShapes) s += (s.empty() ? "" : ", ") + std::string(x.name);
  return s;
}

bool synth_weights_known(std::string_view weights) {
  for (const char* w : kSynthWeights)
    if (weights == w) return true;
  return false;
}

std::string synth_model_file(const SynthShape& shape, const std::string& weights, int64_t n_layer) {
  LLMK_CHECK_ARG(synth_weights_known(weights), "bench generate", "--weights", weights, "must be q4_k_m, q4_0 or q8_0");
  if (n_layer <= 0) n_layer = shape.n_layer;
  const std::string layers = n_layer == shape.n_layer ? "" : "-" + std::to_string(n_layer) + "layer";
  const std::string path = cache_root() + "/bench-models/random-" + shape.name + layers + "-" + weights + ".gguf";
  if (!std::filesystem::is_regular_file(path)) write_file(shape, weights, n_layer, path);
  return path;
}

}  // namespace llmk::bench
