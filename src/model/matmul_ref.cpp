// The matmul oracle: W dequantized element by element in double (the block
// formats' definitions, straight from ggml), exact x, double accumulation.
#include <vector>

#include "llmk/error.hpp"
#include "llmk/matmul.hpp"
#include "model/quant_blocks.hpp"

namespace llmk {
namespace {
double weight(const WeightView& w, int64_t n, int64_t k) {
  const char* r = static_cast<const char*>(w.data) + n * w.row_bytes;
  const int64_t b = k / kQBlock, j = k % kQBlock;
  auto nib = [&](const uint8_t* qs) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); };
  switch (w.type) {
    case WType::f32: return reinterpret_cast<const float*>(r)[k];
    case WType::f16: return to_f32(reinterpret_cast<const f16*>(r)[k]);
    case WType::bf16: return to_f32(reinterpret_cast<const bf16*>(r)[k]);
    case WType::q8_0: {
      const auto& q = reinterpret_cast<const BlockQ8_0*>(r)[b];
      return double(f16_bits_to_f32(q.d)) * q.qs[j];
    }
    case WType::q4_0: {
      const auto& q = reinterpret_cast<const BlockQ4_0*>(r)[b];
      return double(f16_bits_to_f32(q.d)) * (nib(q.qs) - 8);
    }
    case WType::q4_1: {
      const auto& q = reinterpret_cast<const BlockQ4_1*>(r)[b];
      return double(f16_bits_to_f32(q.d)) * nib(q.qs) + double(f16_bits_to_f32(q.m));
    }
  }
  return 0;
}
}  // namespace

void dequantize_row_f64(const WeightView& w, int64_t n, double* out) {
  const char* fn = "dequantize_row_f64";
  check_weight(fn, w);
  LLMK_CHECK_ARG(n >= 0 && n < w.rows, fn, "n", n, "must be in [0, " + std::to_string(w.rows) + ")");
  LLMK_CHECK_ARG(out, fn, "out", out, "must not be null");
  for (int64_t k = 0; k < w.cols; ++k) out[k] = weight(w, n, k);
}

void matmul_ref(const float* x, int64_t ldx, const WeightView& w, double* y, int64_t ldy, int64_t M) {
  check_weight("matmul_ref", w);
  std::vector<double> row(size_t(w.cols));
  for (int64_t n = 0; n < w.rows; ++n) {
    dequantize_row_f64(w, n, row.data());
    for (int64_t m = 0; m < M; ++m) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += double(x[m * ldx + k]) * row[size_t(k)];
      y[m * ldy + n] = acc;
    }
  }
}

}  // namespace llmk
