// Errors. Every public entry point validates its arguments and throws
// llmk::InvalidArgument with a message that names the function, the argument
// and its value, e.g.
//   llmk::layer_norm: argument 'eps' = -1: must be finite and >= 0
// Kernels never validate: by the time one runs, its inputs are known good.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace llmk {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed a bad argument (shape, dtype, value, device).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A backend (CUDA runtime, OS, file) failed.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class T>
std::string to_str(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, bool>) os << (v ? "true" : "false");
  else if constexpr (std::is_pointer_v<T>) os << static_cast<const void*>(v);
  else os << v;
  return os.str();
}
}  // namespace detail

[[noreturn]] void throw_invalid_argument(std::string_view fn, std::string_view arg, const std::string& value,
                                         std::string_view requirement);

}  // namespace llmk

// LLMK_CHECK_ARG(cond, "fn", "arg", value, "requirement"): throws
// llmk::InvalidArgument naming fn, arg and value when cond is false.
#define LLMK_CHECK_ARG(cond, fn, arg, value, requirement)                                                   \
  do {                                                                                                      \
    if (!(cond)) ::llmk::throw_invalid_argument((fn), (arg), ::llmk::detail::to_str(value), (requirement)); \
  } while (0)
