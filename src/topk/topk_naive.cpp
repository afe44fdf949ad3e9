// The baseline the fused op must beat, written the usual way: a safe softmax
// of the row into memory (max pass; exp pass writing exp(x - max); scale
// pass), then a separate top-k over the written probabilities with a size-K
// min-heap (ties to the lower index). It reads the logits twice and the
// probabilities twice and writes them twice: >= 12V bytes per f32 row against
// the fused op's 4V. Rows over threads; each thread's [V] scratch is reused.
#include <algorithm>
#include <vector>

#include "llmk/parallel.hpp"
#include "topk/topk_internal.hpp"

namespace llmk {

void softmax_topk_naive(const TensorView& logits, int64_t k, float temperature, const SoftmaxTopkOut& out) {
  topk::validate("softmax_topk_naive", logits, k, temperature, out, true);
  const int64_t rows = logits.rows(), v = logits.cols(), ld = logits.row_stride();
  const DType t = logits.dtype;
  const size_t esz = dtype_size(t);
  const float scale = 1.0f / temperature;
#pragma omp parallel num_threads(num_threads())
  {
    std::vector<float> p(v);  // [V] the row's probabilities
    std::vector<topk::Cand> heap(k);
    // Heap order: the worst kept (lowest prob, then highest index) on top.
    const auto worse_first = [](const topk::Cand& a, const topk::Cand& b) { return topk::better(a, b); };
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const void* row = static_cast<const uint8_t*>(logits.data) + size_t(r) * size_t(ld) * esz;
      float m = topk::kNegInf;
      bool nan = false;
      for (int64_t j = 0; j < v; ++j) {
        const float x = topk::load_f32(row, t, j);
        nan |= std::isnan(x);
        m = std::max(m, x);
      }
      if (nan || m == topk::kNegInf || m == -topk::kNegInf) {
        topk::write_special_row(row, t, v, k, out, r);
        continue;
      }
      double s = 0;
      for (int64_t j = 0; j < v; ++j) {
        p[j] = std::exp((topk::load_f32(row, t, j) - m) * scale);
        s += p[j];
      }
      const float inv = float(1.0 / s);
      for (int64_t j = 0; j < v; ++j) p[j] *= inv;
      int64_t n = 0;
      for (int64_t j = 0; j < v; ++j) {
        const topk::Cand c{p[j], int32_t(j)};
        if (n < k) {
          heap[n++] = c;
          std::push_heap(heap.begin(), heap.begin() + n, worse_first);
        } else if (topk::better(c, heap[0])) {
          std::pop_heap(heap.begin(), heap.end(), worse_first);
          heap[k - 1] = c;
          std::push_heap(heap.begin(), heap.end(), worse_first);
        }
      }
      std::sort_heap(heap.begin(), heap.end(), worse_first);
      for (int64_t j = 0; j < k; ++j) {
        out.probs[r * k + j] = heap[j].x;
        out.indices[r * k + j] = heap[j].i;
      }
      if (out.row_max) out.row_max[r] = m * scale;
      if (out.lse) out.lse[r] = float(double(m) * scale + std::log(s));
    }
  }
}

}  // namespace llmk
