// Python bindings of softmax + top-k (llmk/topk.hpp) and the sampler
// (llmk/sample.hpp). The *_out functions take preallocated outputs
// (python/llmk/topk.py allocates them with the caller's array library) and
// only convert arrays to views and dispatch. `stream` is a cudaStream_t as an
// integer (0: the default stream), used for CUDA arrays only.
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "arrays.hpp"
#include "llmk/sample.hpp"
#include "llmk/topk.hpp"

namespace llmk::py {
namespace {

// A contiguous output of `n` elements of `t` on `dev`.
template <class T>
T* out_ptr(nb::handle h, const char* fn, const char* arg, DType t, int64_t n, Device dev) {
  const TensorView v = view(as_mut_array(h, fn, arg), fn, arg);
  LLMK_CHECK_ARG(v.dtype == t && v.device == dev, fn, arg, v.describe(),
                 std::string("must be ") + dtype_name(t) + " on the logits' device");
  LLMK_CHECK_ARG(n == 0 || (v.numel() == n && (v.rows() <= 1 || v.row_stride() == v.cols())), fn, arg, v.describe(),
                 "must be contiguous with " + std::to_string(n) + " elements");
  return v.ptr<T>();
}

}  // namespace

LLMK_PY_BINDINGS(topk) {
  m.def(
      "softmax_topk_out",
      [](nb::handle logits, int64_t k, float temperature, nb::handle probs, nb::handle indices, nb::handle row_max,
         nb::handle lse, uintptr_t stream) {
        const char* fn = "llmk.softmax_topk";
        const TensorView x = view(as_array(logits, fn, "logits"), fn, "logits");
        // Outputs hold min(k, V) columns (none for k < 1): softmax_topk names a bad k itself.
        const int64_t b = x.rows(), kk = std::clamp<int64_t>(k, 0, x.cols());
        float* p = out_ptr<float>(probs, fn, "probs", DType::f32, b * kk, x.device);
        int32_t* i = out_ptr<int32_t>(indices, fn, "indices", DType::i32, b * kk, x.device);
        float* mx = out_ptr<float>(row_max, fn, "row_max", DType::f32, b, x.device);
        const SoftmaxTopkOut out{p, i, mx, out_ptr<float>(lse, fn, "lse", DType::f32, b, x.device)};
        softmax_topk(x, k, temperature, out, reinterpret_cast<Stream>(stream));
      },
      nb::arg("logits").none(), nb::arg("k"), nb::arg("temperature"), nb::arg("probs").none(),
      nb::arg("indices").none(), nb::arg("row_max").none(), nb::arg("lse").none(), nb::arg("stream") = 0);
  m.def(
      "sample_out",
      [](nb::handle logits, float temperature, int64_t top_k, float top_p, float min_p, float repetition_penalty,
         float presence_penalty, const std::vector<std::vector<int32_t>>& history, uint64_t seed, uint64_t step,
         nb::handle tokens) {
        const char* fn = "llmk.sample";
        const TensorView x = view(as_array(logits, fn, "logits"), fn, "logits");
        const int64_t b = x.rows();
        LLMK_CHECK_ARG(history.empty() || int64_t(history.size()) == b, fn, "history", history.size(),
                       "must be empty or hold one list per row");
        LLMK_CHECK_ARG(top_k >= 0, fn, "top_k", top_k, "must be >= 0 (0 = off)");
        // top_k >= V is off, as is every value above int32's range (V < 2^31).
        const int32_t k32 = int32_t(std::min<int64_t>(top_k, INT32_MAX));
        const SamplingParams p{temperature, k32, top_p, min_p, repetition_penalty, presence_penalty};
        std::vector<SamplingParams> params(b, p);
        std::vector<TokenHistory> h;
        for (const auto& row : history) h.push_back({row.data(), int64_t(row.size())});
        int32_t* out = out_ptr<int32_t>(tokens, fn, "tokens", DType::i32, b, Device::cpu);
        sample(x, params.data(), h.empty() ? nullptr : h.data(), seed, step, out);
      },
      nb::arg("logits").none(), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"),
      nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("history"), nb::arg("seed"), nb::arg("step"),
      nb::arg("tokens").none());
  m.def("uniform01", &uniform01, nb::arg("seed"), nb::arg("step"), nb::arg("row"));
}

}  // namespace llmk::py
