// `llmk serve`'s chat requests: the conversation (messages with tool calls and tool results,
// tools, tool_choice, parallel_tool_calls, template kwargs) rendered by the model's chat
// template, and the reply split into reasoning_content, content and tool_calls
// (llmk/tool_calls.hpp); /apply-template's body. docs/serving.md.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llmk/chat_template.hpp"
#include "llmk/tool_calls.hpp"

namespace llmk::serve {

// A field the request got wrong: the server answers 400 naming `param`.
struct ChatRequestError {
  std::string param, message;
};

// The server's settings: --tool-parser (none: detected from the template), --reasoning-format.
struct ChatConfig {
  ToolFormat tool_format = ToolFormat::none;
  bool split_reasoning = true;  // --reasoning-format deepseek (the default, for templates that write <think>) / none
};

// What one chat request asks of its reply.
struct ChatReplyOptions {
  bool parse_tools = false;  // tools given and tool_choice not "none"
  ToolFormat format = ToolFormat::none;
  bool parallel = true;  // parallel_tool_calls
  // tool_choice "required" or a named function: the tools the reply must call, as a JSON array of
  // {"index" (in tools), "name", "parameters"} ("": tool calls are not forced).
  std::string forced_tools;
  bool split_reasoning = false;
  // The reply is parsed whole at its end: a stream sends it as deltas then.
  bool buffered() const { return parse_tools || split_reasoning; }
};

// The prompt text of a chat request (raw: its body as sent, so key order is kept). Throws
// ChatRequestError for a bad messages / tools / tool_choice / chat_template_kwargs field.
std::string render_chat_request(const std::string& raw, const ChatTemplate& tpl, const ChatRenderOptions& base,
                                const ChatConfig& cfg, ChatReplyOptions* reply);

// The assistant message of a finished reply and its finish_reason (engine_finish unless the
// reply holds tool calls: "tool_calls"); tool-call ids are "call_<id_base>_<k>".
nlohmann::json reply_message(const std::string& text, const ChatReplyOptions& o, const std::string& engine_finish,
                             const std::string& id_base, std::string* finish_reason);
// The same reply as stream deltas, in order: reasoning_content, content, one per tool call.
std::vector<nlohmann::json> reply_deltas(const std::string& text, const ChatReplyOptions& o,
                                         const std::string& engine_finish, const std::string& id_base,
                                         std::string* finish_reason);

}  // namespace llmk::serve
