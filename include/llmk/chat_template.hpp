// Chat templates: the prompt text a model's chat template (the Jinja string in the GGUF's
// tokenizer.chat_template) makes of a conversation. llmk recognises the templates of the
// families below by the expressions that render a message, and renders them natively; the
// output is byte-identical to Jinja2 rendering the same template string as llama-cpp-python
// does (python/tests/test_chat_template.py, docs/chat_templates.md). A template that is not
// recognised is an error, never a guess; --chat-template NAME picks a family by name instead.
//
// Names (ChatTemplate::names()): chatml (SmolLM2, Qwen2.5: the template's default system
// prompt, if any, when the first message is not a system one), qwen3 (ChatML with <think>
// blocks), llama3 (3.1/3.2/3.3), mistral-v0 ([INST] x [/INST]), mistral-v0.1 (the same with a
// space after each eos), mistral-nemo ([INST]x[/INST], the system prompt in the last user
// turn), phi3 (Phi-3.5), gemma2, gemma3 (the system prompt folded into the first user turn;
// also named gemma), deepseek-r1 (R1-Distill-Llama; deepseek-r1-qwen adds "</think>" to the
// generation prompt, as R1-Distill-Qwen's template does).
//
// Messages: role "system", "user" or "assistant", content any UTF-8 text, at least one message;
// anything else is InvalidArgument naming the message. Where the template itself raises an
// exception (roles not alternating, a system message where none is supported), render()
// throws InvalidArgument with the template's message. ChatTemplate is immutable: one instance
// serves many threads.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llmk/tokenizer.hpp"

namespace llmk {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // the texts of the vocabulary's bos / eos ("" when it has none)
  std::string date;  // "Today Date" where the template calls strftime_now("%d %b %Y"); "" = today, local time
};

class ChatTemplate {
 public:
  // Recognises a Jinja chat template. InvalidArgument naming what was found (its length and
  // first line) when it is not one of the known forms, or when it is empty.
  static ChatTemplate from_jinja(std::string_view jinja);
  // A family by name (names()); InvalidArgument listing the names otherwise.
  static ChatTemplate from_name(std::string_view name);
  static const std::vector<std::string>& names();

  const std::string& name() const { return name_; }
  std::string render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const;

 private:
  enum class Family { chatml, qwen3, llama3, mistral_v0, mistral_nemo, phi3, gemma2, gemma3, deepseek_r1 };
  ChatTemplate(Family f, std::string name) : family_(f), name_(std::move(name)) {}
  friend struct ChatTemplateRecognizer;

  Family family_;
  std::string name_;
  std::string default_system_;  // chatml: inserted when the first message is not a system one
  std::string fixed_date_;      // llama3: the template's literal date_string; "" = strftime_now
  bool eos_space_ = false;      // mistral-v0.1: assistant turns end with eos + ' '
  bool think_close_ = false;    // deepseek-r1-qwen: the generation prompt ends with "</think>"
};

// The chat template of tok's model: from_name(name) when name is not empty, else
// from_jinja(tok.chat_template()). A model without a template (a base model) is an
// InvalidArgument that says so and suggests --chat-template NAME.
ChatTemplate chat_template_of(const Tokenizer& tok, std::string_view name = "");
// bos_token / eos_token as Jinja gets them: the text of tok's bos / eos token, "" when absent.
ChatRenderOptions chat_render_options(const Tokenizer& tok, bool add_generation_prompt = true);
// The ids of a rendered prompt: special tokens parsed; bos prepended when tok.add_bos() and the
// text does not start with the bos token's text already (templates that write bos_token).
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::string_view prompt);

}  // namespace llmk
