// llmk._llmk: the extension module. Each component registers its functions
// from its own python/src/bind_<component>.cpp with LLMK_PY_BINDINGS.
#include <nanobind/stl/string.h>

#include <vector>

#include "arrays.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/cuda.hpp"
#include "llmk/parallel.hpp"

namespace llmk::py {

namespace {
// numpy's name of a DLPack dtype: "float64", "int64", "bool", "complex64", ...
std::string dtype_name_of(const nb::dlpack::dtype& t) {
  static const char* const names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string n = t.code < 7 ? names[t.code] : "dtype code " + std::to_string(t.code) + " ";
  if (t.code != uint8_t(nb::dlpack::dtype_code::Bool)) n += std::to_string(t.bits);
  if (t.lanes != 1) n += " x" + std::to_string(t.lanes);
  return n;
}

// What a Python object that is not a usable array is, for an error message:
// its type, and its dtype and device when it has them (str() of each).
std::string describe_object(nb::handle h) {
  if (h.is_none()) return "None";
  const nb::str type = nb::type_name(h.type());
  std::string d = type.c_str(), props;
  for (const char* attr : {"dtype", "device", "layout"}) {
    if (!nb::hasattr(h, attr)) continue;
    try {
      const nb::object value = h.attr(attr);
      const nb::str text = nb::str(value);
      props += (props.empty() ? "" : ", ") + std::string(attr) + " " + text.c_str();
    } catch (const nb::python_error&) {
    }
  }
  return props.empty() ? d : d + " (" + props + ")";
}

bool array_like(nb::handle h) {
  return nb::hasattr(h, "__dlpack__") || nb::hasattr(h, "__array_interface__") || PyObject_CheckBuffer(h.ptr());
}

template <class A>
A cast_array(nb::handle h, const char* fn, const char* arg, bool writable) {
  A a;
  if (nb::try_cast(h, a, false)) return a;
  const std::string what = describe_object(h);
  const std::string need = "must be a numpy array or DLPack tensor (strided, on the CPU or a CUDA GPU)";
  if (!array_like(h)) {  // not an array at all: a TypeError, with the message of an InvalidArgument
    try {
      throw_invalid_argument(fn, arg, what, need);
    } catch (const InvalidArgument& e) {
      throw nb::type_error(e.what());
    }
  }
  if (writable) {  // a read-only array as an output
    Array ro;
    if (nb::try_cast(h, ro, false))
      throw_invalid_argument(fn, arg, what + ", read-only", "must be writable (an output)");
  }
  throw_invalid_argument(fn, arg, what, need + "; this one cannot be viewed");
}
}  // namespace

DType dtype_of(const nb::dlpack::dtype& t, const char* fn, const char* arg) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  if (t.lanes == 1) {
    if (code == C::Float && t.bits == 32) return DType::f32;
    if (code == C::Float && t.bits == 16) return DType::f16;
    if (code == C::Bfloat && t.bits == 16) return DType::bf16;
    if (code == C::Int && t.bits == 32) return DType::i32;
    if (code == C::Int && t.bits == 8) return DType::i8;
    if (code == C::UInt && t.bits == 8) return DType::u8;
  }
  throw_invalid_argument(fn, arg, "dtype " + dtype_name_of(t),
                         "must be float32, float16, bfloat16, int32, int8 or uint8");
}

Array as_array(nb::handle h, const char* fn, const char* arg) { return cast_array<Array>(h, fn, arg, false); }
MutArray as_mut_array(nb::handle h, const char* fn, const char* arg) { return cast_array<MutArray>(h, fn, arg, true); }

Device device_of(int device_type, const char* fn, const char* arg) {
  if (device_type == nb::device::cpu::value) return Device::cpu;
  if (device_type == nb::device::cuda::value) {
    LLMK_CHECK_ARG(cuda_compiled(), fn, arg, "a CUDA array", "this llmk was built without CUDA");
    return Device::cuda;
  }
  throw_invalid_argument(fn, arg, "device type " + std::to_string(device_type), "must be on the CPU or a CUDA GPU");
}

std::vector<void (*)(nb::module_&)>& binders() {
  static std::vector<void (*)(nb::module_&)> b;
  return b;
}
bool register_binder(void (*fn)(nb::module_&)) {
  binders().push_back(fn);
  return true;
}

}  // namespace llmk::py

NB_MODULE(_llmk, m) {
  namespace nb = nanobind;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const llmk::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const llmk::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.def("simd_level", [] { return std::string(llmk::simd_name(llmk::simd_level())); });
  m.def(
      "set_simd_limit",
      [](const std::string& level) {
        for (int l = 0; l <= static_cast<int>(llmk::kTopSimdLevel); ++l)
          if (level == llmk::simd_name(static_cast<llmk::SimdLevel>(l)))
            return llmk::set_simd_limit(static_cast<llmk::SimdLevel>(l));
        // parse_simd_level would name LLMK_SIMD, the environment variable
        llmk::throw_invalid_argument("llmk.set_simd_limit", "level", level, llmk::kSimdLevelChoices);
      },
      nb::arg("level"));
  m.def("num_threads", &llmk::num_threads);
  m.def(
      "set_num_threads",
      [](int64_t n) {  // an int64, so that 2^32 + 1 is named too (an int32 was nanobind's TypeError)
        LLMK_CHECK_ARG(n >= 1 && n <= llmk::kMaxThreads, "llmk.set_num_threads", "n", n,
                       "must be in [1, " + std::to_string(llmk::kMaxThreads) + "]");
        llmk::set_num_threads(int(n));
      },
      nb::arg("n"));
  m.def("cuda_compiled", &llmk::cuda_compiled);
  m.def("cuda_device_count", &llmk::cuda_device_count);
  for (auto* bind : llmk::py::binders()) bind(m);
}
