// Chat templates recognised by the expressions that render a message and rendered natively
// (include/llmk/chat_template.hpp). Recognition compares against a normalised copy of the
// template (double quotes as single, "\n" escapes as newlines, message.x as message['x']), so
// quoting and escaping styles do not matter while every literal a prompt contains is matched.
#include "llmk/chat_template.hpp"

#include <ctime>
#include <initializer_list>

#include "llmk/error.hpp"

namespace llmk {

namespace {

constexpr const char* kFn = "chat_template";

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string normalise(std::string_view tpl) {
  std::string s(tpl);
  s = replace_all(std::move(s), "\"", "'");
  s = replace_all(std::move(s), "\\n", "\n");
  for (const char* key : {"role", "content"})
    s = replace_all(std::move(s), std::string("message.") + key, std::string("message['") + key + "']");
  return s;
}

bool has_all(const std::string& s, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    if (s.find(p) == std::string::npos) return false;
  return true;
}

// Python's str.isspace() set, which Jinja's trim (str.strip()) removes.
size_t py_space_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const size_t left = s.size() - i;
  const uint8_t c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xc2 && left >= 2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;
  if (c == 0xe1 && left >= 3 && b(1) == 0x9a && b(2) == 0x80) return 3;  // U+1680
  if (c == 0xe2 && left >= 3) {
    if (b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf))
      return 3;                                  // U+2000-200A, 2028/9, 202F
    if (b(1) == 0x81 && b(2) == 0x9f) return 3;  // U+205F
  }
  if (c == 0xe3 && left >= 3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

// The byte length of the UTF-8 character that ends at s[end-1] (1 for invalid bytes).
size_t last_char_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  for (int k = 0; k < 3 && i > 0 && (uint8_t(s[i]) & 0xc0) == 0x80; ++k) --i;
  return i;
}

std::string py_trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b) {
    const size_t n = py_space_len(s, a);
    if (n == 0) break;
    a += n;
  }
  while (b > a) {
    const size_t start = last_char_start(s, b);
    if (start < a || py_space_len(s, start) != b - start) break;
    b = start;
  }
  return std::string(s.substr(a, b - a));
}

