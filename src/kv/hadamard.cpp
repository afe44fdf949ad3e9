// hadamard_transform (llmk/kv_quant.hpp): validation at the API boundary, the
// scalar butterfly loop, kv_rotation_block, and the dispatch to the AVX2 / AVX-512 template
// (hadamard_kernel.hpp). Every path does the same f32 operations in the same
// order, so the choice never changes a bit.
#include <cmath>

#include "core/dispatch.hpp"
#include "llmk/error.hpp"
#include "llmk/kv_quant.hpp"

namespace llmk {
namespace kvrot {
void fwht_rows_avx2(float* x, int64_t rows, int64_t dim, int64_t block, float c);
void fwht_rows_avx512(float* x, int64_t rows, int64_t dim, int64_t block, float c);

namespace {
void fwht_rows_scalar(float* x, int64_t rows, int64_t dim, int64_t block, float c) {
  for (int64_t r = 0; r < rows; ++r) {
    float* p = x + r * dim;  // [dim]
    for (int64_t h = 1; h < block; h *= 2)
      for (int64_t b0 = 0; b0 < dim; b0 += 2 * h)
        for (int64_t j = b0; j < b0 + h; ++j) {
          const float a = p[j], b = p[j + h];
          p[j] = a + b;
          p[j + h] = a - b;
        }
    for (int64_t j = 0; j < dim; ++j) p[j] *= c;
  }
}
}  // namespace

void check_transform_args(const char* fn, const void* x, int64_t rows, int64_t dim, int64_t block) {
  LLMK_CHECK_ARG(block >= 1 && block <= (int64_t(1) << 16) && (block & (block - 1)) == 0, fn, "block", block,
                 "must be a power of two in [1, 65536]");
  LLMK_CHECK_ARG(dim >= 1 && dim % block == 0, fn, "dim", dim,
                 "must be a positive multiple of block = " + std::to_string(block));
  LLMK_CHECK_ARG(rows >= 0, fn, "rows", rows, "must be >= 0");
  LLMK_CHECK_ARG(rows == 0 || x != nullptr, fn, "x", x, "must not be null");
}

namespace {
// A vector path takes rows whose length is a multiple of its width.
struct FwhtPath {
  void (*fn)(float* x, int64_t rows, int64_t dim, int64_t block, float c);
  int64_t width;
};
constexpr simd::Paths<FwhtPath> kFwht{.scalar = {fwht_rows_scalar, 1},
                                      .avx2 = FwhtPath{fwht_rows_avx2, 8},
                                      .avx512 = FwhtPath{fwht_rows_avx512, 16}};
}  // namespace
}  // namespace kvrot

int64_t kv_rotation_block(int64_t head_dim) {
  LLMK_CHECK_ARG(head_dim >= 16 && head_dim <= 256 && head_dim % 16 == 0, "kv_rotation_block", "head_dim", head_dim,
                 "must be a multiple of 16 in [16, 256]");
  return head_dim & -head_dim;  // the lowest set bit: the largest power of two dividing head_dim
}

void hadamard_transform(float* x, int64_t rows, int64_t dim, int64_t block) {
  kvrot::check_transform_args("hadamard_transform", x, rows, dim, block);
  const float c = float(1.0 / std::sqrt(double(block)));
  kvrot::kFwht.pick([dim](const kvrot::FwhtPath& p) { return dim % p.width == 0; }).fn(x, rows, dim, block, c);
}

}  // namespace llmk
