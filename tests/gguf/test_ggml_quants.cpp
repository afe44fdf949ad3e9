// ggml quant blocks: the reference quantizers are byte-identical to an independent
// implementation (the PyPI gguf package's numpy port of ggml's *_ref quantizers), the
// dequantizers read the documented layout (nibble order: qs[j] = element j low, j+16 high),
// and quantize->dequantize errors stay within the derived bound of each format.
#include <cctype>
#include <cmath>
#include <string>

#include "llmk/ggml_quants.hpp"
#include "llmk/gguf.hpp"
#include "tests/common/testutil.hpp"

namespace llmk {
namespace {

// 96 values: a block of mixed signs, a constant block, a positive ramp.
std::vector<float> golden_input() {
  std::vector<float> x;
  for (int i = 0; i < 32; ++i) x.push_back(float(((i * 37) % 29 - 14) * 0.173));
  for (int i = 0; i < 32; ++i) x.push_back(0.75f);
  for (int i = 0; i < 32; ++i) x.push_back(float(0.01 * i * i));
  return x;
}
// Bytes written by gguf 0.17.1 for golden_input() (regenerate with:
//   .venv/bin/python -c "import numpy as np, gguf; from gguf.quants import quantize; x = np.array(
//   [((i*37)%29-14)*0.173 for i in range(32)]+[0.75]*32+[0.01*i*i for i in range(32)], np.float32);
//   print(list(quantize(x.reshape(1,-1), gguf.GGMLQuantizationType.Q4_1).tobytes()))"
const std::vector<uint8_t> kGoldenQ8_0 = {226, 36,  129, 202, 18,  91,  156, 229, 45,  118, 183, 0,   73,  138, 211,
                                          27,  100, 165, 238, 54,  127, 192, 9,   82,  147, 220, 36,  109, 174, 247,
                                          64,  129, 202, 18,  12,  30,  127, 127, 127, 127, 127, 127, 127, 127, 127,
                                          127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
                                          127, 127, 127, 127, 127, 127, 127, 127, 216, 44,  0,   0,   1,   1,   2,
                                          3,   5,   6,   8,   11,  13,  16,  19,  22,  26,  30,  34,  38,  43,  48,
                                          53,  58,  64,  70,  76,  83,  89,  96,  104, 111, 119, 127};
const std::vector<uint8_t> kGoldenQ4_0 = {216, 52, 112, 181, 249, 78,  146, 214, 27,  111, 163, 248, 61, 113,
                                          197, 10, 94,  146, 0,   174, 0,   0,   0,   0,   0,   0,   0,  0,
                                          0,   0,  0,   0,   0,   0,   0,   0,   206, 188, 104, 104, 88, 88,
                                          88,  72, 72,  72,  55,  55,  39,  39,  23,  23,  22,  6};
const std::vector<uint8_t> kGoldenQ4_1 = {43,  53,  216, 192, 96,  180, 249, 77,  130, 198, 26,  94,  163, 232, 60,
                                          113, 181, 9,   77,  146, 0,   0,   0,   58,  0,   0,   0,   0,   0,   0,
                                          0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   32,  57,  0,   0,   64,
                                          80,  80,  96,  96,  112, 129, 129, 145, 161, 178, 178, 194, 211, 227, 244};

const std::vector<uint8_t> kGoldenQ5_0 = {216, 48,  204, 102, 54,  147, 224, 121, 242, 139, 19,  173, 38,  191,
                                          87,  224, 105, 241, 138, 3,   157, 37,  0,   170, 0,   0,   0,   0,
                                          0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
                                          0,   0,   206, 184, 63,  0,   0,   0,   192, 176, 176, 160, 144, 144,
                                          143, 127, 111, 111, 94,  78,  62,  45,  29,  12};
const std::vector<uint8_t> kGoldenQ5_1 = {0,   49,  216, 192, 204, 100, 54, 147, 208, 105, 242, 139, 19,  156, 37,
                                          190, 71,  223, 104, 225, 122, 3,  156, 36,  0,   0,   0,   58,  0,   0,
                                          0,   0,   0,   0,   0,   0,   0,  0,   0,   0,   0,   0,   0,   0,   0,
                                          0,   0,   0,   246, 52,  0,   0,  0,   0,   192, 255, 128, 144, 160, 192,
                                          209, 225, 1,   18,  50,  67,  99, 132, 149, 181, 214, 247};

template <class Block, class Quantize>
void expect_golden(Quantize q, const std::vector<uint8_t>& golden) {
  const std::vector<float> x = golden_input();
  test::Guarded<Block> y(x.size() / 32);
  q(x.data(), y.data(), int64_t(x.size()));
  ASSERT_EQ(golden.size(), y.size() * sizeof(Block));
  EXPECT_EQ(std::memcmp(y.data(), golden.data(), golden.size()), 0);
  EXPECT_TRUE(y.guard_intact());
}

TEST(GgmlQuants, QuantizersMatchGgufPackageBytes) {
  expect_golden<BlockQ8_0>(quantize_row_q8_0_ref, kGoldenQ8_0);
  expect_golden<BlockQ4_0>(quantize_row_q4_0_ref, kGoldenQ4_0);
  expect_golden<BlockQ4_1>(quantize_row_q4_1_ref, kGoldenQ4_1);
  expect_golden<BlockQ5_0>(quantize_row_q5_0_ref, kGoldenQ5_0);
  expect_golden<BlockQ5_1>(quantize_row_q5_1_ref, kGoldenQ5_1);
}

// The traits table: one row per WType in enum order, its block sizes those the GGUF parser
// knows for the ggml id (gguf_types.cpp), names that round-trip, and ggml's type names.
TEST(GgmlQuants, TraitsTableAgreesWithTheGgufTypes) {
  for (int i = 0; i < kWTypeCount; ++i) {
    const WTypeTraits& t = wtype_traits(WType(i));
    EXPECT_EQ(int(t.type), i);
    const auto g = gguf::GgmlType(t.ggml_type);
    EXPECT_TRUE(gguf::ggml_type_supported(g)) << t.name;
    EXPECT_EQ(gguf::ggml_block_elems(g), t.block_elems) << t.name;
    EXPECT_EQ(gguf::ggml_block_bytes(g), t.block_bytes) << t.name;
    std::string upper = t.name;
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(upper, gguf::ggml_type_name(g));
    EXPECT_EQ(wtype_traits_named(t.name), &t);
    EXPECT_EQ(wtype_traits_for_ggml(t.ggml_type), &t);
  }
  for (auto g : {gguf::GgmlType::Q8_1, gguf::GgmlType::Q8_K, gguf::GgmlType::IQ4_XS, gguf::GgmlType::TQ2_0}) {
    EXPECT_FALSE(gguf::ggml_type_supported(g)) << gguf::ggml_type_name(g);
    EXPECT_EQ(wtype_traits_for_ggml(uint32_t(g)), nullptr);
  }
  EXPECT_EQ(wtype_traits_named("q7_0"), nullptr);
  EXPECT_EQ(gguf::supported_types_list(), "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K");
}

TEST(GgmlQuants, DequantizersReadTheDocumentedLayout) {
  // d = 0.5 and m = -1.0 are exact in f16; qs[j] = j (low) | (15 - j) (high).
  BlockQ4_0 b40{f32_to_f16_bits(0.5f), {}};
  BlockQ4_1 b41{f32_to_f16_bits(0.5f), f32_to_f16_bits(-1.0f), {}};
  BlockQ8_0 b80{f32_to_f16_bits(0.5f), {}};
  for (int j = 0; j < 16; ++j) b40.qs[j] = b41.qs[j] = uint8_t(j | ((15 - j) << 4));
  for (int j = 0; j < 32; ++j) b80.qs[j] = int8_t(j * 8 - 128);
  test::Guarded<float> y(32);
  dequantize_row_q4_0_ref(&b40, y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;
  }
  dequantize_row_q4_1_ref(&b41, y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 1.0f) << j;
  }
  dequantize_row_q8_0_ref(&b80, y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.5f) << j;
  EXPECT_TRUE(y.guard_intact());
}

// Round-trip error bounds. With d the f32 scale and d16 its f16 rounding (|d16 - d| <= d * 2^-11):
//  Q8_0: q = round(x/d) is within 1/2 step: |x - q*d16| <= d/2 + 127 * d * 2^-11;
//  Q4_1: same with 15 steps above m16 (|m16 - m| <= |m| * 2^-11): d/2 + 15*d*2^-11 + |m|*2^-11;
//  Q4_0: the step grid -8..7 misses +8*d (the end opposite the largest magnitude), so one full
//        step there: d + 8 * d * 2^-11.
// Plus a few f32 ulps of the largest magnitude for the products and sums.
TEST(GgmlQuants, RoundTripWithinDerivedBounds) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 5.0f);
  for (int64_t n : {32, 1024, 1056}) {
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    std::vector<BlockQ8_0> q8(static_cast<size_t>(n / 32));
    std::vector<BlockQ4_0> q40(static_cast<size_t>(n / 32));
    std::vector<BlockQ4_1> q41(static_cast<size_t>(n / 32));
    const float h = std::ldexp(1.0f, -11), eps = std::numeric_limits<float>::epsilon();
    auto check = [&](const char* what, auto bound) {
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0, mn = x[size_t(b * 32)], mx = mn;
        for (int j = 0; j < 32; ++j) {
          const float v = x[size_t(b * 32 + j)];
          amax = std::max(amax, std::fabs(v));
          mn = std::min(mn, v);
          mx = std::max(mx, v);
        }
        const float tol = bound(amax, mn, mx) + 8 * eps * amax;
        for (int j = 0; j < 32; ++j)
          ASSERT_LE(std::fabs(x[size_t(b * 32 + j)] - y[size_t(b * 32 + j)]), tol)
              << what << " n=" << n << " i=" << b * 32 + j;
      }
    };
    quantize_row_q8_0_ref(x.data(), q8.data(), n);
    dequantize_row_q8_0_ref(q8.data(), y.data(), n);
    check("q8_0", [&](float amax, float, float) {
      const float d = amax / 127;
      return d / 2 + 127 * d * h;
    });
    quantize_row_q4_0_ref(x.data(), q40.data(), n);
    dequantize_row_q4_0_ref(q40.data(), y.data(), n);
    check("q4_0", [&](float amax, float, float) {
      const float d = amax / 8;
      return d + 8 * d * h;
    });
    quantize_row_q4_1_ref(x.data(), q41.data(), n);
    dequantize_row_q4_1_ref(q41.data(), y.data(), n);
    check("q4_1", [&](float, float mn, float mx) {
      const float d = (mx - mn) / 15;
      return d / 2 + 15 * d * h + std::fabs(mn) * h;
    });
  }
}

