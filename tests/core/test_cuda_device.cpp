// The CUDA backend is queryable with or without a device.
#include "llmk/cuda.hpp"
#include "tests/common/testutil.hpp"

TEST(Cuda, DeviceQueryNeverThrows) {
  const int n = llmk::cuda_device_count();
  EXPECT_GE(n, 0);
  if (!llmk::cuda_compiled()) EXPECT_EQ(n, 0);
}

TEST(Cuda, DeviceIsUsable) {
  LLMK_REQUIRE_CUDA();
  EXPECT_NE(llmk::cuda_device_name(0), "unknown");
}
