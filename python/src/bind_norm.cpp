// Python bindings of LayerNorm / RMSNorm (llmk/norm.hpp): the *_out functions
// take every output preallocated (python/llmk/norm.py allocates them with the
// caller's array library) and only convert arrays to views and dispatch.
// `stream` is a cudaStream_t as an integer (0: the default stream), used for
// CUDA arrays only.
#include <nanobind/stl/optional.h>

#include <cstdint>
#include <optional>

#include "arrays.hpp"
#include "llmk/norm.hpp"

namespace llmk::py {
namespace {

using OptArray = std::optional<Array>;
using OptMut = std::optional<MutArray>;

template <class A>
TensorView opt_vector(const std::optional<A>& a, const char* fn, const char* arg) {
  return a ? view(*a, fn, arg, false) : TensorView{};
}
Stream as_stream(uintptr_t s) { return reinterpret_cast<Stream>(s); }

}  // namespace

LLMK_PY_BINDINGS(norm) {
  m.def(
      "layer_norm_out",
      [](const Array& x, const OptArray& w, const OptArray& b, float eps, const MutArray& y, const MutArray& mean,
         const MutArray& rstd, uintptr_t stream) {
        const char* fn = "llmk.layer_norm";
        layer_norm(view(x, fn, "x"), opt_vector(w, fn, "weight"), opt_vector(b, fn, "bias"), eps, view(y, fn, "y"),
                   view(mean, fn, "mean", false), view(rstd, fn, "rstd", false), as_stream(stream));
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("eps"), nb::arg("y"), nb::arg("mean"),
      nb::arg("rstd"), nb::arg("stream") = 0);
  m.def(
      "layer_norm_backward_out",
      [](const Array& dy, const Array& x, const OptArray& w, const Array& mean, const Array& rstd, const MutArray& dx,
         const OptMut& dw, const OptMut& db, uintptr_t stream) {
        const char* fn = "llmk.layer_norm_backward";
        layer_norm_backward(view(dy, fn, "dy"), view(x, fn, "x"), opt_vector(w, fn, "weight"),
                            view(mean, fn, "mean", false), view(rstd, fn, "rstd", false), view(dx, fn, "dx"),
                            opt_vector(dw, fn, "dweight"), opt_vector(db, fn, "dbias"), as_stream(stream));
      },
      nb::arg("dy"), nb::arg("x"), nb::arg("weight").none(), nb::arg("mean"), nb::arg("rstd"), nb::arg("dx"),
      nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("stream") = 0);
  m.def(
      "rms_norm_out",
      [](const Array& x, const OptArray& w, float eps, const MutArray& y, const MutArray& rstd, uintptr_t stream) {
        const char* fn = "llmk.rms_norm";
        rms_norm(view(x, fn, "x"), opt_vector(w, fn, "weight"), eps, view(y, fn, "y"), view(rstd, fn, "rstd", false),
                 as_stream(stream));
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("eps"), nb::arg("y"), nb::arg("rstd"), nb::arg("stream") = 0);
  m.def(
      "rms_norm_backward_out",
      [](const Array& dy, const Array& x, const OptArray& w, const Array& rstd, const MutArray& dx, const OptMut& dw,
         uintptr_t stream) {
        const char* fn = "llmk.rms_norm_backward";
        rms_norm_backward(view(dy, fn, "dy"), view(x, fn, "x"), opt_vector(w, fn, "weight"),
                          view(rstd, fn, "rstd", false), view(dx, fn, "dx"), opt_vector(dw, fn, "dweight"),
                          as_stream(stream));
      },
      nb::arg("dy"), nb::arg("x"), nb::arg("weight").none(), nb::arg("rstd"), nb::arg("dx"), nb::arg("dweight").none(),
      nb::arg("stream") = 0);
}

}  // namespace llmk::py
