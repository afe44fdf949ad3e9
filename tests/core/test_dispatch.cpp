// The SIMD cap and the thread count.
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
