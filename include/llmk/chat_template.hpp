// Chat templates: the prompt text a model's chat template (the Jinja string in the GGUF's
// tokenizer.chat_template) makes of a conversation, rendered by llmk's Jinja interpreter
// (llmk/jinja.hpp) as llama-cpp-python's Jinja2ChatFormatter renders it with jinja2: the
// variables messages, bos_token, eos_token, add_generation_prompt, tools, tool_choice (None),
// functions, function_call (None), raise_exception and strftime_now, plus the template kwargs
// the caller passes (enable_thinking, reasoning_effort, ...). docs/chat_templates.md.
//
// Built-in templates (names()): chatml (llama-cpp-python's CHATML_CHAT_TEMPLATE) and gemma3
// (also named gemma: Gemma 3 instruct's template), for models that carry none.
//
// Errors: InvalidArgument for a template that does not parse (naming the line), for messages
// that are not a non-empty array of objects with a string role, and where rendering fails: the
// template raises (raise_exception's message is in the error), or uses something unsupported,
// or passes the interpreter's bounds. ChatTemplate is immutable: one instance serves many
// threads.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llmk/jinja.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // the texts of the vocabulary's bos / eos ("" when it has none)
  std::time_t now = 0;               // what strftime_now formats, in local time; 0 = now
  std::string tools_json;            // the `tools` variable: a JSON array; "" = None
  std::string kwargs_json;           // more template variables: a JSON object; "" = none
};

class ChatTemplate {
 public:
  // Parses a Jinja chat template; InvalidArgument when it is empty or does not parse.
  static ChatTemplate from_jinja(std::string_view jinja, std::string name = "model");
  // A built-in template by name (names()), else the Jinja file at that path; InvalidArgument
  // listing the names when it is neither.
  static ChatTemplate from_name(std::string_view name);
  static const std::vector<std::string>& names();
  static std::string_view builtin_source(std::string_view name);  // "" when not a name

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  std::string render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const;
  // messages_json: an array of OpenAI-style message objects (role, content, tool_calls,
  // tool_call_id, name, ...), passed to the template as they are.
  std::string render_json(std::string_view messages_json, const ChatRenderOptions& options) const;

 private:
  ChatTemplate(std::shared_ptr<const jinja::Template> t, std::string name, std::string source)
      : tpl_(std::move(t)), name_(std::move(name)), source_(std::move(source)) {}
  std::shared_ptr<const jinja::Template> tpl_;
  std::string name_, source_;
};

// The chat template of tok's model: from_name(name) when `name` is not empty, else
// from_jinja(tok.chat_template()). A model
// without a template (a base model) is an InvalidArgument that says so and suggests
// --chat-template NAME.
ChatTemplate chat_template_of(const Tokenizer& tok, std::string_view name = "");
// bos_token / eos_token as Jinja gets them: the text of tok's bos / eos token, "" when absent.
ChatRenderOptions chat_render_options(const Tokenizer& tok, bool add_generation_prompt = true);
// The ids of a rendered prompt: special tokens parsed; bos prepended when tok.add_bos() and the
// text does not start with the bos token's text already (templates that write bos_token).
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::string_view prompt);

}  // namespace llmk
