// Error messages name the function, the argument and its value.
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tensor.hpp"
#include "tests/common/testutil.hpp"

TEST(Errors, MessageNamesArgumentAndValue) {
  try {
    llmk::TensorView::matrix(nullptr, llmk::DType::f32, 4, 8, 5);
    FAIL() << "expected InvalidArgument";
  } catch (const llmk::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "llmk::TensorView::matrix: argument 'row_stride' = 5: must be >= cols");
  }
  EXPECT_THROW(llmk::set_num_threads(0), llmk::InvalidArgument);
}

// A team of 100000 threads crashed OpenMP (SIGSEGV) at the first parallel region.
TEST(Errors, ThreadCountIsCapped) {
  const int before = llmk::num_threads();
  try {
    llmk::set_num_threads(100000);
    FAIL() << "expected InvalidArgument";
  } catch (const llmk::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "llmk::set_num_threads: argument 'n' = 100000: must be in [1, 1024]");
  }
  EXPECT_EQ(llmk::num_threads(), before);
  llmk::set_num_threads(1024);
  llmk::set_num_threads(before);
}

TEST(Tensor, ViewDescribesItselfAndUses64BitOffsets) {
  const int64_t rows = int64_t(1) << 20, cols = int64_t(1) << 13;  // 2^33 elements: overflows 32 bits
  auto v = llmk::TensorView::matrix(nullptr, llmk::DType::bf16, rows, cols, cols + 64);
  EXPECT_EQ(v.numel(), int64_t(1) << 33);
  EXPECT_EQ(v.row_stride(), cols + 64);
  EXPECT_EQ(v.describe(), "bf16[1048576, 8192] row_stride 8256 on cpu");
  v.stride[1] = 2;  // every other element of a row: checks name the stride through describe()
  EXPECT_EQ(v.describe(), "bf16[1048576, 8192] row_stride 8256 stride[1] 2 on cpu");
  EXPECT_EQ(llmk::TensorView::matrix(nullptr, llmk::DType::f32, 4, 16).describe(), "f32[4, 16] on cpu");
}

TEST(Tensor, BufferIs64ByteAligned) {
  for (size_t bytes : {1u, 63u, 64u, 1000u}) {
    llmk::Buffer b(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    EXPECT_EQ(b.bytes(), bytes);
  }
}

TEST(Tensor, BufferTakesAPowerOfTwoAlignment) {
  for (size_t align : {size_t(64), size_t(4096), size_t(2) << 20}) {
    llmk::Buffer b(align + 1, align);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % align, 0u) << align;
    EXPECT_EQ(b.bytes(), align + 1);
  }
  try {
    llmk::Buffer b(100, 96);
    FAIL() << "expected InvalidArgument";
  } catch (const llmk::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "llmk::Buffer: argument 'align' = 96: must be a power of two >= 64");
  }
  EXPECT_THROW(llmk::Buffer(100, 32), llmk::InvalidArgument);
}

TEST(Sentinel, GuardCatchesAWritePastTheEnd) {
  llmk::test::Guarded<float> g(10, 4);
  for (size_t i = 0; i < 10; ++i) g[i] = 1.0f;
  EXPECT_TRUE(g.guard_intact());
  g.data()[10] = 0.0f;  // one past the end, inside the guard
  EXPECT_FALSE(g.guard_intact());
}

TEST(Tolerance, AllCloseFailsOnNanAndInfMismatch) {
  const float a[3] = {1.0f, std::nanf(""), INFINITY};
  const float e1[3] = {1.0f, 0.0f, INFINITY};
  const float e2[3] = {1.0f, std::nanf(""), -INFINITY};
  const float e3[3] = {1.0f, std::nanf(""), INFINITY};
  EXPECT_FALSE(llmk::test::all_close(a, e1, 3, 1e-3, 0));
  EXPECT_FALSE(llmk::test::all_close(a, e2, 3, 1e-3, 0));
  EXPECT_TRUE(llmk::test::all_close(a, e3, 3, 1e-3, 0));
}
