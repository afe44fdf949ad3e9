// The matmul oracle: W dequantized in double (exactly: matmul_decode.hpp's reading of
// the blocks, which tests/gguf checks against the gguf package's dequantizer), exact x,
// double accumulation.
#include <vector>

#include "llmk/error.hpp"
#include "llmk/matmul.hpp"
#include "model/matmul_decode.hpp"
#include "model/quant_blocks.hpp"

namespace llmk {
namespace {
// value = fw * code + fo + fm * m (matmul_decode.hpp), in double: the scales there are
// products of an f16 and an integer of at most 8 bits, exact in f32, so this is exact.
template <class B>
void block_row_f64(const B* wb, int64_t K, double* out) {
  using D = mm::Decode<B>;
  typename D::Scales sc{};
  int8_t q[32];
  for (int64_t c = 0; c < K / kQBlock; ++c) {
    const int64_t b = c / D::kChunks, cc = c % D::kChunks;
    D::scales(wb[b], sc);
    D::codes(wb[b], int(cc), q);
    for (int l = 0; l < 32; ++l) {
      double v = double(sc.fw[cc][l / 16]) * q[l];
      if constexpr (D::kOffset) v += double(sc.fo[cc]);
      if constexpr (D::kMins) v += double(sc.fm) * sc.m[cc][l / 16];
      out[c * kQBlock + l] = v;
    }
  }
}
}  // namespace

void dequantize_row_f64(const WeightView& w, int64_t n, double* out) {
  const char* fn = "dequantize_row_f64";
  check_weight(fn, w);
  LLMK_CHECK_ARG(n >= 0 && n < w.rows, fn, "n", n, "must be in [0, " + std::to_string(w.rows) + ")");
  LLMK_CHECK_ARG(out, fn, "out", out, "must not be null");
  const char* r = static_cast<const char*>(w.data) + n * w.row_bytes;
  const int64_t K = w.cols;
  switch (w.type) {
    case WType::f32:
      for (int64_t k = 0; k < K; ++k) out[k] = reinterpret_cast<const float*>(r)[k];
      return;
    case WType::f16:
      for (int64_t k = 0; k < K; ++k) out[k] = to_f32(reinterpret_cast<const f16*>(r)[k]);
      return;
    case WType::bf16:
      for (int64_t k = 0; k < K; ++k) out[k] = to_f32(reinterpret_cast<const bf16*>(r)[k]);
      return;
    case WType::q8_0: return block_row_f64(reinterpret_cast<const BlockQ8_0*>(r), K, out);
    case WType::q4_0: return block_row_f64(reinterpret_cast<const BlockQ4_0*>(r), K, out);
    case WType::q4_1: return block_row_f64(reinterpret_cast<const BlockQ4_1*>(r), K, out);
    case WType::q5_0: return block_row_f64(reinterpret_cast<const BlockQ5_0*>(r), K, out);
    case WType::q5_1: return block_row_f64(reinterpret_cast<const BlockQ5_1*>(r), K, out);
    case WType::q2_k: return block_row_f64(reinterpret_cast<const BlockQ2_K*>(r), K, out);
    case WType::q3_k: return block_row_f64(reinterpret_cast<const BlockQ3_K*>(r), K, out);
    case WType::q4_k: return block_row_f64(reinterpret_cast<const BlockQ4_K*>(r), K, out);
    case WType::q5_k: return block_row_f64(reinterpret_cast<const BlockQ5_K*>(r), K, out);
    case WType::q6_k: return block_row_f64(reinterpret_cast<const BlockQ6_K*>(r), K, out);
  }
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
