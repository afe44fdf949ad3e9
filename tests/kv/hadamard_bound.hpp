// The f32 rounding bound of hadamard_transform against the exact transform,
// for tests. Each output of a block x is a sum of +-x_j through L = log2(b)
// rounded additions, so |s~ - s| <= gamma_L sum_j |x_j| with
// gamma_L = L u / (1 - L u), u = 2^-24; then y = fl(c~ s~) with
// c~ = c (1 + <= u): two more roundings of a value <= (1 + gamma_L) c sum |x_j|.
#pragma once
#include <cmath>
#include <cstdint>

namespace llmk::test {

// Bound on |fast - exact| for every output of a block whose inputs have L1 norm l1.
inline double hadamard_error_bound(double l1, int64_t block) {
  const double u = 0x1p-24, L = std::log2(double(block)), gamma = L * u / (1 - L * u);
  return (gamma + 2 * u * (1 + u) * (1 + gamma)) * l1 / std::sqrt(double(block));
}

// Per-element bounds e[D] for a row x[D] rotated in blocks of `block`.
inline void hadamard_error_bounds(const float* x, int64_t D, int64_t block, double* e) {
  for (int64_t b0 = 0; b0 < D; b0 += block) {
    double l1 = 0;
    for (int64_t j = b0; j < b0 + block; ++j) l1 += std::fabs(double(x[j]));
    for (int64_t j = b0; j < b0 + block; ++j) e[j] = hadamard_error_bound(l1, block);
  }
}

}  // namespace llmk::test
