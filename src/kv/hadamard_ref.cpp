// The oracle of hadamard_transform (llmk/kv_quant.hpp): in double, straight
// from the definition H_b[i][j] = (-1)^popcount(i & j), one dense block x block
// product per block, so it shares nothing with the butterfly algorithm.
#include <cmath>

#include "llmk/error.hpp"
#include "llmk/kv_quant.hpp"

namespace llmk {
namespace kvrot {
void check_transform_args(const char* fn, const void* x, int64_t rows, int64_t dim, int64_t block);
}

void hadamard_transform_reference(const double* x, double* y, int64_t rows, int64_t dim, int64_t block) {
  kvrot::check_transform_args("hadamard_transform_reference", x, rows, dim, block);
  LLMK_CHECK_ARG(rows == 0 || y != nullptr, "hadamard_transform_reference", "y", y, "must not be null");
  const double c = 1.0 / std::sqrt(double(block));
  for (int64_t b0 = 0; b0 < rows * dim; b0 += block)
    for (int64_t i = 0; i < block; ++i) {
      double s = 0;
      for (int64_t j = 0; j < block; ++j) s += (__builtin_popcountll(uint64_t(i & j)) & 1 ? -1.0 : 1.0) * x[b0 + j];
      y[b0 + i] = s * c;
    }
}

}  // namespace llmk
