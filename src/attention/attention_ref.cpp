// The attention oracle: plain loops in double over a dense per-sequence cache
// (llama2.c's layout), with the causal rule of llmk/attention.hpp.
#include <cmath>
#include <vector>

#include "llmk/attention.hpp"

namespace llmk {

void attention_reference(const float* q, const int64_t* qo_indptr, const float* k, const float* v,
                         const int64_t* kv_indptr, int64_t num_seqs, int64_t Hq, int64_t Hkv, int64_t D,
                         double scale, double* out) {
  const int64_t G = Hq / Hkv;
  std::vector<double> w;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t kv0 = kv_indptr[b], kv_len = kv_indptr[b + 1] - kv0;
    const int64_t qo_len = qo_indptr[b + 1] - qo_indptr[b];
    for (int64_t i = 0; i < qo_len; ++i) {
      const int64_t t = qo_indptr[b] + i, pos = kv_len - qo_len + i;  // sees positions 0..pos
      for (int64_t h = 0; h < Hq; ++h) {
        const float* qr = q + (t * Hq + h) * D;
        const int64_t hk = h / G;
        w.assign(size_t(pos + 1), 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= pos; ++j) {
          const float* kr = k + ((kv0 + j) * Hkv + hk) * D;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(qr[d]) * double(kr[d]);
          w[size_t(j)] = s * scale;
          mx = std::max(mx, w[size_t(j)]);
        }
        double sum = 0;
        for (auto& x : w) sum += (x = std::exp(x - mx));
        double* o = out + (t * Hq + h) * D;
        for (int64_t d = 0; d < D; ++d) o[d] = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          const float* vr = v + ((kv0 + j) * Hkv + hk) * D;
          for (int64_t d = 0; d < D; ++d) o[d] += w[size_t(j)] / sum * double(vr[d]);
        }
      }
    }
  }
}

}  // namespace llmk