std::string_view lstrip_nl(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_nl(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
// Python's s.split(sep)[-1]: what follows the last sep (all of s when there is none).
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// The default system prompt of a ChatML template: the text of a literal
// '<|im_start|>system\nTEXT<|im_end|>' (no expression inside), "" when there is none.
std::string literal_default_system(const std::string& norm) {
  const std::string_view head = "'<|im_start|>system\n";
  for (size_t a = norm.find(head); a != std::string::npos; a = norm.find(head, a + 1)) {
    const size_t start = a + head.size();
    const size_t end = norm.find("<|im_end|>", start);
    const size_t quote = norm.find_first_of("'{}", start);
    if (end != std::string::npos && (quote == std::string::npos || quote > end)) return norm.substr(start, end - start);
  }
  return "";
}

[[noreturn]] void template_error(std::string_view msg) {
  throw InvalidArgument("llmk::chat_template: " + std::string(msg));
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
  return std::string(buf, n);
}

// Jinja templates that check alternation: message i (after the optional system one) must be
// a user message exactly when i is even.
void check_alternation(std::span<const ChatMessage> ms, std::string_view msg) {
  for (size_t i = 0; i < ms.size(); ++i)
    if ((ms[i].role == "user") != (i % 2 == 0)) template_error(msg);
}

}  // namespace

struct ChatTemplateRecognizer {
  using Family = ChatTemplate::Family;

  static ChatTemplate recognise(std::string_view jinja) {
    const std::string s = normalise(jinja);
    const bool chatml = has_all(s, {"'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"});
    if (chatml && has_all(s, {"last_query_index", "reasoning_content",
                              "'\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n')",
                              "message['content'].split('</think>')[-1].lstrip('\n')"}))
      return ChatTemplate(Family::qwen3, "qwen3");
    // (tool-use ChatML templates write bos and a tools system prompt whatever the conversation)
    if (chatml && s.find("<think>") == std::string::npos && s.find("reasoning") == std::string::npos &&
        s.find("bos_token") == std::string::npos && s.find("macro") == std::string::npos) {
      ChatTemplate t(Family::chatml, "chatml");
      t.default_system_ = literal_default_system(s);
      return t;
    }
    if (has_all(s, {"'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
                    "'<|eot_id|>'",
                    "'Cutting Knowledge Date: December 2023\n'", "'Today Date: ' + date_string + '\n\n'",
                    "{{- bos_token }}", "{%- set system_message = messages[0]['content']|trim %}"})) {
      ChatTemplate t(Family::llama3, "llama3");
      if (s.find("strftime_now('%d %b %Y')") == std::string::npos) {
        const std::string_view head = "{%- set date_string = '";
        const size_t a = s.find(head);
        if (a == std::string::npos) template_error("a Llama 3 template without a date_string");
        const size_t b = s.find('\'', a + head.size());
        t.fixed_date_ = s.substr(a + head.size(), b - a - head.size());
      }
      return t;
    }
    if (has_all(s, {"'[INST]' + system_message + '\n\n' + message['content'] + '[/INST]'",
                    "'[INST]' + message['content'] + '[/INST]'", "message['content'] + eos_token", "{{- bos_token }}"}))
      return ChatTemplate(Family::mistral_nemo, "mistral-nemo");
    if (has_all(s, {"'[INST] ' + message['content'] + ' [/INST]'",
                    "raise_exception('Only user and assistant roles are supported!')", "{{ bos_token }}",
                    "(message['role'] == 'user') != (loop.index0 % 2 == 0)"})) {
      if (s.find("message['content'] + eos_token + ' '") != std::string::npos) {
        ChatTemplate t(Family::mistral_v0, "mistral-v0.1");
        t.eos_space_ = true;
        return t;
      }
      if (s.find("message['content'] + eos_token}}") != std::string::npos)
        return ChatTemplate(Family::mistral_v0, "mistral-v0");
    }
    if (has_all(s, {"message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + "
                    "'<|end|>\n'}}",
                    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}",
                    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}",
                    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"}))
      return ChatTemplate(Family::phi3, "phi3");
    if (has_all(s, {"{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
                    "supported') }}",
                    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}",
                    "(message['role'] == 'user') != (loop.index0 % 2 == 0)", "{{'<start_of_turn>model\n'}}"}))
      return ChatTemplate(Family::gemma2, "gemma2");
    if (has_all(s, {"{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}",
                    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}",
                    "{{ message['content'] | trim }}", "(message['role'] == 'user') != (loop.index0 % 2 == 0)",
                    "{{'<start_of_turn>model\n'}}"}))
      return ChatTemplate(Family::gemma3, "gemma3");
    if (has_all(s, {"{{bos_token}}{{ns.system_prompt}}", "{%- set ns.system_prompt = message['content'] -%}",
                    "{{'<｜User｜>' + message['content']}}", "{%- set content = content.split('</think>')[-1] -%}",
                    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}",
                    "{%- if add_generation_prompt and not ns.is_tool -%}{{'<｜Assistant｜><think>\n'}}"})) {
      const size_t at = s.find("{{'<｜Assistant｜><think>\n'}}");
      const std::string_view tail = std::string_view(s).substr(
          at + std::string_view("{{'<｜Assistant｜><think>\n'}}").size());
      if (tail.starts_with("{% if not enable_thinking %}{{- '</think>' -}}{% endif %}")) {
        ChatTemplate t(Family::deepseek_r1, "deepseek-r1-qwen");
        t.think_close_ = true;
        return t;
      }
      if (tail.starts_with("\n{%- endif %}")) return ChatTemplate(Family::deepseek_r1, "deepseek-r1");
    }
    std::string_view first = jinja.substr(0, jinja.find('\n'));
    if (first.size() > 80) first = first.substr(0, 80);
    throw_invalid_argument(kFn, "template",
                           std::to_string(jinja.size()) + " bytes beginning '" + std::string(first) + "'",
                           "is not a chat template llmk knows (" + known_list() +
                               "); pass --chat-template NAME (llmk.LLM(chat_template=NAME)) to pick one");
  }

  static std::string known_list() {
    std::string out;
    for (const std::string& n : ChatTemplate::names()) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  static ChatTemplate by_name(std::string_view name) {
    if (name == "chatml") return ChatTemplate(Family::chatml, "chatml");
    if (name == "qwen3") return ChatTemplate(Family::qwen3, "qwen3");
    if (name == "llama3") return ChatTemplate(Family::llama3, "llama3");
    if (name == "mistral-v0") return ChatTemplate(Family::mistral_v0, "mistral-v0");
    if (name == "mistral-v0.1") {
      ChatTemplate t(Family::mistral_v0, "mistral-v0.1");
      t.eos_space_ = true;
      return t;
    }
    if (name == "mistral-nemo") return ChatTemplate(Family::mistral_nemo, "mistral-nemo");
    if (name == "phi3") return ChatTemplate(Family::phi3, "phi3");
    if (name == "gemma2") return ChatTemplate(Family::gemma2, "gemma2");
    if (name == "gemma3" || name == "gemma") return ChatTemplate(Family::gemma3, "gemma3");
    if (name == "deepseek-r1") return ChatTemplate(Family::deepseek_r1, "deepseek-r1");
    if (name == "deepseek-r1-qwen") {
      ChatTemplate t(Family::deepseek_r1, "deepseek-r1-qwen");
      t.think_close_ = true;
      return t;
    }
    throw_invalid_argument(kFn, "name", std::string(name), "must be one of " + known_list());
  }
};

