// Formatting of argument errors (see include/llmk/error.hpp).
#include "llmk/error.hpp"

namespace llmk {

void throw_invalid_argument(std::string_view fn, std::string_view arg, const std::string& value,
                            std::string_view requirement) {
  std::string msg;
  msg.reserve(fn.size() + arg.size() + value.size() + requirement.size() + 32);
  msg.append("llmk::").append(fn).append(": argument '").append(arg).append("' = ").append(value);
  msg.append(": ").append(requirement);
  throw InvalidArgument(msg);
}

}  // namespace llmk
