// The sampler's RNG on the GPU: uniform01(seed, step, row) computed in a
// kernel must equal the host's bit for bit, so a GPU sampler draws the same u.
#include "llmk/sample.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::test {
namespace {

__global__ void uniforms(uint64_t seed, uint64_t step, int n, double* out /* [n] */) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = uniform01(seed, step + uint64_t(i) * 977, uint64_t(i) * 0x100000001ull);
}

TEST(SampleCudaSanitize, PhiloxMatchesHost) {
  LLMK_REQUIRE_CUDA();
  const int n = 1000;
  DeviceGuarded<double> d(n);
  uniforms<<<(n + 127) / 128, 128>>>(0x123456789abcdefull, 5, n, d.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = d.download();
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], uniform01(0x123456789abcdefull, 5 + uint64_t(i) * 977, uint64_t(i) * 0x100000001ull)) << i;
  EXPECT_TRUE(d.guard_intact());
}

}  // namespace
}  // namespace llmk::test
