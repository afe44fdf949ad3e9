// The oracle of softmax + top-k: plain loops in double and a full sort of
// every row by (logit descending, index ascending). The scale is 1/T rounded
// to f32, as the header defines it.
#include <algorithm>
#include <numeric>
#include <vector>

#include "topk/topk_internal.hpp"

namespace llmk {

void softmax_topk_ref(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out) {
  topk::validate("softmax_topk_ref", logits, k, temperature, out, true);
  const int64_t rows = logits.rows(), v = logits.cols(), ld = logits.row_stride();
  const size_t esz = dtype_size(logits.dtype);
  const double scale = double(1.0f / temperature);
  std::vector<double> x(v);
  std::vector<int32_t> idx(v);
  for (int64_t r = 0; r < rows; ++r) {
    const void* row = static_cast<const uint8_t*>(logits.data) + size_t(r) * size_t(ld) * esz;
    bool nan = false, pinf = false;
    double m = -INFINITY;
    for (int64_t j = 0; j < v; ++j) {
      x[j] = topk::load_f32(row, logits.dtype, j);
      nan |= std::isnan(x[j]);
      pinf |= x[j] == INFINITY;
      m = std::max(m, x[j]);
    }
    if (nan || pinf || m == -INFINITY) {
      topk::write_special_row(row, logits.dtype, v, k, out, r);
      continue;
    }
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp((x[j] - m) * scale);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    for (int64_t j = 0; j < k; ++j) {
      out.probs[r * k + j] = float(std::exp((x[idx[j]] - m) * scale) / s);
      out.indices[r * k + j] = idx[j];
    }
    if (out.row_max) out.row_max[r] = float(m * scale);
    if (out.lse) out.lse[r] = float(m * scale + std::log(s));
  }
}

}  // namespace llmk
