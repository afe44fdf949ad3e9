// The SIMD layer (src/core/simd.hpp) on every ISA this CPU has: exp2_nonpos
// (the softmax-sum 2^t, t <= 0) against std::exp2 in double over the whole
// t <= 0 range, Exp2Scaled (2^(x s - c)) against the exact x s - c for every
// scale and offset, and bf16 stores against the scalar conversion.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/simd.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {
void exp2_nonpos_avx2(const float* x, float* y, int n);
void exp2_nonpos_avx512(const float* x, float* y, int n);
void exp2_scaled_avx2(const float* x, float scale, float c, float* y, int n);
void exp2_scaled_avx512(const float* x, float scale, float c, float* y, int n);
void bf16_roundtrip_avx2(const float* x, bf16* y, int n);
void bf16_roundtrip_avx512(const float* x, bf16* y, int n);
}  // namespace llmk::test

namespace {
using namespace llmk;
struct Isa {
  SimdLevel level;
  void (*bf16)(const float*, bf16*, int);
  void (*exp2_nonpos)(const float*, float*, int);
  void (*exp2_scaled)(const float*, float, float, float*, int);
};
std::vector<Isa> isas() {
  std::vector<Isa> v;
  if (detected_simd_level() >= SimdLevel::avx2)
    v.push_back({SimdLevel::avx2, test::bf16_roundtrip_avx2, test::exp2_nonpos_avx2, test::exp2_scaled_avx2});
  if (detected_simd_level() >= SimdLevel::avx512)
    v.push_back({SimdLevel::avx512, test::bf16_roundtrip_avx512, test::exp2_nonpos_avx512, test::exp2_scaled_avx512});
  return v;
}
}  // namespace

// exp2_nonpos's stated bound: |y - 2^t| <= 1.75e-7 * 2^t + 2^-150 for t >
// -126.5 (1.75e-7: the degree-5 polynomial's fit with f32 coefficients and
// FMA Horner; the worst seen is printed, 1.66e-7 with AVX2; 2^-150: half the
// subnormal spacing, where p * 2^-126 rounds to a subnormal), exactly 0 from
// -126.5 down and for -inf, 1 at -0, NaN for NaN. The polynomial sees only r =
// t - round(t), so every 61st f32 bit pattern from -0 to -128 (18.4 million t,
// every binade and every r region) plus the rounding boundaries n +- 1/2 covers
// the range; the test can fail on a wrong coefficient, a wrong clamp or a lost
// NaN.
TEST(Simd, Exp2NonposWithinBoundOnEveryNonpositiveInput) {
  if (isas().empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  std::vector<float> t;
  for (uint32_t b = 0x80000000u; b <= 0xC3000000u; b += 61) {
    float v;
    std::memcpy(&v, &b, 4);
    t.push_back(v);
  }
  for (int n = 0; n >= -128; --n)
    for (float h : {-0.5f, 0.5f}) {
      const float v = float(n) + h;
      if (v <= 0) {
        t.push_back(v);
        t.push_back(std::nextafter(v, 1.0f));
        t.push_back(std::nextafter(v, -1.0f));
      }
    }
  for (float v : {-0.0f, 0.0f, -126.0f, -127.0f, -1e30f, -std::numeric_limits<float>::max()}) t.push_back(v);
  t.push_back(-std::numeric_limits<float>::infinity());
  t.push_back(std::nanf(""));
  while (t.size() % 16) t.push_back(-1.0f);
  for (const auto& isa : isas()) {
    std::vector<float> y(t.size());
    isa.exp2_nonpos(t.data(), y.data(), int(t.size()));
    double worst = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (std::isnan(t[i])) {
        ASSERT_TRUE(std::isnan(y[i])) << simd_name(isa.level);
        continue;
      }
      if (t[i] <= -126.5f) {
        ASSERT_EQ(y[i], 0.0f) << simd_name(isa.level) << " t=" << t[i];
        continue;
      }
      const double e = std::exp2(double(t[i]));
      const double err = std::fabs(double(y[i]) - e);
      ASSERT_LE(err, 1.75e-7 * e + std::ldexp(1.0, -150)) << simd_name(isa.level) << " t=" << t[i] << " got " << y[i];
      if (t[i] >= -125.0f) worst = std::max(worst, err / e);
    }
    RecordProperty(std::string("exp2_nonpos_max_rel_err_") + simd_name(isa.level), std::to_string(worst));
    std::printf("exp2_nonpos %s: max relative error %.3g for t >= -125\n", simd_name(isa.level), worst);
  }
}

