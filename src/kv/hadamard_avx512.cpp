// The fast Walsh-Hadamard transform (hadamard_kernel.hpp) compiled for AVX-512.
// GCC 12 warns falsely inside its own AVX-512 intrinsics headers (the
// "undefined" pass-through operand of masked builtins is not a real read).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kv/hadamard_kernel.hpp"

namespace llmk::kvrot {
void fwht_rows_avx512(float* x, int64_t rows, int64_t dim, int64_t block, float c) {
  fwht_rows<simd::Avx512>(x, rows, dim, block, c);
}
}  // namespace llmk::kvrot