// gguf::dequantize_row dispatches each supported type to its reference conversion.
TEST(GgmlQuants, DequantizeRowEveryType) {
  constexpr size_t N = 1056;  // 33 blocks
  const int64_t n = int64_t(N);
  std::mt19937 rng(5);
  std::vector<uint8_t> raw(N * 4);
  for (auto& b : raw) b = uint8_t(rng());
  std::vector<uint16_t> halves(N);
  for (auto& h : halves) h = uint16_t(rng() & 0x7bff);  // finite f16 (exponent < 31) and bf16
  std::vector<BlockQ8_0> q8(N / 32);
  std::vector<BlockQ4_0> q40(N / 32);
  std::vector<BlockQ4_1> q41(N / 32);
  for (size_t b = 0; b < q8.size(); ++b) {
    q8[b].d = q40[b].d = q41[b].d = halves[b];
    q41[b].m = halves[b + 40];
    for (int j = 0; j < 32; ++j) q8[b].qs[j] = int8_t(raw[b * 32 + size_t(j)]);
    for (int j = 0; j < 16; ++j) q40[b].qs[j] = q41[b].qs[j] = raw[b * 16 + size_t(j) + 7];
  }
  std::vector<float> want(N);
  test::Guarded<float> got(N);
  auto check = [&](gguf::GgmlType t, const void* src) {
    gguf::dequantize_row(t, src, got.data(), n);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), N * 4), 0) << gguf::ggml_type_name(t);
    EXPECT_TRUE(got.guard_intact());
  };
  std::vector<float> f32(N);
  for (int64_t i = 0; i < n; ++i) f32[size_t(i)] = float(i) * 0.25f - 7.0f;
  want = f32;
  check(gguf::GgmlType::F32, f32.data());
  for (int64_t i = 0; i < n; ++i) want[size_t(i)] = f16_bits_to_f32(halves[size_t(i)]);
  check(gguf::GgmlType::F16, halves.data());
  for (int64_t i = 0; i < n; ++i) want[size_t(i)] = bf16_bits_to_f32(halves[size_t(i)]);
  check(gguf::GgmlType::BF16, halves.data());
  dequantize_row_q8_0_ref(q8.data(), want.data(), n);
  check(gguf::GgmlType::Q8_0, q8.data());
  dequantize_row_q4_0_ref(q40.data(), want.data(), n);
  check(gguf::GgmlType::Q4_0, q40.data());
  dequantize_row_q4_1_ref(q41.data(), want.data(), n);
  check(gguf::GgmlType::Q4_1, q41.data());
  EXPECT_THROW(gguf::dequantize_row(gguf::GgmlType::IQ4_XS, q8.data(), got.data(), 256), InvalidArgument);
  EXPECT_THROW(gguf::dequantize_row(gguf::GgmlType::Q4_K, q8.data(), got.data(), 32), InvalidArgument);
  EXPECT_THROW(gguf::dequantize_row(gguf::GgmlType::Q8_0, q8.data(), got.data(), 33), InvalidArgument);
}

