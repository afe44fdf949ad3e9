// Tool calls and reasoning in a chat model's reply: the model's text split into reasoning
// (<think>...</think>), content and OpenAI-style tool calls, for the tool-call formats of the
// families llmk runs. Pure functions of their arguments; thread-safe.
//
// Formats (tool_format_names()):
//   hermes       Hermes 2/3, Qwen 2.5/3: <tool_call>{"name": N, "arguments": {...}}</tool_call>, repeated
//   llama3       Llama 3.1-3.3: the reply is {"name": N, "parameters": {...}} (or "arguments"),
//                optionally after <|python_tag|>; several separated by ';'
//   mistral      [TOOL_CALLS][{"name": N, "arguments": {...}}, ...], or [TOOL_CALLS]N[ARGS]{...} repeated
//   deepseek-r1
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>...
// A reply whose tool-call markup is malformed or truncated (bad JSON, no name, no closing tag)
// parses to no calls and malformed = true: the caller returns the whole text as content.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace llmk {

enum class ToolFormat { none, hermes, llama3, mistral, deepseek_r1 };

const std::vector<std::string>& tool_format_names();
// By name; InvalidArgument listing the names otherwise.
ToolFormat tool_format_from_name(std::string_view name);
std::string_view tool_format_name(ToolFormat f);
// The format a chat template's text writes tool calls in (its markers); none when it has none.
ToolFormat detect_tool_format(std::string_view template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedReply {
  std::string reasoning;  // what was inside <think>...</think> (split_reasoning only)
  std::string content;
  std::vector<ToolCall> calls;
  bool malformed = false;  // tool-call markup that does not parse: content is the whole text
};

// Splits text: reasoning first when split_reasoning (a reply that opens <think> or closes
// </think>; an unclosed one is all reasoning), then tool calls in `format` from the rest.
ParsedReply parse_reply(std::string_view text, ToolFormat format, bool split_reasoning);

}  // namespace llmk
