// ChatML rendering with an explicit default system prompt, and render_chat, which renders with
// the model's own template (llmk/chat_template.hpp).
#include <string>

#include "llmk/chat_template.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk {

std::string render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                          std::string_view default_system) {
  std::string out;
  if (!default_system.empty() && (messages.empty() || messages[0].role != "system"))
    out.append("<|im_start|>system\n").append(default_system).append("<|im_end|>\n");
  for (const ChatMessage& m : messages)
    out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
  if (add_generation_prompt) out.append("<|im_start|>assistant\n");
  return out;
}

std::string chatml_default_system(std::string_view tpl) {
  // The literal is written inside a Jinja string: '<|im_start|>system\nTEXT<|im_end|>\n',
  // where "\n" is the two characters backslash and n (or, rarely, a real newline).
  for (std::string_view head : {std::string_view("<|im_start|>system\\n"), std::string_view("<|im_start|>system\n")}) {
    const size_t a = tpl.find(head);
    if (a == std::string_view::npos) continue;
    const size_t start = a + head.size();
    const size_t b = tpl.find("<|im_end|>", start);
    const size_t quote = tpl.find_first_of("'\"{}", start);
    if (b == std::string_view::npos || (quote != std::string_view::npos && quote < b)) return "";  // not a literal
    return std::string(tpl.substr(start, b - start));
  }
  return "";
}

std::string render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages) {
  return chat_template_of(tok).render(messages, chat_render_options(tok));
}

}  // namespace llmk
