// f16/bf16 conversions against exhaustive and hand-picked cases.
#include <cmath>
#include <limits>

#include "llmk/dtype.hpp"
#include "llmk/cpu_features.hpp"
#include "tests/common/testutil.hpp"

using namespace llmk;

TEST(DType, F16RoundTripsEveryHalf) {
  // Every one of the 65536 f16 bit patterns survives f16 -> f32 -> f16
  // (NaNs stay NaN, possibly quieted).
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_bits_to_f32(uint16_t(h));
    const uint16_t back = f32_to_f16_bits(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_bits_to_f32(back))) << h;
    } else {
      ASSERT_EQ(back, h) << "bits " << h << " value " << f;
    }
  }
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units: tie -> even (2)
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(std::nanf("")))));
}

TEST(DType, F16MatchesNearestOnRandomFloats) {
  // Independent oracle: the nearest representable half by brute search of the
  // two neighbours of the truncated value.
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-70000.f, 70000.f);
  for (int i = 0; i < 200000; ++i) {
    const float f = (i % 2) ? u(g) : u(g) * 1e-6f;
    const uint16_t h = f32_to_f16_bits(f);
    const double got = f16_bits_to_f32(h);
    if (std::isinf(got)) {
      ASSERT_GE(std::fabs(f), 65520.0f);
      continue;
    }
    // neighbours of h in magnitude
    const double up = f16_bits_to_f32(uint16_t(h + 1)), dn = (h & 0x7fff) ? f16_bits_to_f32(uint16_t(h - 1)) : got;
    ASSERT_LE(std::fabs(got - f), std::fabs(up - f) + 1e-30) << f;
    ASSERT_LE(std::fabs(got - f), std::fabs(dn - f) + 1e-30) << f;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  float f;
  uint32_t b = 0x3f808000u;  // exactly halfway between 0x3f80 and 0x3f81 -> even (0x3f80)
  std::memcpy(&f, &b, 4);
  EXPECT_EQ(f32_to_bf16_bits(f), 0x3f80);
  b = 0x3f818000u;  // halfway, odd below -> rounds up to 0x3f82
  std::memcpy(&f, &b, 4);
  EXPECT_EQ(f32_to_bf16_bits(f), 0x3f82);
  b = 0x3f808001u;
  std::memcpy(&f, &b, 4);
  EXPECT_EQ(f32_to_bf16_bits(f), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
}

TEST(DType, BulkConvertMatchesScalarOnEverySimdPath) {
  const size_t n = 1025;
  std::vector<float> src(n);
  llmk::test::fill_normal(src.data(), n, 3, 0.0, 100.0);
  src[5] = std::numeric_limits<float>::infinity();
  src[6] = std::nanf("");
  for (auto level : llmk::test::simd_levels()) {
    ScopedSimdLimit lim(level);
    llmk::test::Guarded<uint16_t> h(n);
    convert(src.data(), DType::f32, h.data(), DType::f16, n);
    EXPECT_TRUE(h.guard_intact()) << simd_name(level);
    std::vector<float> back(n);
    convert(h.data(), DType::f16, back.data(), DType::f32, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], f32_to_f16_bits(src[i])) << simd_name(level) << " at " << i;
      const float e = f16_bits_to_f32(h[i]);
      if (std::isnan(e)) ASSERT_TRUE(std::isnan(back[i]));
      else ASSERT_EQ(back[i], e);
    }
  }
}

TEST(DType, ParseRejectsUnknownNamesWithTheValue) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  try {
    parse_dtype("f64", "kv_type");
    FAIL() << "expected InvalidArgument";
  } catch (const llmk::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'kv_type' = f64"), std::string::npos) << e.what();
  }
}
