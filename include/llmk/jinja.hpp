// A Jinja2 interpreter for chat templates: the subset of the language model templates use,
// with Python's semantics where a prompt depends on them (str methods on Unicode, slicing by
// code point, repr of lists and dicts, tojson as jinja2's: sorted keys, ", " / ": ", ASCII
// escapes, HTML-safe <>&'), run as jinja2's ImmutableSandboxedEnvironment runs it with
// trim_blocks and lstrip_blocks (llama-cpp-python's Jinja2ChatFormatter). docs/chat_templates.md
// lists the constructs.
//
// Errors: a syntax error, an unknown tag and any construct outside the subset is
// InvalidArgument "llmk::jinja: line N: ..." naming it, at parse time where jinja2 fails at
// compile time and at render time otherwise; so are runtime errors (a type error, an undefined
// value used, raise_exception(msg): its message), a mutating method (append, pop, update: the
// immutable sandbox's SecurityError) and the sandbox bounds (Limits). A Template is immutable:
// one instance renders from many threads at once.
#pragma once
#include <cstddef>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

namespace llmk::jinja {

struct Limits {
  size_t max_steps = 4'000'000;   // expression evaluations and loop iterations in one render
  size_t max_output = 64u << 20;  // bytes of rendered text, and of any one string value
  int max_depth = 256;            // nesting of macro calls and of expressions
};

struct RenderOptions {
  // What strftime_now(format) formats (the render's time); 0 = now, in local time.
  std::time_t now = 0;
  Limits limits;
};

class Template {
 public:
  // Parses template text (UTF-8). InvalidArgument "llmk::jinja: line N: ..." on a syntax
  // error or an unknown tag, filter or test outside a conditional branch (as jinja2's compiler).
  static Template parse(std::string_view source);

  // Renders with the variables of context_json, a JSON object (key order is kept: dicts
  // iterate in it). Globals: range, dict, namespace, raise_exception(msg), strftime_now(fmt).
  std::string render(std::string_view context_json, const RenderOptions& options = {}) const;

  struct Impl;

 private:
  explicit Template(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace llmk::jinja
