// Python bindings of LayerNorm / RMSNorm (llmk/norm.hpp): the *_out functions
// take every output preallocated (python/llmk/norm.py allocates them with the
// caller's array library) and only convert arrays to views and dispatch.
// `stream` is a cudaStream_t as an integer (0: the default stream), used for
// CUDA arrays only.
#include <cstdint>

#include "arrays.hpp"
#include "llmk/norm.hpp"

namespace llmk::py {
namespace {

using H = nb::handle;

// Views of each argument, taken in argument order so the first bad one is named.
TensorView in_matrix(H h, const char* fn, const char* arg) { return view(as_array(h, fn, arg), fn, arg); }
TensorView out_matrix(H h, const char* fn, const char* arg) { return view(as_mut_array(h, fn, arg), fn, arg); }
TensorView in_vector(H h, const char* fn, const char* arg) { return view(as_array(h, fn, arg), fn, arg, false); }
TensorView out_vector(H h, const char* fn, const char* arg) { return view(as_mut_array(h, fn, arg), fn, arg, false); }
// None: an empty view (weight = 1, bias = 0, gradient not wanted).
TensorView opt_in_vector(H h, const char* fn, const char* arg) {
  return h.is_none() ? TensorView{} : in_vector(h, fn, arg);
}
TensorView opt_out_vector(H h, const char* fn, const char* arg) {
  return h.is_none() ? TensorView{} : out_vector(h, fn, arg);
}
Stream as_stream(uintptr_t s) { return reinterpret_cast<Stream>(s); }

}  // namespace

LLMK_PY_BINDINGS(norm) {
  m.def(
      "layer_norm_out",
      [](H x, H w, H b, float eps, H y, H mean, H rstd, uintptr_t stream) {
        const char* fn = "llmk.layer_norm";
        const TensorView vx = in_matrix(x, fn, "x"), vw = opt_in_vector(w, fn, "weight"),
                         vb = opt_in_vector(b, fn, "bias"), vy = out_matrix(y, fn, "y"),
                         vmean = out_vector(mean, fn, "mean"), vrstd = out_vector(rstd, fn, "rstd");
        layer_norm(vx, vw, vb, eps, vy, vmean, vrstd, as_stream(stream));
      },
      nb::arg("x").none(), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("eps"), nb::arg("y").none(),
      nb::arg("mean").none(), nb::arg("rstd").none(), nb::arg("stream") = 0);
  m.def(
      "layer_norm_backward_out",
      [](H dy, H x, H w, H mean, H rstd, H dx, H dw, H db, uintptr_t stream) {
        const char* fn = "llmk.layer_norm_backward";
        const TensorView vdy = in_matrix(dy, fn, "dy"), vx = in_matrix(x, fn, "x"), vw = opt_in_vector(w, fn, "weight"),
                         vmean = in_vector(mean, fn, "mean"), vrstd = in_vector(rstd, fn, "rstd"),
                         vdx = out_matrix(dx, fn, "dx"), vdw = opt_out_vector(dw, fn, "dweight"),
                         vdb = opt_out_vector(db, fn, "dbias");
        layer_norm_backward(vdy, vx, vw, vmean, vrstd, vdx, vdw, vdb, as_stream(stream));
      },
      nb::arg("dy").none(), nb::arg("x").none(), nb::arg("weight").none(), nb::arg("mean").none(),
      nb::arg("rstd").none(), nb::arg("dx").none(), nb::arg("dweight").none(), nb::arg("dbias").none(),
      nb::arg("stream") = 0);
  m.def(
      "rms_norm_out",
      [](H x, H w, float eps, H y, H rstd, uintptr_t stream) {
        const char* fn = "llmk.rms_norm";
        const TensorView vx = in_matrix(x, fn, "x"), vw = opt_in_vector(w, fn, "weight"), vy = out_matrix(y, fn, "y"),
                         vrstd = out_vector(rstd, fn, "rstd");
        rms_norm(vx, vw, eps, vy, vrstd, as_stream(stream));
      },
      nb::arg("x").none(), nb::arg("weight").none(), nb::arg("eps"), nb::arg("y").none(), nb::arg("rstd").none(),
      nb::arg("stream") = 0);
  m.def(
      "rms_norm_backward_out",
      [](H dy, H x, H w, H rstd, H dx, H dw, uintptr_t stream) {
        const char* fn = "llmk.rms_norm_backward";
        const TensorView vdy = in_matrix(dy, fn, "dy"), vx = in_matrix(x, fn, "x"), vw = opt_in_vector(w, fn, "weight"),
                         vrstd = in_vector(rstd, fn, "rstd"), vdx = out_matrix(dx, fn, "dx"),
                         vdw = opt_out_vector(dw, fn, "dweight");
        rms_norm_backward(vdy, vx, vw, vrstd, vdx, vdw, as_stream(stream));
      },
      nb::arg("dy").none(), nb::arg("x").none(), nb::arg("weight").none(), nb::arg("rstd").none(), nb::arg("dx").none(),
      nb::arg("dweight").none(), nb::arg("stream") = 0);
}

}  // namespace llmk::py