ChatTemplate ChatTemplate::from_jinja(std::string_view jinja) {
  LLMK_CHECK_ARG(!jinja.empty(), kFn, "template", "\"\"", "must not be empty");
  return ChatTemplateRecognizer::recognise(jinja);
}

ChatTemplate ChatTemplate::from_name(std::string_view name) { return ChatTemplateRecognizer::by_name(name); }

const std::vector<std::string>& ChatTemplate::names() {
  static const std::vector<std::string> n = {"chatml",       "qwen3",        "llama3",      "mistral-v0",
                                             "mistral-v0.1", "mistral-nemo", "phi3",        "gemma2",
                                             "gemma3",       "gemma",        "deepseek-r1", "deepseek-r1-qwen"};
  return n;
}

std::string ChatTemplate::render(std::span<const ChatMessage> ms, const ChatRenderOptions& o) const {
  LLMK_CHECK_ARG(!ms.empty(), kFn, "messages", "[]", "must hold at least one message");
  for (size_t i = 0; i < ms.size(); ++i)
    LLMK_CHECK_ARG(ms[i].role == "system" || ms[i].role == "user" || ms[i].role == "assistant", kFn,
                   "messages[" + std::to_string(i) + "].role", ms[i].role,
                   "must be \"system\", \"user\" or \"assistant\"");
  const bool has_system = ms[0].role == "system";
  const std::span<const ChatMessage> rest = has_system ? ms.subspan(1) : ms;
  std::string out;
  switch (family_) {
    case Family::chatml:
      if (!has_system && !default_system_.empty()) out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      for (const ChatMessage& m : ms) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (o.add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case Family::qwen3: {
      // Assistant turns after the last user query keep their reasoning in <think>; the final
      // one always gets a (possibly empty) <think> block.
      size_t last_query = ms.size() - 1;
      for (size_t i = ms.size(); i-- > 0;) {
        const std::string& c = ms[i].content;
        if (ms[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
          last_query = i;
          break;
        }
      }
      for (size_t i = 0; i < ms.size(); ++i) {
        const ChatMessage& m = ms[i];
        if (m.role != "assistant") {
          out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
          continue;
        }
        std::string_view content = m.content, reasoning;
        const size_t close = m.content.find("</think>");
        if (close != std::string::npos) {
          content = lstrip_nl(after_last(m.content, "</think>"));
          reasoning = lstrip_nl(after_last(rstrip_nl(std::string_view(m.content).substr(0, close)), "<think>"));
        }
        out += "<|im_start|>assistant\n";
        if (i > last_query && (i + 1 == ms.size() || !reasoning.empty()))
          out.append("<think>\n")
              .append(lstrip_nl(rstrip_nl(reasoning)))
              .append("\n</think>\n\n")
              .append(lstrip_nl(content));
        else out.append(content);
        out += "<|im_end|>\n";
      }
      if (o.add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    }
    case Family::llama3:
      out += o.bos_token +
             "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ";
      out += !fixed_date_.empty() ? fixed_date_ : !o.date.empty() ? o.date : today();
      out += "\n\n" + (has_system ? py_trim(ms[0].content) : std::string()) + "<|eot_id|>";
      for (const ChatMessage& m : rest)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + py_trim(m.content) + "<|eot_id|>";
      if (o.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case Family::mistral_v0:
      check_alternation(ms, "Conversation roles must alternate user/assistant/user/assistant/...");
      out += o.bos_token;
      for (const ChatMessage& m : ms) {
        if (m.role == "system") template_error("Only user and assistant roles are supported!");
        out += m.role == "user" ? "[INST] " + m.content + " [/INST]"
                                : m.content + o.eos_token + (eos_space_ ? " " : "");
      }
      break;
    case Family::mistral_nemo:
      check_alternation(rest,
                        "After the optional system message, conversation roles must alternate "
                        "user/assistant/user/assistant/...");
      out += o.bos_token;
      for (size_t i = 0; i < rest.size(); ++i) {
        if (rest[i].role == "user")
          out += "[INST]" + (i + 1 == rest.size() && has_system ? ms[0].content + "\n\n" : "") + rest[i].content +
                 "[/INST]";
        else if (rest[i].role == "assistant") out += rest[i].content + o.eos_token;
        else
          template_error(
              "Only user and assistant roles are supported, with the exception of an initial optional system message!");
      }
      break;
    case Family::phi3:
      for (const ChatMessage& m : ms) {
        if (m.role == "system" && m.content.empty()) continue;
        out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      }
      out += o.add_generation_prompt ? "<|assistant|>\n" : o.eos_token;
      break;
    case Family::gemma2:
    case Family::gemma3: {
      if (family_ == Family::gemma2 && has_system) template_error("System role not supported");
      const std::span<const ChatMessage> turns = family_ == Family::gemma3 ? rest : ms;
      check_alternation(turns, "Conversation roles must alternate user/assistant/user/assistant/...");
      out += o.bos_token;
      for (size_t i = 0; i < turns.size(); ++i) {
        out += "<start_of_turn>" + (turns[i].role == "assistant" ? std::string("model") : turns[i].role) + "\n";
        if (i == 0 && family_ == Family::gemma3 && has_system) out += ms[0].content + "\n\n";
        out += py_trim(turns[i].content) + "<end_of_turn>\n";
      }
      if (o.add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
    case Family::deepseek_r1: {
      std::string system;
      for (const ChatMessage& m : ms)
        if (m.role == "system") system = m.content;
      out += o.bos_token + system;
      for (const ChatMessage& m : ms) {
        if (m.role == "user") out += "<｜User｜>" + m.content;
        if (m.role == "assistant")
          out.append("<｜Assistant｜>").append(after_last(m.content, "</think>")).append("<｜end▁of▁sentence｜>");
      }
      if (o.add_generation_prompt)
        out += think_close_ ? "<｜Assistant｜><think>\n</think>" : "<｜Assistant｜><think>\n";
      break;
    }
  }
  return out;
}

ChatTemplate chat_template_of(const Tokenizer& tok, std::string_view name) {
  if (!name.empty()) return ChatTemplate::from_name(name);
  LLMK_CHECK_ARG(!tok.chat_template().empty(), kFn, "tokenizer.chat_template", "(absent)",
                 "the model has no chat template (a base model?); pass --chat-template NAME "
                 "(llmk.LLM(chat_template=NAME)) to use one, e.g. --chat-template gemma for a Gemma base model");
  return ChatTemplate::from_jinja(tok.chat_template());
}

ChatRenderOptions chat_render_options(const Tokenizer& tok, bool add_generation_prompt) {
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  if (tok.bos_id() >= 0) o.bos_token = tok.token_bytes(tok.bos_id());
  if (tok.eos_id() >= 0) o.eos_token = tok.token_bytes(tok.eos_id());
  return o;
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::string_view prompt) {
  const bool has_bos = tok.bos_id() >= 0 && prompt.starts_with(tok.token_bytes(tok.bos_id()));
  return tok.encode(prompt, true, tok.add_bos() && !has_bos);
}

}  // namespace llmk
