// Turning any DLPack/numpy array into an llmk::TensorView, with the argument
// named in every error. Used by every bind_*.cpp.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "llmk/error.hpp"
#include "llmk/tensor.hpp"

namespace llmk::py {

namespace nb = nanobind;
using Array = nb::ndarray<nb::ro>;
using MutArray = nb::ndarray<>;

// Maps the array's dtype; throws naming `arg` for anything but f32/f16/bf16/i32/i8/u8.
DType dtype_of(const nb::dlpack::dtype& t, const char* fn, const char* arg);
Device device_of(int device_type, const char* fn, const char* arg);

// The array behind argument `arg`. Anything nanobind cannot view as one (None,
// a list, an object array, a meta or sparse tensor, a read-only output) throws
// naming `arg` and what it is: TypeError for a non-array, ValueError for an
// array that cannot be viewed. Bindings take nb::handle and call these, in
// argument order, so the first bad argument is the one named.
Array as_array(nb::handle h, const char* fn, const char* arg);
MutArray as_mut_array(nb::handle h, const char* fn, const char* arg);

// A view of a 1-D or 2-D array whose last dimension is contiguous. A 1-D
// array is viewed as [1, n] when as_matrix is true.
template <class A>
TensorView view(const A& a, const char* fn, const char* arg, bool as_matrix = true) {
  LLMK_CHECK_ARG(a.ndim() >= 1 && a.ndim() <= 2, fn, arg, std::to_string(a.ndim()) + "-d array",
                 "must be a 1-d or 2-d array");
  const int64_t cols = a.shape(a.ndim() - 1);
  LLMK_CHECK_ARG(cols <= 1 || a.stride(a.ndim() - 1) == 1, fn, arg, "stride " + std::to_string(a.stride(a.ndim() - 1)),
                 "last dimension must be contiguous");
  const DType t = dtype_of(a.dtype(), fn, arg);
  const Device d = device_of(a.device_type(), fn, arg);
  if (a.ndim() == 1 && !as_matrix) return TensorView::vector(a.data(), t, cols, d);
  const int64_t rows = a.ndim() == 2 ? a.shape(0) : 1;
  int64_t rs = a.ndim() == 2 ? a.stride(0) : cols;
  if (rows <= 1) rs = cols;
  LLMK_CHECK_ARG(rs >= cols, fn, arg, "row stride " + std::to_string(rs), "rows must not overlap");
  return TensorView::matrix(a.data(), t, rows, cols, rs, d);
}

// Registration of a component's bindings; see LLMK_PY_BINDINGS.
bool register_binder(void (*fn)(nb::module_&));

}  // namespace llmk::py

// In python/src/bind_<component>.cpp:
//   LLMK_PY_BINDINGS(norm) { m.def("layer_norm_out", ...); }
#define LLMK_PY_BINDINGS(name)                                                                    \
  static void llmk_bind_##name(::nanobind::module_& m);                                           \
  static const bool llmk_bind_registered_##name = ::llmk::py::register_binder(&llmk_bind_##name); \
  static void llmk_bind_##name(::nanobind::module_& m)
