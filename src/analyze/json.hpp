// A strict JSON reader (RFC 8259, nlohmann-json's parser) for model config
// files: objects, arrays, strings (valid UTF-8, \uXXXX escapes), numbers,
// true/false/null. No comments, no trailing commas, no duplicate keys, no
// nesting deeper than 64, nothing after the value. Numbers keep their source
// text so integers can be checked exactly. Errors throw llmk::InvalidArgument
// naming the source and, for syntax errors, the line and column.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmk::analyze::json {

struct Member;

struct Value {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool b = false;
  std::string text;             // number: its source text; string: the decoded string
  std::vector<Value> items;     // array
  std::vector<Member> members;  // object, in file order
  // How the value appeared in the file, for error messages.
  std::string repr() const;
};

// An object's member. A struct rather than std::pair<std::string, Value>:
// clang (14, with libstdc++ 12) rejects that pair inside Value, still incomplete there.
struct Member {
  std::string key;
  Value value;
};

Value parse(std::string_view text, std::string_view source);

}  // namespace llmk::analyze::json
