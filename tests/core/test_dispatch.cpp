// The SIMD cap, the dispatch helper's fall-through rule, and the thread count.
#include "core/dispatch.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/parallel.hpp"
#include "tests/common/testutil.hpp"

TEST(Dispatch, LimitCapsTheLevelAndRestores) {
  const auto detected = llmk::detected_simd_level();
  {
    llmk::ScopedSimdLimit lim(llmk::SimdLevel::scalar);
    EXPECT_EQ(llmk::simd_level(), llmk::SimdLevel::scalar);
  }
  EXPECT_LE(static_cast<int>(llmk::simd_level()), static_cast<int>(detected));
  EXPECT_THROW(llmk::parse_simd_level("sse9"), llmk::InvalidArgument);
  std::printf("detected SIMD level: %s\n", llmk::simd_name(detected));
}

TEST(Parallel, ThreadCountIsSettable) {
  const int before = llmk::num_threads();
  EXPECT_GE(before, 1);
  llmk::set_num_threads(3);
  EXPECT_EQ(llmk::num_threads(), 3);
  llmk::set_num_threads(before);
}

TEST(Dispatch, LimitNeverLiftsTheLevelAboveTheDetectedOne) {
  // detected_simd_level() carries the LLMK_SIMD cap: a capped run must stay a smaller machine.
  EXPECT_LE(static_cast<int>(llmk::detected_simd_level()), static_cast<int>(llmk::cpu_simd_level()));
  llmk::ScopedSimdLimit lim(llmk::SimdLevel::avx512vbmi);
  EXPECT_EQ(llmk::simd_level(), llmk::detected_simd_level());
}

namespace {
using llmk::SimdLevel;
constexpr SimdLevel kLevels[] = {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512, SimdLevel::avx512vnni,
                                 SimdLevel::avx512vbmi};
// Paths with gaps: avx512 and avx512vbmi have none of their own.
constexpr llmk::simd::Paths<int> kGaps{.scalar = 0, .avx2 = 1, .avx512vnni = 3};
constexpr llmk::simd::Paths<int> kFull{.scalar = 0, .avx2 = 1, .avx512 = 2, .avx512vnni = 3, .avx512vbmi = 4};
static_assert(kGaps.at(SimdLevel::avx512) == 1 && kGaps.at(SimdLevel::avx512vbmi) == 3,
              "usable in constant expressions");
}  // namespace

TEST(Dispatch, EveryLevelRunsItsOwnPathOrTheNextLowerOne) {
  const int gaps[] = {0, 1, 1, 3, 3};
  const llmk::simd::Paths<int> only_scalar{.scalar = 7};
  for (SimdLevel l : kLevels) {
    SCOPED_TRACE(llmk::simd_name(l));
    EXPECT_EQ(kFull.at(l), int(l));
    EXPECT_EQ(kGaps.at(l), gaps[int(l)]);
    EXPECT_EQ(only_scalar.at(l), 7);
  }
  // A path may be a null pointer or value-initialized and still be that level's own.
  const llmk::simd::Paths<const char*> ptrs{.scalar = "scalar", .avx512 = nullptr};
  EXPECT_EQ(ptrs.at(SimdLevel::avx512vbmi), nullptr);
  EXPECT_STREQ(ptrs.at(SimdLevel::avx2), "scalar");
}

TEST(Dispatch, UnusablePathsFallThroughToTheNextLowerOne) {
  // A path usable only for lengths divisible by its width (the Hadamard transform's rule).
  const auto divides = [](int64_t n) { return [n](int width) { return n % width == 0; }; };
  const llmk::simd::Paths<int> widths{.scalar = 1, .avx2 = 8, .avx512 = 16};
  EXPECT_EQ(widths.at(SimdLevel::avx512vbmi, divides(32)), 16);
  EXPECT_EQ(widths.at(SimdLevel::avx512vbmi, divides(24)), 8);
  EXPECT_EQ(widths.at(SimdLevel::avx512, divides(4)), 1);
  EXPECT_EQ(widths.at(SimdLevel::avx2, divides(16)), 8);
  EXPECT_EQ(widths.at(SimdLevel::scalar, divides(16)), 1);
  EXPECT_EQ(widths.at(SimdLevel::avx512, [](int) { return false; }), 1);  // scalar always runs
}

TEST(Dispatch, PickFollowsTheCapAndTheLimit) {
  const SimdLevel detected = llmk::detected_simd_level();  // the CPU's level capped by LLMK_SIMD
  EXPECT_EQ(kFull.pick(), int(detected));
  EXPECT_EQ(kGaps.pick(), kGaps.at(detected));
  for (SimdLevel l : llmk::test::simd_levels()) {
    SCOPED_TRACE(llmk::simd_name(l));
    llmk::ScopedSimdLimit lim(l);
    EXPECT_EQ(kFull.pick(), int(l));
    EXPECT_EQ(kGaps.pick(), kGaps.at(l));
    EXPECT_EQ(kFull.pick([l](int p) { return p != int(l); }), std::max(int(l) - 1, 0));
  }
  llmk::ScopedSimdLimit above(SimdLevel::avx512vbmi);  // a limit never lifts the level above the cap
  EXPECT_EQ(kFull.pick(), int(detected));
}
