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
  llmk::ScopedSimdLimit lim(llmk::kTopSimdLevel);
  EXPECT_EQ(llmk::simd_level(), llmk::detected_simd_level());
}

namespace {
using llmk::SimdLevel;
constexpr SimdLevel kLevels[] = {SimdLevel::scalar, SimdLevel::avx2,       SimdLevel::avxvnni,
                                 SimdLevel::avx512, SimdLevel::avx512vnni, SimdLevel::avx512vbmi};
static_assert(std::size(kLevels) == size_t(llmk::kTopSimdLevel) + 1, "every level");
// Paths with gaps: avxvnni, avx512 and avx512vbmi have none of their own.
constexpr llmk::simd::Paths<int> kGaps{.scalar = 0, .avx2 = 1, .avx512vnni = 4};
constexpr llmk::simd::Paths<int> kFull{
    .scalar = 0, .avx2 = 1, .avxvnni = 2, .avx512 = 3, .avx512vnni = 4, .avx512vbmi = 5};
static_assert(kGaps.at(SimdLevel::avx512) == 1 && kGaps.at(SimdLevel::avx512vbmi) == 4,
              "usable in constant expressions");
// The path kFull runs at level l: its own, but avx2's for an avxvnni path the CPU cannot run.
int full_at(SimdLevel l) { return l == SimdLevel::avxvnni && !llmk::cpu_has_vnni256() ? 1 : int(l); }
}  // namespace

TEST(Dispatch, EveryLevelRunsItsOwnPathOrTheNextLowerOne) {
  const int gaps[] = {0, 1, 1, 1, 4, 4};
  const llmk::simd::Paths<int> only_scalar{.scalar = 7};
  for (SimdLevel l : kLevels) {
    SCOPED_TRACE(llmk::simd_name(l));
    EXPECT_EQ(kFull.at(l), full_at(l));
    EXPECT_EQ(kGaps.at(l), gaps[int(l)]);
    EXPECT_EQ(only_scalar.at(l), 7);
  }
  // A path may be a null pointer or value-initialized and still be that level's own.
  const llmk::simd::Paths<const char*> ptrs{.scalar = "scalar", .avx512 = nullptr};
  EXPECT_EQ(ptrs.at(SimdLevel::avx512vbmi), nullptr);
  EXPECT_STREQ(ptrs.at(SimdLevel::avx2), "scalar");
}

TEST(Dispatch, AnAvxVnniPathRunsOnlyWhereTheCpuHasVnni256) {
  // From any level above, an avxvnni path is passed over on a CPU without
  // 256-bit VNNI (AVX-512 without VNNI, Skylake-SP); where it has it, it runs.
  const llmk::simd::Paths<int> vnni{.scalar = 0, .avx2 = 1, .avxvnni = 2};
  const int want = llmk::cpu_has_vnni256() ? 2 : 1;
  for (SimdLevel l : {SimdLevel::avxvnni, SimdLevel::avx512, SimdLevel::avx512vnni, SimdLevel::avx512vbmi})
    EXPECT_EQ(vnni.at(l), want) << llmk::simd_name(l);
  EXPECT_EQ(vnni.at(SimdLevel::avx2), 1);
  // A CPU with AVX-VNNI or AVX-512 VNNI has 256-bit VNNI; the level of a CPU
  // without it is never avxvnni, and a cap at avxvnni there means avx2.
  if (llmk::cpu_has_avx_vnni() || llmk::cpu_simd_level() >= SimdLevel::avx512vnni) EXPECT_TRUE(llmk::cpu_has_vnni256());
  if (!llmk::cpu_has_vnni256()) {
    EXPECT_NE(llmk::cpu_simd_level(), SimdLevel::avxvnni);
    EXPECT_NE(llmk::detected_simd_level(), SimdLevel::avxvnni);
  }
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
  EXPECT_EQ(kFull.pick(), full_at(detected));
  EXPECT_EQ(kGaps.pick(), kGaps.at(detected));
  for (SimdLevel l : llmk::test::simd_levels()) {
    SCOPED_TRACE(llmk::simd_name(l));
    llmk::ScopedSimdLimit lim(l);
    EXPECT_EQ(kFull.pick(), int(l));  // simd_levels() lists only the levels this CPU runs
    EXPECT_EQ(kGaps.pick(), kGaps.at(l));
    const int below = int(l) - 1 == int(SimdLevel::avxvnni) ? full_at(SimdLevel::avxvnni) : std::max(int(l) - 1, 0);
    EXPECT_EQ(kFull.pick([l](int p) { return p != int(l); }), below);
  }
  llmk::ScopedSimdLimit above(llmk::kTopSimdLevel);  // a limit never lifts the level above the cap
  EXPECT_EQ(kFull.pick(), full_at(detected));
}
