// KV storage types: block sizes, the int4 nibble order, and the reference
// round trip within the analytic bound of llmk/kv_quant.hpp on every element,
// including outlier channels, a partial last group (head_dim 80) and constant groups.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "llmk/kv_quant.hpp"
#include "tests/common/testutil.hpp"

using namespace llmk;

TEST(KvQuant, RowBytes) {
  EXPECT_EQ(kv_row_bytes(KvType::f32, 128), 512);
  EXPECT_EQ(kv_row_bytes(KvType::f16, 128), 256);
  EXPECT_EQ(kv_row_bytes(KvType::bf16, 80), 160);
  EXPECT_EQ(kv_row_bytes(KvType::int8, 128), 4 * 34);
  EXPECT_EQ(kv_row_bytes(KvType::int4, 128), 4 * 20);
  EXPECT_EQ(kv_row_bytes(KvType::int8, 80), 3 * 34);  // partial last group
  EXPECT_EQ(parse_kv_type("int4"), KvType::int4);
  EXPECT_THROW(parse_kv_type("q3"), InvalidArgument);
}

// Every spelling of the table is taken and named in the error; rows are indexed by the enum.
TEST(KvQuant, TypeTable) {
  const std::pair<const char*, KvType> spellings[] = {{"f32", KvType::f32},   {"f16", KvType::f16},
                                                      {"bf16", KvType::bf16}, {"int8", KvType::int8},
                                                      {"q8", KvType::int8},   {"int4", KvType::int4},
                                                      {"q4", KvType::int4}};
  for (const auto& s : spellings) EXPECT_EQ(parse_kv_type(s.first), s.second) << s.first;
  for (int i = 0; i < kKvTypeCount; ++i) EXPECT_EQ(kv_type_traits(KvType(i)).type, KvType(i));
  EXPECT_EQ(kv_type_traits_named("Q8"), nullptr);
  EXPECT_STREQ(kv_type_name(KvType::int8), "int8");
  EXPECT_STREQ(kv_type_traits(KvType::int4).cli_name, "q4");
  EXPECT_EQ(kv_type_choices(), "f32|f16|bf16|q8|q4 (or int8|int4)");
  try {
    parse_kv_type("q3", "--kv-type");
    ADD_FAILURE() << "q3 parsed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'--kv-type' = q3: must be f32|f16|bf16|q8|q4 (or int8|int4)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(kv_type_traits(KvType(kKvTypeCount)), InvalidArgument);
  EXPECT_EQ(kv_type_align(KvType::f32), 4);
  EXPECT_EQ(kv_type_align(KvType::int4), 2);
  EXPECT_TRUE(kv_type_quantized(KvType::int4));
  EXPECT_FALSE(kv_type_quantized(KvType::bf16));
  // A row past 2^62 values still counts its groups without overflowing.
  EXPECT_EQ(kv_row_bytes(KvType::int4, INT64_MAX), (INT64_MAX / 32 + 1) * 20);
}

TEST(KvQuant, Int4NibbleOrderIsGgmlQ41) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j % 16);  // min 0, max 15: d = 1, q = value
  BlockQ4 b;
  kv_quantize_row(KvType::int4, x, 32, &b);
  EXPECT_EQ(f16_bits_to_f32(b.d), 1.0f);
  EXPECT_EQ(f16_bits_to_f32(b.m), 0.0f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;  // element j low, j+16 high
  float y[32];
  kv_dequantize_row(KvType::int4, &b, 32, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

// A zero min (or max) of an int4 group is stored as +0, whichever signed
// zero comes first: the CUDA append reduces in a tree and must store the same bytes.
TEST(KvQuant, Int4ZeroMinIsPositiveZero) {
  for (bool neg_first : {false, true}) {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = 1.0f + float(j);
    x[0] = neg_first ? -0.0f : 0.0f;
    x[1] = neg_first ? 0.0f : -0.0f;
    BlockQ4 b;
    kv_quantize_row(KvType::int4, x, 32, &b);
    EXPECT_EQ(b.m, 0x0000) << neg_first;
    float z[32];
    for (int j = 0; j < 32; ++j) z[j] = (j % 2 == 0) == neg_first ? -0.0f : 0.0f;  // every element a zero
    kv_quantize_row(KvType::int4, z, 32, &b);
    EXPECT_EQ(b.m, 0x0000) << neg_first;
    EXPECT_EQ(b.d, 0x0000) << neg_first;
  }
}

TEST(KvQuant, Int8IsSymmetricQ80) {
  float x[32] = {};
  x[0] = -127.0f, x[5] = 63.5f, x[31] = 1.0f;
  BlockQ8 b;
  kv_quantize_row(KvType::int8, x, 32, &b);
  EXPECT_EQ(f16_bits_to_f32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[5], 64);  // 63.5 rounds half to even
  EXPECT_EQ(b.qs[31], 1);
}

// Every element of every group within kv_error_bound, and the bound is below
// one quantization step (it is half a step plus the f16 rounding of scale/min).
TEST(KvQuant, RoundTripWithinOneStep) {
  for (KvType t : {KvType::f16, KvType::bf16, KvType::int8, KvType::int4})
    for (int64_t n : {16, 32, 80, 128, 256}) {
      std::vector<float> x(static_cast<size_t>(n));
      test::fill_normal(x.data(), x.size(), uint64_t(n) * 7 + int(t), 0.3, 1.5);
      x[3] *= 40.0f;                                                  // an outlier channel
      if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.75f);  // a constant group: d = 0
      std::vector<uint8_t> q(static_cast<size_t>(kv_row_bytes(t, n)) + 64, 0xA5);
      kv_quantize_row(t, x.data(), n, q.data());
      for (size_t i = size_t(kv_row_bytes(t, n)); i < q.size(); ++i) ASSERT_EQ(q[i], 0xA5) << "write past the row";
      std::vector<float> y(static_cast<size_t>(n));
      kv_dequantize_row(t, q.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i) {
        const double bound = kv_error_bound(t, x.data(), n, q.data(), i);
        ASSERT_LE(std::fabs(double(y[i]) - x[i]), bound) << kv_type_name(t) << " n=" << n << " i=" << i;
        if (kv_type_quantized(t)) {
          double amax = 0;
          for (int64_t j = i / 32 * 32; j < std::min<int64_t>(n, i / 32 * 32 + 32); ++j)
            amax = std::max(amax, std::fabs(double(x[j])));
          const double step = t == KvType::int8 ? amax / 127 : 2 * amax / 15;  // the step is at most this
          ASSERT_LE(bound, step * (1 + 0x1p-9) + 1e-30) << kv_type_name(t);
        }
      }
    }
}

TEST(KvQuant, F32IsExact) {
  std::vector<float> x(64), y(64);
  test::fill_normal(x.data(), 64, 1);
  std::vector<uint8_t> q(256);
  kv_quantize_row(KvType::f32, x.data(), 64, q.data());
  kv_dequantize_row(KvType::f32, q.data(), 64, y.data());
  EXPECT_EQ(x, y);
}

// A group holding a NaN or an infinity reads back as NaN in every element
// (NaN scale, quants 0: the same bits the CUDA append stores); the row's other
// groups are quantized as usual.
TEST(KvQuant, NonFiniteGroupReadsBackAsNan) {
  for (KvType t : {KvType::int8, KvType::int4})
    for (float bad : {NAN, INFINITY, -INFINITY})
      for (int pos : {0, 17, 31}) {
        std::vector<float> x(80), y(80), ref(80);
        test::fill_normal(x.data(), x.size(), 3);
        std::vector<uint8_t> q(size_t(kv_row_bytes(t, 80))), r(q.size());
        kv_quantize_row(t, x.data(), 80, r.data());
        kv_dequantize_row(t, r.data(), 80, ref.data());
        x[32 + size_t(pos)] = bad;  // group 1 of 3 (the last one holds 16 values)
        kv_quantize_row(t, x.data(), 80, q.data());
        kv_dequantize_row(t, q.data(), 80, y.data());
        const std::string what = std::string(kv_type_name(t)) + " " + std::to_string(bad) + " at " +
                                 std::to_string(pos);
        for (int j = 0; j < 80; ++j) {
          if (j >= 32 && j < 64) ASSERT_TRUE(std::isnan(y[size_t(j)])) << what << " element " << j;
          else ASSERT_EQ(y[size_t(j)], ref[size_t(j)]) << what << " element " << j;
        }
        const size_t bb = t == KvType::int8 ? sizeof(BlockQ8) : sizeof(BlockQ4);
        const uint8_t* g1 = q.data() + bb;
        uint16_t d;
        std::memcpy(&d, g1, 2);
        EXPECT_EQ(d, 0x7e00) << what;
        for (size_t b = t == KvType::int8 ? 2 : 4; b < bb; ++b) EXPECT_EQ(g1[b], 0) << what << " byte " << b;
      }
}
