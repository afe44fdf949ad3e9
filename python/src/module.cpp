// llmk._llmk: the extension module. Each component registers its functions
// from its own python/src/bind_<component>.cpp with LLMK_PY_BINDINGS.
#include <nanobind/stl/string.h>

#include <vector>

#include "arrays.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/cuda.hpp"
#include "llmk/parallel.hpp"

namespace llmk::py {

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
  throw_invalid_argument(fn, arg, "dtype code " + std::to_string(t.code) + " bits " + std::to_string(t.bits),
                         "must be float32, float16, bfloat16, int32, int8 or uint8");
}

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
  m.def("set_simd_limit", [](const std::string& s) { llmk::set_simd_limit(llmk::parse_simd_level(s)); });
  m.def("num_threads", &llmk::num_threads);
  m.def("set_num_threads", &llmk::set_num_threads);
  m.def("cuda_compiled", &llmk::cuda_compiled);
  m.def("cuda_device_count", &llmk::cuda_device_count);
  for (auto* bind : llmk::py::binders()) bind(m);
}
