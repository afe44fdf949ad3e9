// Forced tool calls (llmk/grammar.hpp grammar_for_tool_calls): the call syntax around each tool's
// arguments schema, compiled into one grammar by the json_schema front end.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "grammar/builder.hpp"

namespace llmk {
namespace {

// (<think> TEXT </think> ws{0,4})?, TEXT free of "</think>": left-linear rules text[k] = TEXT so far,
// its end matching the first k bytes of "</think>" (its bytes are distinct, so '<' always restarts at 1).
GrammarSymbol reasoning_block(grammar::Builder& b) {
  constexpr std::string_view close = "</think>";
  constexpr size_t n = close.size();
  std::vector<int32_t> text(n);
  for (size_t k = 0; k < n; ++k) text[k] = b.rule("think text");
  b.alt(text[0], {});
  for (size_t k = 0; k < n; ++k) {
    const grammar::Seq from{grammar::Builder::ref(text[k])};
    ByteSet other{};
    grammar::add_range(other, 0, 255);
    for (uint8_t c : {uint8_t(close[k]), uint8_t('<')}) other[c >> 6] &= ~(uint64_t(1) << (c & 63));
    b.alt(text[0], {from[0], b.set(other)});
    if (k + 1 < n) b.alt(text[k + 1], {from[0], b.byte(uint8_t(close[k]))});  // k + 1 == n: "</think>"
    if (k > 0) b.alt(text[1], {from[0], b.byte('<')});                        // close[0] is '<'
  }
  const int32_t any = b.rule("think text any");
  for (int32_t r : text) b.alt(any, {grammar::Builder::ref(r)});
  ByteSet ws{};
  for (char c : {' ', '\t', '\n', '\r'}) grammar::add(ws, uint8_t(c));
  grammar::Seq block = b.literal("<think>");
  block.push_back(grammar::Builder::ref(any));
  const grammar::Seq end = b.literal(close);
  block.insert(block.end(), end.begin(), end.end());
  block.push_back(b.repeat({b.set(ws)}, 0, 4, "think ws"));
  return b.optional(block, "reasoning");
}

}  // namespace

std::shared_ptr<const Grammar> grammar_for_tool_calls(const std::vector<ToolSchema>& tools,
                                                      const ToolCallSyntax& syntax, int32_t min_calls,
                                                      int32_t max_calls, const GrammarOptions& o) {
  grammar::Builder b("tool_calls", o);
  if (tools.empty()) b.fail("tools", "the list is empty: give at least one tool");
  if (min_calls < 1 || (max_calls >= 0 && max_calls < min_calls))
    b.fail("calls", "min_calls = " + std::to_string(min_calls) + ", max_calls = " + std::to_string(max_calls) +
                        ": need 1 <= min_calls <= max_calls (max_calls < 0: no bound)");
  const int32_t call = b.rule("call");
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSchema& t = tools[i];
    GrammarSymbol args;
    try {
      args = t.parameters.empty() ? b.json_object() : grammar::compile_json_schema(b, t.parameters);
    } catch (const GrammarError& e) {
      std::string what = e.what();
      if (what.starts_with("tool_calls: ")) what.erase(0, 12);  // b's own prefix, added again by fail()
      b.fail("tools[" + std::to_string(i) + "] '" + t.name + "' parameters", what);
    }
    if (t.name.empty() ||
        (!syntax.name_json && std::any_of(t.name.begin(), t.name.end(), [](char c) { return uint8_t(c) < 0x20; })))
      b.fail("tools[" + std::to_string(i) + "]", "name " + nlohmann::json(t.name).dump() + ": must be non-empty" +
                                                     (syntax.name_json ? "" : ", without control characters"));
    const std::string head = syntax.call_open + (syntax.name_json ? nlohmann::json(t.name).dump() : t.name) +
                             syntax.name_close;
    grammar::Seq s = b.literal(head);
    s.push_back(args);
    const grammar::Seq tail = b.literal(syntax.call_close);
    s.insert(s.end(), tail.begin(), tail.end());
    b.alt(call, std::move(s));
  }
  grammar::Seq more = b.literal(syntax.separator);
  more.push_back(grammar::Builder::ref(call));
  grammar::Seq s;
  if (syntax.reasoning) s.push_back(reasoning_block(b));
  const grammar::Seq begin = b.literal(syntax.begin);
  s.insert(s.end(), begin.begin(), begin.end());
  s.push_back(grammar::Builder::ref(call));
  s.push_back(b.repeat(more, min_calls - 1, max_calls < 0 ? -1 : max_calls - 1, "more calls"));
  const grammar::Seq end = b.literal(syntax.end);
  s.insert(s.end(), end.begin(), end.end());
  const int32_t root = b.rule("root");
  b.alt(root, std::move(s));
  return b.finish(root);
}

}  // namespace llmk
