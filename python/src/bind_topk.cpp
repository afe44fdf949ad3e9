// Python bindings of softmax + top-k (llmk/topk.hpp) and the sampler
// (llmk/sample.hpp). The *_out functions take preallocated outputs
// (python/llmk/topk.py allocates them with the caller's array library) and
// only convert arrays to views and dispatch. `stream` is a cudaStream_t as an
// integer (0: the default stream), used for CUDA arrays only.
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <vector>

#include "arrays.hpp"
#include "llmk/sample.hpp"
#include "llmk/topk.hpp"

namespace llmk::py {
namespace {

// A contiguous output of `n` elements of `t` on `dev`.
template <class T>
T* out_ptr(const MutArray& a, const char* fn, const char* arg, DType t, int64_t n, Device dev) {
  const TensorView v = view(a, fn, arg);
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
      [](const Array& logits, int64_t k, float temperature, const MutArray& probs, const MutArray& indices,
         const MutArray& row_max, const MutArray& lse, uintptr_t stream) {
        const char* fn = "llmk.softmax_topk";
        const TensorView x = view(logits, fn, "logits");
        const int64_t b = x.rows(), kk = k > 0 ? k : 0;
        const SoftmaxTopkOut out{out_ptr<float>(probs, fn, "probs", DType::f32, b * kk, x.device),
                                 out_ptr<int32_t>(indices, fn, "indices", DType::i32, b * kk, x.device),
                                 out_ptr<float>(row_max, fn, "row_max", DType::f32, b, x.device),
                                 out_ptr<float>(lse, fn, "lse", DType::f32, b, x.device)};
        softmax_topk(x, k, temperature, out, reinterpret_cast<Stream>(stream));
      },
      nb::arg("logits"), nb::arg("k"), nb::arg("temperature"), nb::arg("probs"), nb::arg("indices"),
      nb::arg("row_max"), nb::arg("lse"), nb::arg("stream") = 0);
  m.def(
      "sample_out",
      [](const Array& logits, float temperature, int32_t top_k, float top_p, float min_p, float repetition_penalty,
         float presence_penalty, const std::vector<std::vector<int32_t>>& history, uint64_t seed, uint64_t step,
         const MutArray& tokens) {
        const char* fn = "llmk.sample";
        const TensorView x = view(logits, fn, "logits");
        const int64_t b = x.rows();
        LLMK_CHECK_ARG(history.empty() || int64_t(history.size()) == b, fn, "history", history.size(),
                       "must be empty or hold one list per row");
        const SamplingParams p{temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty};
        std::vector<SamplingParams> params(b, p);
        std::vector<TokenHistory> h;
        for (const auto& row : history) h.push_back({row.data(), int64_t(row.size())});
        sample(x, params.data(), h.empty() ? nullptr : h.data(), seed, step,
               out_ptr<int32_t>(tokens, fn, "tokens", DType::i32, b, Device::cpu));
      },
      nb::arg("logits"), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"),
      nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("history"), nb::arg("seed"),
      nb::arg("step"), nb::arg("tokens"));
  m.def("uniform01", &uniform01, nb::arg("seed"), nb::arg("step"), nb::arg("row"));
}

}  // namespace llmk::py
