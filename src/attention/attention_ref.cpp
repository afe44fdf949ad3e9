// The attention oracle: plain loops in double over a dense per-sequence cache
// (llama2.c's layout), with the causal rule and the window of llmk/attention.hpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "llmk/attention.hpp"
#include "llmk/error.hpp"

namespace llmk {

void attention_reference(const float* q, const int64_t* qo_indptr, const float* k, const float* v,
                         const int64_t* kv_indptr, int64_t num_seqs, int64_t Hq, int64_t Hkv, int64_t D, double scale,
                         double* out, int64_t window) {
  // The checks of attention_prefill (llmk/attention.hpp), on the dense layout.
  const char* fn = "attention_reference";
  LLMK_CHECK_ARG(q && qo_indptr && k && v && kv_indptr && out, fn, "q/qo_indptr/k/v/kv_indptr/out", "null",
                 "must not be null");
  LLMK_CHECK_ARG(num_seqs >= 1, fn, "num_seqs", num_seqs, "must be >= 1");
  LLMK_CHECK_ARG(Hkv >= 1, fn, "n_kv_heads", Hkv, "must be >= 1");
  LLMK_CHECK_ARG(Hq >= 1 && Hq % Hkv == 0, fn, "n_heads", Hq,
                 "must be a multiple of n_kv_heads = " + std::to_string(Hkv));
  LLMK_CHECK_ARG(D >= 1, fn, "head_dim", D, "must be >= 1");
  LLMK_CHECK_ARG(std::isfinite(scale), fn, "scale", scale, "must be finite");
  LLMK_CHECK_ARG(window >= 0, fn, "window", window, "must be >= 0 (0: no window)");
  LLMK_CHECK_ARG(qo_indptr[0] == 0, fn, "qo_indptr[0]", qo_indptr[0], "must be 0");
  LLMK_CHECK_ARG(kv_indptr[0] == 0, fn, "kv_indptr[0]", kv_indptr[0], "must be 0");
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t qo = qo_indptr[b + 1] - qo_indptr[b], len = kv_indptr[b + 1] - kv_indptr[b];
    LLMK_CHECK_ARG(len >= 0, fn, "kv_indptr[" + std::to_string(b + 1) + "]", kv_indptr[b + 1],
                   "must be non-decreasing");
    LLMK_CHECK_ARG(qo >= 0 && qo <= len, fn, "qo_indptr[" + std::to_string(b + 1) + "]", qo_indptr[b + 1],
                   "sequence " + std::to_string(b) + " has " + std::to_string(qo) + " new tokens but " +
                       std::to_string(len) + " cached (need 0 <= new <= cached)");
  }
  const int64_t G = Hq / Hkv;
  std::vector<double> w;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t kv0 = kv_indptr[b], kv_len = kv_indptr[b + 1] - kv0;
    const int64_t qo_len = qo_indptr[b + 1] - qo_indptr[b];
    for (int64_t i = 0; i < qo_len; ++i) {
      const int64_t t = qo_indptr[b] + i, pos = kv_len - qo_len + i;  // sees positions lo..pos
      const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      for (int64_t h = 0; h < Hq; ++h) {
        const float* qr = q + (t * Hq + h) * D;
        const int64_t hk = h / G;
        w.assign(size_t(pos + 1), 0.0);
        double mx = -INFINITY;
        for (int64_t j = lo; j <= pos; ++j) {
          const float* kr = k + ((kv0 + j) * Hkv + hk) * D;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(qr[d]) * double(kr[d]);
          w[size_t(j)] = s * scale;
          mx = std::max(mx, w[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = lo; j <= pos; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - mx));
        double* o = out + (t * Hq + h) * D;
        for (int64_t d = 0; d < D; ++d) o[d] = 0;
        for (int64_t j = lo; j <= pos; ++j) {
          const float* vr = v + ((kv0 + j) * Hkv + hk) * D;
          for (int64_t d = 0; d < D; ++d) o[d] += w[size_t(j)] / sum * double(vr[d]);
        }
      }
    }
  }
}

}  // namespace llmk
