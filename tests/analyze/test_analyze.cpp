// Capacity analysis: KV sizes against hand-computed per-token sizes, the
// shapes against the published parameter counts (exactly), hand-computed
// capacity and intensity cases, monotonicity, the JSON config reader's errors,
// and 64-bit overflow checks. Expected values are worked out by hand in the
// comments next to them, never taken from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "llmk/analyze.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/error.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::analyze {
namespace {

constexpr int64_t KiB = 1024;

// f16 KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x 2 bytes, with the
// shapes of each model's published Hugging Face config.json: GPT-2 2*12*12*64*2 = 36 KiB,
// Llama-2-7B 2*32*32*128*2 = 512 KiB, 13B 2*40*40*128*2 = 800 KiB, Llama-3-8B and Mistral-7B
// 2*32*8*128*2 = 128 KiB, Llama-3-70B 2*80*8*128*2 = 320 KiB, SmolLM2-135M 2*30*3*64*2 = 22.5 KiB.
TEST(AnalyzeKv, PublishedF16PerTokenTable) {
  auto f16 = [](const char* name) { return kv_bytes_per_token(find_model(name), KvType::f16, KvType::f16); };
  EXPECT_EQ(f16("gpt2-124m"), 36 * KiB);
  EXPECT_EQ(f16("llama-2-7b"), 512 * KiB);
  EXPECT_EQ(f16("llama-2-13b"), 800 * KiB);
  EXPECT_EQ(f16("llama-3-8b"), 128 * KiB);
  EXPECT_EQ(f16("mistral-7b"), 128 * KiB);
  EXPECT_EQ(f16("llama-3-70b"), 320 * KiB);
  EXPECT_EQ(f16("smollm2-135m"), 22 * KiB + 512);  // 22.5 KiB
  // Not in the table: 2*80*8*128*2 = 320 KiB, 2*28*4*128*2 = 56 KiB, 2*48*25*64*2 = 300 KiB.
  EXPECT_EQ(f16("llama-2-70b"), 320 * KiB);
  EXPECT_EQ(f16("qwen2.5-7b"), 56 * KiB);
  EXPECT_EQ(f16("gpt2-1.5b"), 300 * KiB);
}

TEST(AnalyzeKv, StorageTypesPerToken) {
  const ModelConfig m = find_model("smollm2-135m");  // 30 layers, 3 kv heads, head_dim 64 = 2 groups of 32
  EXPECT_EQ(kv_bytes_per_token(m, KvType::f32, KvType::f32), 2 * 30 * 3 * 64 * 4);
  EXPECT_EQ(kv_bytes_per_token(m, KvType::bf16, KvType::bf16), 2 * 30 * 3 * 64 * 2);
  EXPECT_EQ(kv_bytes_per_token(m, KvType::int8, KvType::int8), 2 * 30 * 3 * 2 * 34);  // 12240 B, ~12 KiB
  EXPECT_EQ(kv_bytes_per_token(m, KvType::int4, KvType::int4), 2 * 30 * 3 * 2 * 20);  // 7200 B
  EXPECT_EQ(kv_bytes_per_token(m, KvType::int8, KvType::int4), 30 * 3 * 2 * (34 + 20));
  // Groups run along head_dim; 80 = 2.5 groups is padded to 3.
  EXPECT_EQ(kv_head_bytes(80, KvType::int8), 3 * 34);
  EXPECT_EQ(kv_head_bytes(96, KvType::int4), 3 * 20);
  EXPECT_EQ(kv_head_bytes(128, KvType::f32), 512);
}

TEST(AnalyzeModels, ShapesGiveThePublishedParameterCounts) {
  // estimated_params counts Q,K,V,O, FFN, RMSNorm weights, embedding and LM head.
  // Llama-style models have nothing else, so it must be exact.
  for (const char* name :
       {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "smollm2-135m"}) {
    const ModelConfig m = find_model(name);
    EXPECT_EQ(estimated_params(m), m.params) << name;
  }
  // Qwen2.5 adds Q, K and V biases: 28 x (3584 + 2*512).
  const ModelConfig qwen = find_model("qwen2.5-7b");
  EXPECT_EQ(estimated_params(qwen) + 28 * (3584 + 2 * 512), qwen.params);
  // GPT-2: LayerNorm biases (2h per layer + h final), linear biases (3h + h + ffn + h per
  // layer) and 1024 learned positions of width h.
  for (const char* name : {"gpt2-124m", "gpt2-1.5b"}) {
    const ModelConfig m = find_model(name);
    const int64_t h = m.hidden, extra = m.n_layers * (2 * h + 3 * h + h + m.ffn + h) + h + 1024 * h;
    EXPECT_EQ(estimated_params(m) + extra, m.params) << name;
  }
}

TEST(AnalyzeCapacity, Llama3_8B_F16_OnH100_Batch1) {
  const ModelConfig m = find_model("llama-3-8b");
  const Device h100 = find_device("h100");
  const Capacity c = capacity(m, h100, KvType::f16, KvType::f16, WeightType::f16, 1, 8192);
  // 80e9 bytes; reserve 10% = 8e9; weights 2 x 8030261248 = 16060522496;
  // KV budget 80e9 - 8e9 - 16060522496 = 55939477504 bytes;
  // one 16-token block = 16 x 131072 = 2097152 bytes -> floor(26674.08) = 26674 blocks;
  // batch 1: 26674 x 16 = 426784 tokens; context 8192 = 512 blocks -> floor(52.1) = 52 sequences.
  EXPECT_TRUE(c.fits);
  EXPECT_EQ(c.reserve, 8'000'000'000);
  EXPECT_EQ(c.weights, 16'060'522'496);
  EXPECT_EQ(c.kv_budget, 55'939'477'504);
  EXPECT_EQ(c.block_bytes, 2'097'152);
  EXPECT_EQ(c.blocks, 26674);
  EXPECT_EQ(c.max_context, 426784);
  EXPECT_EQ(c.max_batch, 52);
  // int8 KV (34/32 of a byte per value): 2*32*8*4*34 = 69632 B/token, 16 tokens = 1114112 B;
  // 55939477504 / 1114112 = 50209.4 -> 50209 blocks -> 803344 tokens at batch 1.
  const Capacity q = capacity(m, h100, KvType::int8, KvType::int8, WeightType::f16, 1, 8192);
  EXPECT_EQ(q.max_context, 803344);
  // Contiguous (block 1) at batch 4: 55939477504 / (4 x 131072) = 106696.2 -> 106696.
  const Capacity b4 = capacity(m, h100, KvType::f16, KvType::f16, WeightType::f16, 4, 8192, {0.10, 1});
  EXPECT_EQ(b4.max_context, 106696);
}

TEST(AnalyzeCapacity, DoesNotFit) {
  // Llama-3-70B in f16: 2 x 70553706496 = 141.1e9 bytes > 141e9 of an H200.
  const ModelConfig m = find_model("llama-3-70b");
  const Capacity c = capacity(m, find_device("h200"), KvType::f16, KvType::f16, WeightType::f16, 1, 8192);
  EXPECT_FALSE(c.fits);
  EXPECT_LT(c.kv_budget, 0);
  EXPECT_EQ(c.blocks, 0);
  EXPECT_EQ(c.max_context, 0);
  EXPECT_EQ(c.max_batch, 0);
  // Q4_0 weights (18/32 byte): ceil(70553706496 x 18 / 32) = 39686459904 bytes: it fits.
  const Capacity q = capacity(m, find_device("h200"), KvType::f16, KvType::f16, WeightType::q4_0, 1, 8192);
  EXPECT_EQ(q.weights, 39'686'459'904);
  EXPECT_TRUE(q.fits);
  EXPECT_GT(q.max_context, 8192);
  // It fits, but no room for a whole block per sequence at a huge batch.
  const Capacity b = capacity(m, find_device("h200"), KvType::f16, KvType::f16, WeightType::q4_0, 100'000'000, 8192);
  EXPECT_TRUE(b.fits);
  EXPECT_EQ(b.max_context, 0);
}

TEST(AnalyzeCapacity, Monotone) {
  const Device d = find_device("a100-80");
  for (const ModelConfig& m : builtin_models()) {
    int64_t prev = INT64_MAX;
    for (int64_t batch : {1, 2, 3, 7, 16, 100, 1000}) {
      const int64_t c = capacity(m, d, KvType::f16, KvType::f16, WeightType::f16, batch, 1).max_context;
      EXPECT_LE(c, prev) << m.name << " batch " << batch;
      prev = c;
    }
    prev = INT64_MAX;
    for (int64_t ctx : {1, 15, 16, 17, 1000, 4096, 100000}) {
      const int64_t b = capacity(m, d, KvType::f16, KvType::f16, WeightType::f16, 1, ctx).max_batch;
      EXPECT_LE(b, prev) << m.name << " context " << ctx;
      prev = b;
    }
    // Smaller storage never holds fewer tokens: f32 <= f16 <= int8 <= int4.
    prev = 0;
    for (KvType t : {KvType::f32, KvType::f16, KvType::int8, KvType::int4}) {
      const int64_t c = capacity(m, d, t, t, WeightType::q4_1, 1, 1).max_context;
      EXPECT_GE(c, prev) << m.name << " " << kv_type_name(t);
      prev = c;
    }
    // KV bytes grow with context (by whole blocks) and with batch.
    EXPECT_EQ(kv_bytes(m, KvType::f16, KvType::f16, 1, 17, 16), 2 * kv_bytes(m, KvType::f16, KvType::f16, 1, 16, 16));
    EXPECT_EQ(kv_bytes(m, KvType::f16, KvType::f16, 3, 100, 1), 300 * kv_bytes_per_token(m, KvType::f16, KvType::f16));
  }
}

// A one-layer toy: 2 query heads share 1 KV head (G = 2), head_dim 32.
ModelConfig toy() {
  ModelConfig m;
  m.name = "toy";
  m.n_layers = 1, m.hidden = 64, m.n_heads = 2, m.n_kv_heads = 1, m.head_dim = 32, m.ffn = 128, m.vocab = 100;
  m.tied_embeddings = true, m.gated_ffn = true, m.params = 1000;
  return m;
}

TEST(AnalyzeIntensity, HandCases) {
  const ModelConfig m = toy();
  // Decode, 4 cached tokens, f16 KV, 2-byte q/o:
  // FLOPs = heads x (L(4d + 5) + d) = 2 x (4 x 133 + 32) = 1128;
  // bytes = L x (K row 64 + V row 64) + 2 x heads x d x 2 = 512 + 256 = 768.
  Work w = decode_attention(m, KvType::f16, KvType::f16, 4, 2);
  EXPECT_DOUBLE_EQ(w.flops, 1128);
  EXPECT_DOUBLE_EQ(w.bytes, 768);
  // Prefill of 3 tokens: 3*4/2 = 6 scores per head; FLOPs = 2 x (6 x 133 + 3 x 32) = 1788;
  // bytes = 3 x 128 + 2 x 2 x 3 x 32 x 2 = 1152.
  w = prefill_attention(m, KvType::f16, KvType::f16, 3, 2);
  EXPECT_DOUBLE_EQ(w.flops, 1788);
  EXPECT_DOUBLE_EQ(w.bytes, 1152);
  // Matmuls: Q 64x64, K and V 32x64, O 64x64, FFN 3 x 128x64, head 100x64:
  // 4096 + 4096 + 4096 + 24576 + 6400 = 43264 weights; per token in+out:
  // 128 + 2 x 96 + 128 + 3 x 192 + 164 = 1188. Tokens 5, Q8_0 weights, 2-byte activations:
  // FLOPs = 2 x 5 x 43264 = 432640; bytes = 43264 x 34/32 + 5 x 1188 x 2 = 45968 + 11880 = 57848.
  EXPECT_EQ(matmul_params(m), 43264);
  w = weight_matmuls(m, WeightType::q8_0, 5, 2);
  EXPECT_DOUBLE_EQ(w.flops, 432640);
  EXPECT_DOUBLE_EQ(w.bytes, 57848);
}

TEST(AnalyzeIntensity, DecodeTendsTo2GOverBAndPrefillGrows) {
  for (const ModelConfig& m : builtin_models()) {
    const double G = double(m.n_heads / m.n_kv_heads), d = double(m.head_dim);
    for (KvType t : all_kv_types()) {
      // Long context: the q/o traffic vanishes; the limit is G (4d + 5) / (2 d b) = (2G/b)(1 + 5/(4d)).
      const double b = double(kv_head_bytes(m.head_dim, t)) / d;
      const double limit = 2 * G / b * (1 + 5 / (4 * d));
      const double i = decode_attention(m, t, t, 1 << 24, 2).intensity();
      EXPECT_NEAR(i, limit, 1e-4 * limit) << m.name << " " << kv_type_name(t);
      EXPECT_LT(i, limit) << "the q/o traffic can only lower it";
    }
    double prev = 0;
    for (int64_t p : {1, 2, 64, 1000, 32768}) {
      const double i = prefill_attention(m, KvType::f16, KvType::f16, p, 2).intensity();
      EXPECT_GT(i, prev) << m.name << " prompt " << p;
      prev = i;
    }
    // Matmul intensity rises with tokens and stays under its weight-only bound 2T/w.
    prev = 0;
    for (int64_t t : {1, 8, 64, 512}) {
      const double i = weight_matmuls(m, WeightType::f16, t, 2).intensity();
      EXPECT_GT(i, prev);
      EXPECT_LT(i, double(t));  // 2T / 2 bytes
      prev = i;
    }
  }
  // Decode attention is memory-bound on every device, for every model and type.
  for (const Device& dev : builtin_devices())
    for (const ModelConfig& m : builtin_models())
      EXPECT_LT(decode_attention(m, KvType::int4, KvType::int4, 4096, 2).intensity(), ridge(dev));
}

TEST(AnalyzeIntensity, RooflineTime) {
  const Device d = find_device("h100");  // ridge 989.4e12 / 3350e9 = 295.3 FLOP/B
  EXPECT_NEAR(ridge(d), 295.34, 0.01);
  EXPECT_DOUBLE_EQ(fp32_ridge(d), 20.0);  // 67e12 / 3.35e12: CUDA cores without tensor cores
  EXPECT_DOUBLE_EQ(roofline_seconds(d, {1e12, 3.35e9}), 1e12 / 989.4e12);  // compute-bound
  EXPECT_DOUBLE_EQ(roofline_seconds(d, {1e9, 3.35e9}), 1e-3);              // memory-bound
}

// --- JSON configs ---
const char* kGood = R"({"name": "my-8b", "n_layers": 32, "hidden": 4096, "n_heads": 32, "n_kv_heads": 8,
  "head_dim": 128, "ffn": 14336, "vocab": 128256, "tied_embeddings": false, "gated_ffn": true,
  "params": 8030261248, "max_context": 8192})";

TEST(AnalyzeConfig, ParsesAValidConfig) {
  const ModelConfig m = parse_model_config(kGood, "good.json");
  const ModelConfig ref = find_model("llama-3-8b");
  EXPECT_EQ(m.name, "my-8b");
  EXPECT_EQ(kv_bytes_per_token(m, KvType::f16, KvType::f16), kv_bytes_per_token(ref, KvType::f16, KvType::f16));
  EXPECT_EQ(estimated_params(m), ref.params);
  EXPECT_EQ(m.max_context, 8192);
  EXPECT_FALSE(m.tied_embeddings);
}

// Replaces the first `from` in kGood by `to`, parses, and returns the error message.
std::string error_of(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
  try {
    parse_model_config(s, "cfg.json");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << to;
  return "";
}

TEST(AnalyzeConfig, ErrorsNameTheKeyAndValue) {
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  };
  std::string e = error_of("\"n_heads\"", "\"n_head\"");
  has(e, "cfg.json"), has(e, "'n_head'"), has(e, "= 32"), has(e, "unknown key");
  e = error_of("\"vocab\": 128256,", "");
  has(e, "'vocab'"), has(e, "(missing)");
  e = error_of("\"gated_ffn\": true,", "");
  has(e, "'gated_ffn'"), has(e, "(missing)");
  e = error_of("\"n_heads\": 32", "\"n_heads\": -3");
  has(e, "'n_heads'"), has(e, "= -3"), has(e, "> 0");
  e = error_of("\"hidden\": 4096", "\"hidden\": 4096.5");
  has(e, "'hidden'"), has(e, "= 4096.5"), has(e, "integer");
  e = error_of("\"params\": 8030261248", "\"params\": 8.03e9");
  has(e, "'params'"), has(e, "= 8.03e9");
  e = error_of("\"ffn\": 14336", "\"ffn\": \"14336\"");
  has(e, "'ffn'"), has(e, "= \"14336\""), has(e, "integer");
  e = error_of("\"tied_embeddings\": false", "\"tied_embeddings\": 0");
  has(e, "'tied_embeddings'"), has(e, "= 0"), has(e, "true or false");
  e = error_of("\"n_kv_heads\": 8", "\"n_kv_heads\": 5");
  has(e, "'n_kv_heads'"), has(e, "= 5"), has(e, "divide n_heads = 32");
  e = error_of("\"vocab\": 128256", "\"vocab\": 99999999999999999999");
  has(e, "'vocab'"), has(e, "64-bit");
  e = error_of("\"name\": \"my-8b\"", "\"name\": 7");
  has(e, "'name'"), has(e, "string");
  // Syntax errors name the place.
  e = error_of("\"max_context\": 8192}", "\"max_context\": 8192,}");
  has(e, "line 3"), has(e, "string key");
  e = error_of("\"max_context\": 8192}", "\"max_context\": 8192} x");
  has(e, "after the JSON value");
  e = error_of("\"n_layers\": 32,", "\"n_layers\": 32, \"n_layers\": 32,");
  has(e, "duplicate key 'n_layers'");
  e = error_of("{", "[");
  has(e, "line 1");
}

TEST(AnalyzeConfig, JsonStringsAndTopLevel) {
  std::string s = kGood;
  s.replace(s.find("my-8b"), 5, "a\\u00e9\\ud83d\\ude00\\n");
  EXPECT_EQ(parse_model_config(s, "x").name, "a\xc3\xa9\xf0\x9f\x98\x80\n");
  EXPECT_THROW(parse_model_config("[1]", "x"), InvalidArgument);
  EXPECT_THROW(parse_model_config("", "x"), InvalidArgument);
  EXPECT_THROW(parse_model_config(std::string(100, '['), "x"), InvalidArgument);  // nesting cap
  EXPECT_THROW(load_model_config("/nonexistent/cfg.json"), InvalidArgument);
}

TEST(AnalyzeOverflow, SixtyFourBit) {
  const ModelConfig m = find_model("llama-3-70b");  // 327680 B/token in f16
  // 327680 x (2^31 - 1) = 703687441448960: past 2^32 and 2^31 x anything 32-bit.
  EXPECT_EQ(kv_bytes(m, KvType::f16, KvType::f16, 1, (int64_t(1) << 31) - 1, 1), int64_t(703'687'441'448'960));
  // 2^20 x 2^31 x 327680 ~ 7.4e20 > 2^63: an error, not a wrapped number.
  try {
    kv_bytes(m, KvType::f16, KvType::f16, int64_t(1) << 20, int64_t(1) << 31, 16);
    ADD_FAILURE() << "no overflow error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  ModelConfig huge = m;
  huge.params = int64_t(1) << 62;
  EXPECT_THROW(weight_bytes(huge, WeightType::f32), InvalidArgument);  // 2^64 bytes
  EXPECT_EQ(weight_bytes(huge, WeightType::q4_0), (int64_t(1) << 62) / 32 * 18);
  // A huge batch at capacity: the budget divides, nothing multiplies past 2^63.
  EXPECT_EQ(capacity(m, find_device("h200"), KvType::f16, KvType::f16, WeightType::q4_0, INT64_MAX, 1).max_context, 0);
}

TEST(AnalyzeArgs, BadNamesAndValues) {
  EXPECT_THROW(find_model("llama-4"), InvalidArgument);
  EXPECT_THROW(find_device("tpu"), InvalidArgument);
  EXPECT_THROW(parse_kv_type("int3"), InvalidArgument);
  EXPECT_THROW(parse_weight_type("q5_k"), InvalidArgument);
  EXPECT_EQ(parse_kv_type("INT8"), KvType::int8);
  EXPECT_EQ(find_model("Llama-3-8B").n_layers, 32);
  const ModelConfig m = find_model("llama-3-8b");
  const Device d = find_device("h100");
  EXPECT_THROW(capacity(m, d, KvType::f16, KvType::f16, WeightType::f16, 0, 1), InvalidArgument);
  EXPECT_THROW(capacity(m, d, KvType::f16, KvType::f16, WeightType::f16, 1, 0), InvalidArgument);
  EXPECT_THROW(capacity(m, d, KvType::f16, KvType::f16, WeightType::f16, 1, 1, {1.0, 16}), InvalidArgument);
  EXPECT_THROW(decode_attention(m, KvType::f16, KvType::f16, 0, 2), InvalidArgument);
  ModelConfig bad = m;
  bad.n_kv_heads = 0;
  EXPECT_THROW(kv_bytes_per_token(bad, KvType::f16, KvType::f16), InvalidArgument);
}

TEST(AnalyzeHost, MachineMemoryAndPeak) {
  const Device h = host_device(10, 0.1);
  EXPECT_GT(h.memory_bytes, int64_t(1) << 28);
  EXPECT_EQ(h.name.rfind("this machine: ", 0), 0u);
  EXPECT_THROW(host_device(0, 1), InvalidArgument);
  for (SimdLevel level : test::simd_levels()) {
    ScopedSimdLimit limit(level);
    const double p = measure_peak_tflops(1);
    EXPECT_TRUE(std::isfinite(p) && p > 1e-4) << simd_name(level) << ": " << p;  // > 0.1 GFLOP/s
  }
}

TEST(AnalyzeHost, TriadBandwidth) {
  const double gbps = measure_triad_gbps(1, size_t(3) << 20);
  EXPECT_TRUE(std::isfinite(gbps) && gbps > 0.01) << gbps;  // > 10 MB/s
  EXPECT_THROW(measure_triad_gbps(0, size_t(3) << 20), InvalidArgument);
  EXPECT_THROW(measure_triad_gbps(1, 23), InvalidArgument);
}

}  // namespace
}  // namespace llmk::analyze
