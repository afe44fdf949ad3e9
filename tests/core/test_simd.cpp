// The SIMD layer (src/core/simd.hpp) on every ISA this CPU has: the vector exp
// against std::exp in double, and bf16 stores against the scalar conversion.
#include <cmath>
#include <limits>
#include <vector>

#include "tests/common/testutil.hpp"

namespace llmk::test {
void exp_avx2(const float* x, float* y, int n);
void exp_avx512(const float* x, float* y, int n);
void bf16_roundtrip_avx2(const float* x, bf16* y, int n);
void bf16_roundtrip_avx512(const float* x, bf16* y, int n);
}  // namespace llmk::test

namespace {
using namespace llmk;
struct Isa {
  SimdLevel level;
  void (*exp)(const float*, float*, int);
  void (*bf16)(const float*, bf16*, int);
};
std::vector<Isa> isas() {
  std::vector<Isa> v;
  if (detected_simd_level() >= SimdLevel::avx2) v.push_back({SimdLevel::avx2, test::exp_avx2, test::bf16_roundtrip_avx2});
  if (detected_simd_level() >= SimdLevel::avx512)
    v.push_back({SimdLevel::avx512, test::exp_avx512, test::bf16_roundtrip_avx512});
  return v;
}
}  // namespace

TEST(Simd, ExpWithinTwoUlpEverywhere) {
  if (isas().empty()) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  std::vector<float> x;
  for (double v = -110.0; v <= 90.0; v += 0.0037) x.push_back(float(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.0f, -103.9f, -104.0f}) x.push_back(v);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::nanf(""));
  while (x.size() % 16) x.push_back(0.0f);
  for (const auto& isa : isas()) {
    std::vector<float> y(x.size());
    isa.exp(x.data(), y.data(), int(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = std::exp(double(x[i]));
      if (std::isnan(x[i])) {
        ASSERT_TRUE(std::isnan(y[i]));
        continue;
      }
      const float ef = float(e);
      if (std::isinf(ef) || ef == 0.0f) {
        ASSERT_EQ(y[i], ef) << simd_name(isa.level) << " x=" << x[i];
        continue;
      }
      // ulp of the exact result (subnormals: the subnormal spacing)
      const double ulp = std::max(double(std::nextafter(ef, INFINITY) - ef), 1.401298464324817e-45);
      ASSERT_LE(std::fabs(double(y[i]) - e), 2.0 * ulp) << simd_name(isa.level) << " x=" << x[i] << " got " << y[i];
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
