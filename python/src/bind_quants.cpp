// Python bindings of the storage-type traits table (llmk/ggml_quants.hpp): the reference
// dequantizer and quantizer of each type, on raw bytes (python/llmk/quants.py wraps them
// for numpy).
#include <nanobind/stl/string.h>

#include <string>

#include "arrays.hpp"
#include "llmk/ggml_quants.hpp"

namespace llmk::py {
namespace {
const WTypeTraits& traits_named(const char* fn, const std::string& type) {
  const WTypeTraits* t = wtype_traits_named(type);
  LLMK_CHECK_ARG(t != nullptr, fn, "type", type, "must be " + wtype_choices());
  return *t;
}
}  // namespace

LLMK_PY_BINDINGS(quants) {
  m.def(
      "dequantize_bytes",
      [](const std::string& type, nb::bytes data) {
        const char* fn = "llmk.dequantize";
        const WTypeTraits& t = traits_named(fn, type);
        LLMK_CHECK_ARG(data.size() % size_t(t.block_bytes) == 0, fn, "data", std::to_string(data.size()) + " bytes",
                       "must be whole " + std::to_string(t.block_bytes) + "-byte blocks of " + t.name);
        const int64_t n = int64_t(data.size()) / t.block_bytes * t.block_elems;
        std::string out(size_t(n) * 4, '\0');
        t.to_float(data.c_str(), reinterpret_cast<float*>(out.data()), n);
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("type"), nb::arg("data"));
  m.def(
      "quantize_bytes",
      [](const std::string& type, nb::bytes values) {
        const char* fn = "llmk.quantize";
        const WTypeTraits& t = traits_named(fn, type);
        const int64_t n = int64_t(values.size() / 4);
        LLMK_CHECK_ARG(values.size() % 4 == 0 && n % t.block_elems == 0, fn, "x", std::to_string(n) + " values",
                       "must be whole blocks of " + std::to_string(t.block_elems) + " f32 values for " + t.name);
        std::string out(size_t(n / t.block_elems * t.block_bytes), '\0');
        t.from_float(reinterpret_cast<const float*>(values.c_str()), out.data(), n);
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("type"), nb::arg("x"));
}

}  // namespace llmk::py