// Exp2Scaled (2^(x * s - c): the product and the offset folded into the
// reduction, a table of 2^(j / 8) and a degree-3 polynomial): |y - 2^t| <=
// 1.9e-7 * 2^t + 2^-150 against the exact t = x s - c in double when -126 <= t
// <= 120 (the table entry's share 3.2e-8, the polynomial's 2.5e-8, its FMA
// rounding and the final multiply's one ulp each, the rounding of r: every
// term below 6e-8); below -126 the result's exponent field may be 0 (a
// subnormal without the implicit one), so there only |y - 2^t| <= 2^-126;
// exactly 0 for x = -inf and from t = -127.5 down (x is clamped to (c - 127)
// / s), NaN for NaN. Scales from the smallest allowed (2^-100) to 3e7 (T =
// 4.8e-8), offsets 0 (attention), the least one above a logit's x s
// (offset_for, as the topk scan picks them) and the ends +-2^18; x over every
// 61 * 7-th f32 t in [-128, 0] and every 61 * 97-th in [0, 119], plus the
// ends. The table and the polynomial are checked for every j: t covers every
// residue. A wrong offset (c1 or lo) moves every result: the test fails.
TEST(Simd, Exp2ScaledWithinBoundForEveryScaleAndOffset) {
  if (isas().empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> t;
  for (uint32_t b = 0x80000000u; b <= 0xC3000000u; b += 61 * 7) {
    float v;
    std::memcpy(&v, &b, 4);
    t.push_back(v);
  }
  for (uint32_t b = 0; b <= 0x42EE0000u; b += 61 * 97) {  // 0 .. 119
    float v;
    std::memcpy(&v, &b, 4);
    t.push_back(v);
  }
  for (float v : {-0.0f, 0.0f, -126.5f, -127.0f, -127.5f, -128.0f, 119.0f}) t.push_back(v);
  for (float s : {1.0f, 1.44269504f, 0.37f, 1000.0f, 3.0e7f, 0x1p-100f}) {
    const double near = simd::exp2_offset_for(12.34f, s);  // 12.34 s rounded up to 1/8
    for (double c : {0.0, near, 0x1p18, -0x1p18}) {
      if (c != c) continue;  // 12.34 * 3e7 is beyond the offsets
      std::vector<float> x;
      for (float v : t) x.push_back(float((double(v) + c) / s));
      for (float v : {-std::numeric_limits<float>::max(), -inf, std::nanf("")}) x.push_back(v);
      while (x.size() % 16) x.push_back(float((c - 1) / s));
      for (const auto& isa : isas()) {
        std::vector<float> y(x.size());
        isa.exp2_scaled(x.data(), s, float(c), y.data(), int(x.size()));
        double worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          const auto at = [&] {
            return std::string(simd_name(isa.level)) + " s=" + std::to_string(s) + " c=" + std::to_string(c) +
                   " x=" + std::to_string(x[i]);
          };
          if (std::isnan(x[i])) {
            ASSERT_TRUE(std::isnan(y[i])) << at();
            continue;
          }
          const double ti = double(x[i]) * double(s) - c, e = std::exp2(ti);
          if (ti <= -127.5 || x[i] == -inf) {
            ASSERT_EQ(y[i], 0.0f) << at();
            continue;
          }
          if (ti < -126) {
            ASSERT_LE(std::fabs(double(y[i]) - e), std::ldexp(1.0, -126)) << at();
            continue;
          }
          ASSERT_LE(ti, 120.0) << at();  // the sweep stays in the stated range
          const double err = std::fabs(double(y[i]) - e);
          ASSERT_LE(err, 1.9e-7 * e + std::ldexp(1.0, -150)) << at() << " got " << y[i];
          if (ti >= -125) worst = std::max(worst, err / e);
        }
        std::printf("exp2_scaled %s s=%g c=%g: max relative error %.3g for -125 <= x s - c <= 120\n",
                    simd_name(isa.level), s, c, worst);
      }
    }
  }
}

TEST(Simd, Bf16StoreMatchesScalar) {
  if (isas().empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  std::vector<float> x(4096);
  test::fill_normal(x.data(), x.size(), 11, 0.0, 1e3);
  x[3] = std::nanf("");
  x[4] = -std::numeric_limits<float>::infinity();
  uint32_t b = 0x7fffffffu;  // NaN with all payload bits: must stay NaN, not wrap
  std::memcpy(&x[5], &b, 4);
  for (const auto& isa : isas()) {
    std::vector<bf16> y(x.size());
    isa.bf16(x.data(), y.data(), int(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        ASSERT_TRUE(std::isnan(to_f32(y[i]))) << i;
        continue;
      }
      ASSERT_EQ(y[i].bits, f32_to_bf16_bits(x[i])) << simd_name(isa.level) << " at " << i;
    }
  }
}
