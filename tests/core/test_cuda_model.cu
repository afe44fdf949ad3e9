// The execution model the CUDA tests rely on, checked where they run: warp
// shuffles (xor, down, up, indexed, with widths), votes, matches, block
// barriers (also __syncthreads_or), __byte_perm, the m16n8k16 MMA's fragment
// layout and launch limits on a device (scripts/gpu-check), and the same on the CPU
// emulator (LLMK_CUDA=EMU, src/core/cuda_emu.hpp), whose own error reports
// (a shuffle naming an exited lane, a deadlock, a lane outside the mask) are
// checked as death tests there.
#include <cuda_fp16.h>

#include <vector>

#include "core/cuda_check.cuh"
#include "core/cuda_mma.cuh"
#include "tests/common/testutil.hpp"

namespace llmk::test {
namespace {

constexpr int kOps = 9;

// out[t * kOps + i]: op i of thread t, in a block of 64 threads (2 warps).
__global__ void warp_ops_kernel(int* out) {
  const int t = int(threadIdx.x), v = 100 + t;
  int* o = out + t * kOps;
  o[0] = __shfl_xor_sync(0xffffffffu, v, 1);
  o[1] = __shfl_down_sync(0xffffffffu, v, 3, 8);
  o[2] = __shfl_up_sync(0xffffffffu, v, 2, 16);
  o[3] = __shfl_sync(0xffffffffu, v, 5);
  o[4] = __shfl_sync(0xffffffffu, v, 37, 8);  // lane 37 % 8 = 5 of each group of 8
  o[5] = int(__ballot_sync(0xffffffffu, t % 3 == 0));
  o[6] = __any_sync(0xffffffffu, t == 63) + 2 * __all_sync(0xffffffffu, t < 64);
  o[7] = int(__match_any_sync(0xffffffffu, t % 5));
  o[8] = int(__match_any_sync(0xffffffffu, uint64_t(t % 3) << 40));  // 64-bit values
}

// out[block]: __syncthreads_or over a predicate true in thread `which[block]`
// only (-1: in none), every thread's answer summed.
__global__ void barrier_or_kernel(const int* which, int* out) {
  const int r = __syncthreads_or(int(threadIdx.x) == which[blockIdx.x]);
  atomicAdd(&out[blockIdx.x], r);
}

// Thread t writes its index, then (after the barrier) reads its neighbor's.
__global__ void barrier_kernel(int* out) {
  __shared__ int s[256];
  const int t = int(threadIdx.x);
  s[t] = t;
  __syncthreads();
  out[int(blockIdx.x * blockDim.x) + t] = s[(t + 1) % int(blockDim.x)] + 1000 * int(blockIdx.x);
}

__global__ void dynamic_smem_kernel(int* out, int n) {
  LLMK_DYNAMIC_SMEM(int, s);
  if (threadIdx.x == 0) {
    for (int i = 0; i < n; ++i) s[i] = i;
    out[0] = s[n - 1];
  }
}

TEST(CudaModel, WarpShufflesAndVotes) {
  LLMK_REQUIRE_CUDA();
  DeviceGuarded<int> out(64 * kOps);
  LLMK_LAUNCH(1, 64, 0, 0, warp_ops_kernel)(out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = out.download();
  ASSERT_TRUE(out.guard_intact());
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, warp0 = t - lane;
    const int seg8 = lane / 8 * 8, seg16 = lane / 16 * 16;
    unsigned ballot = 0, match5 = 0, match3 = 0;
    for (int j = 0; j < 32; ++j) {
      if ((warp0 + j) % 3 == 0) ballot |= 1u << j;
      if ((warp0 + j) % 5 == t % 5) match5 |= 1u << j;
      if ((warp0 + j) % 3 == t % 3) match3 |= 1u << j;
    }
    const int want[kOps] = {100 + warp0 + (lane ^ 1),
                            100 + warp0 + (lane + 3 < seg8 + 8 ? lane + 3 : lane),
                            100 + warp0 + (lane - 2 >= seg16 ? lane - 2 : lane),
                            100 + warp0 + 5,
                            100 + warp0 + seg8 + 5,
                            int(ballot),
                            (warp0 == 32 ? 1 : 0) + 2,
                            int(match5),
                            int(match3)};
    for (int i = 0; i < kOps; ++i) EXPECT_EQ(got[size_t(t * kOps + i)], want[i]) << "thread " << t << " op " << i;
  }
}

// out[t]: __byte_perm of the t-th case (the emulator defines it; the int4
// decode kernel turns nibbles into floats with it).
__global__ void byte_perm_kernel(const unsigned* in /* [n][3]: x, y, s */, unsigned* out, int n) {
  const int t = int(threadIdx.x);
  if (t < n) out[t] = __byte_perm(in[3 * t], in[3 * t + 1], in[3 * t + 2]);
}

TEST(CudaModel, BytePermTakesThreeBitsOfEachSelector) {
  LLMK_REQUIRE_CUDA();
  // Byte n of the result is byte (s >> 4n) & 7 of {y, x} (x bytes 0-3, y 4-7),
  // as the CUDA math API documents; the fourth bit of a selector is ignored.
  const unsigned x = 0x44332211u, y = 0x88776655u;
  const std::vector<unsigned> sel = {0x3210u, 0x7654u, 0x4440u, 0x4441u, 0x4442u, 0x4443u,    0x0123u,
                                     0x5410u, 0x8880u, 0x9991u, 0xfedcu, 0x7650u, 0xffff0000u};
  const std::vector<unsigned> want = {0x44332211u, 0x88776655u, 0x55555511u, 0x55555522u, 0x55555533u,
                                      0x55555544u, 0x11223344u, 0x66552211u, 0x11111111u, 0x22222222u,
                                      0x88776655u, 0x88776611u, 0x11111111u};
  std::vector<unsigned> in;
  for (unsigned s : sel) in.insert(in.end(), {x, y, s});
  DeviceGuarded<unsigned> din(in.size()), out(sel.size());
  din.upload(in.data());
  LLMK_LAUNCH(1, 32, 0, 0, byte_perm_kernel)(din.data(), out.data(), int(sel.size()));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = out.download();
  ASSERT_TRUE(out.guard_intact());
  for (size_t i = 0; i < sel.size(); ++i) EXPECT_EQ(got[i], want[i]) << std::hex << "selector 0x" << sel[i];
}

// One m16n8k16 MMA: the warp's lanes load their fragments of A [16][16], B
// [16][8] (f16 bits) and C [16][8] by the PTX layout (core/cuda_emu.hpp) and
// write D = A B + C back by it.
__global__ void mma_kernel(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const int lane = int(threadIdx.x), g = lane / 4, t = lane % 4;
  // A [r][c] and B [k][n] as f16 pairs: (r, c) with (r, c + 1); (k, n) with (k + 1, n)
  const auto a2 = [&](int r, int c) { return uint32_t(A[r * 16 + c]) | uint32_t(A[r * 16 + c + 1]) << 16; };
  const auto b2 = [&](int k, int n) { return uint32_t(B[k * 8 + n]) | uint32_t(B[(k + 1) * 8 + n]) << 16; };
  const uint32_t a[4] = {a2(g, 2 * t), a2(g + 8, 2 * t), a2(g, 2 * t + 8), a2(g + 8, 2 * t + 8)};
  const uint32_t b[2] = {b2(2 * t, g), b2(2 * t + 8, g)};
  float d[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
  cuda::mma_16816(d, a, b);
  D[g * 8 + 2 * t] = d[0], D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2], D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

TEST(CudaModel, MmaFragmentLayout) {
  LLMK_REQUIRE_CUDA();
  // Small integers (exact in f16, every partial sum exact in f32), each
  // element distinct enough that a misplaced one changes the result.
  std::vector<uint16_t> A(256), B(128);
  std::vector<float> C(128);
  std::vector<double> want(128);
  for (int i = 0; i < 256; ++i) A[size_t(i)] = __half_as_ushort(__float2half(float((i * 7) % 23 - 11)));
  for (int i = 0; i < 128; ++i) B[size_t(i)] = __half_as_ushort(__float2half(float((i * 5) % 19 - 9)));
  for (int i = 0; i < 128; ++i) C[size_t(i)] = float(i % 13) * 1000.0f;
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      double x = C[size_t(r * 8 + n)];
      for (int k = 0; k < 16; ++k)
        x += double(__half2float(__ushort_as_half(A[size_t(r * 16 + k)]))) *
             __half2float(__ushort_as_half(B[size_t(k * 8 + n)]));
      want[size_t(r * 8 + n)] = x;
    }
  DeviceGuarded<uint16_t> da(256), db(128);
  DeviceGuarded<float> dc(128), dd(128);
  da.upload(A.data()), db.upload(B.data()), dc.upload(C.data());
  LLMK_LAUNCH(1, 32, 0, 0, mma_kernel)(da.data(), db.data(), dc.data(), dd.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = dd.download();
  ASSERT_TRUE(dd.guard_intact());
  for (int i = 0; i < 128; ++i)
    EXPECT_EQ(double(got[size_t(i)]), want[size_t(i)]) << "row " << i / 8 << " column " << i % 8;
}

TEST(CudaModel, BarrierOrdersSharedMemoryAcrossWarps) {
  LLMK_REQUIRE_CUDA();
  DeviceGuarded<int> out(3 * 256);
  LLMK_LAUNCH(3, 256, 0, 0, barrier_kernel)(out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = out.download();
  ASSERT_TRUE(out.guard_intact());
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 256; ++t) EXPECT_EQ(got[size_t(b * 256 + t)], (t + 1) % 256 + 1000 * b) << b << " " << t;
}

TEST(CudaModel, BarrierOrIsTheBlocksVote) {
  LLMK_REQUIRE_CUDA();
  const std::vector<int> which = {-1, 0, 255, 77};
  DeviceGuarded<int> w(which.size()), out(which.size());
  ASSERT_EQ(cudaMemcpy(w.data(), which.data(), which.size() * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(out.data(), 0, which.size() * sizeof(int)), cudaSuccess);
  LLMK_LAUNCH(unsigned(which.size()), 256, 0, 0, barrier_or_kernel)(w.data(), out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = out.download();
  ASSERT_TRUE(out.guard_intact());
  for (size_t b = 0; b < which.size(); ++b) EXPECT_EQ(got[b], which[b] < 0 ? 0 : 256) << "block " << b;
}

// As on an sm_90 device: at most 1024 threads a block, and dynamic shared
// memory above 48 KiB only after cudaFuncSetAttribute.
TEST(CudaModel, LaunchLimits) {
  LLMK_REQUIRE_CUDA();
  DeviceGuarded<int> out(1024);
  cudaGetLastError();
  LLMK_LAUNCH(1, 1025, 0, 0, barrier_kernel)(out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  const int n = 13000;  // 52000 bytes
  LLMK_LAUNCH(1, 32, size_t(n) * 4, 0, dynamic_smem_kernel)(out.data(), n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cuda::allow_dynamic_smem(dynamic_smem_kernel, size_t(n) * 4), cudaSuccess);
  LLMK_LAUNCH(1, 32, size_t(n) * 4, 0, dynamic_smem_kernel)(out.data(), n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out.download()[0], n - 1);
}

// The raised limit belongs to the context: after a cudaDeviceReset the
// launcher raises it again (it once remembered "raised" for the process).
TEST(CudaModel, DynamicSmemLimitAfterDeviceReset) {
  LLMK_REQUIRE_CUDA();
  const int n = 13000;  // 52000 bytes
  for (int round = 0; round < 2; ++round) {
    if (round == 1) ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
    DeviceGuarded<int> out(1);
    ASSERT_EQ(cuda::allow_dynamic_smem(dynamic_smem_kernel, size_t(n) * 4), cudaSuccess);
    LLMK_LAUNCH(1, 32, size_t(n) * 4, 0, dynamic_smem_kernel)(out.data(), n);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "round " << round;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(out.download()[0], n - 1) << "round " << round;
  }
}

#ifdef LLMK_CUDA_EMU
__global__ void exited_lane_kernel(int* out) {
  if (threadIdx.x == 7) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}
__global__ void divergent_barrier_kernel(int* out) {  // half a warp at each
  if (threadIdx.x < 16) __syncthreads();
  else out[0] = __shfl_sync(0xffffffffu, 1, 0);
}
__global__ void two_barriers_kernel(int* out) {  // warp 0 at one barrier, warp 1 at another
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    out[threadIdx.x] = 1;
    __syncthreads();
  }
}
__global__ void outside_mask_kernel(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, int(threadIdx.x), 20);
}
__global__ void read_unwritten_smem_kernel(unsigned* out) {
  LLMK_DYNAMIC_SMEM(unsigned, s);
  out[threadIdx.x] = s[threadIdx.x];
}

TEST(CudaEmulatorDeathTest, ReportsWhatTheGpuLeavesUndefined) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceGuarded<int> out(64);
  EXPECT_DEATH(LLMK_LAUNCH(1, 32, 0, 0, exited_lane_kernel)(out.data()), "lane 7, which has exited");
  EXPECT_DEATH(LLMK_LAUNCH(1, 32, 0, 0, divergent_barrier_kernel)(out.data()), "deadlock");
  EXPECT_DEATH(LLMK_LAUNCH(1, 32, 0, 0, outside_mask_kernel)(out.data()), "outside the mask");
  EXPECT_DEATH(LLMK_LAUNCH(1, 64, 0, 0, two_barriers_kernel)(out.data()), "a barrier in divergent code");
  EXPECT_DEATH(LLMK_LAUNCH(1, 20, 0, 0, warp_ops_kernel)(out.data()), "which this block does not have");
}

// A kernel without the barrier it needs: thread t reads the previous thread's
// slot, which that thread may not have written yet. In thread order (block 0)
// it always has; odd blocks run from the last thread, so in block 1 every read
// but thread 0's comes first and sees block 0's value.
__global__ void missing_barrier_kernel(int* out) {
  __shared__ int s[256];
  const int t = int(threadIdx.x);
  s[t] = t + 1000 * int(blockIdx.x);
  out[int(blockIdx.x * blockDim.x) + t] = s[(t + int(blockDim.x) - 1) % int(blockDim.x)];  // the previous thread's
}

TEST(CudaEmulator, OddBlocksRunTheirThreadsInReverse) {
  DeviceGuarded<int> out(2 * 256);
  LLMK_LAUNCH(2, 256, 0, 0, missing_barrier_kernel)(out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto got = out.download();
  int stale = 0;
  for (int t = 0; t < 256; ++t) {
    if (t > 0) EXPECT_EQ(got[size_t(t)], t - 1) << t;  // block 0 in thread order: the previous thread wrote first
    stale += got[size_t(256 + t)] != (t + 255) % 256 + 1000;
  }
  EXPECT_EQ(stale, 255);  // block 1 from the last thread: every read but thread 0's comes before the write
}

TEST(CudaEmulator, FreshMemoryIsNotZero) {
  DeviceGuarded<unsigned> out(32);
  LLMK_LAUNCH(1, 32, 32 * 4, 0, read_unwritten_smem_kernel)(out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (unsigned x : out.download()) EXPECT_EQ(x, 0xffffffffu);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(*static_cast<unsigned*>(p), 0xffffffffu);
  cudaFree(p);
}
#endif

}  // namespace
}  // namespace llmk::test