TEST(GgmlQuants, RejectsLengthsNotMultipleOf32) {
  std::vector<float> x(64);
  std::vector<BlockQ4_1> q(2);
  EXPECT_THROW(quantize_row_q4_1_ref(x.data(), q.data(), 33), InvalidArgument);
  EXPECT_THROW(dequantize_row_q8_0_ref(nullptr, x.data(), -32), InvalidArgument);
}

TEST(GgmlQuants, RejectsNonFiniteValuesNamingThem) {
  const auto expect_named = [](auto fn, const std::string& what) {
    const std::string m = test::invalid_argument_message(fn);
    EXPECT_NE(m.find("'" + what + "'"), std::string::npos) << m;
  };
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x(64, 0.5f);
    x[37] = bad;
    std::vector<BlockQ8_0> q8(2);
    std::vector<BlockQ4_0> q40(2);
    std::vector<BlockQ4_1> q41(2);
    expect_named([&] { quantize_row_q8_0_ref(x.data(), q8.data(), 64); }, "x[37]");
    expect_named([&] { quantize_row_q4_0_ref(x.data(), q40.data(), 64); }, "x[37]");
    expect_named([&] { quantize_row_q4_1_ref(x.data(), q41.data(), 64); }, "x[37]");
  }
}

}  // namespace
}  // namespace llmk
