// Formatting of argument errors (see include/llmk/error.hpp).
#include "llmk/error.hpp"

namespace llmk {

void throw_invalid_argument(std::string_view fn, std::string_view arg, const std::string& value,
                            std::string_view requirement) {
  std::string msg;
  msg.reserve(fn.size() + arg.size() + value.size() + requirement.size() + 32);
  // fn names the function; "llmk::" is added unless it is there already ("llmk::layer_norm",
  // or "llmk.layer_norm" for the Python module's functions).
  if (fn.substr(0, 6) != "llmk::" && fn.substr(0, 5) != "llmk.") msg.append("llmk::");
  msg.append(fn).append(": argument '").append(arg).append("' = ").append(value);
  msg.append(": ").append(requirement);
  throw InvalidArgument(msg);
}

}  // namespace llmk
