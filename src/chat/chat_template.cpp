// Chat templates rendered by the Jinja interpreter (include/llmk/chat_template.hpp): the
// context Jinja2ChatFormatter passes, built as JSON, and the built-in templates.
#include "llmk/chat_template.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "llmk/error.hpp"

namespace llmk {

namespace {

constexpr const char* kFn = "llmk::chat_template";

// llama-cpp-python's CHATML_CHAT_TEMPLATE.
constexpr const char* kChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Gemma 3 instruct (google/gemma-3-*-it tokenizer_config.json).
constexpr const char* kGemma3 = R"JINJA({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)JINJA";

struct Builtin {
  const char* name;
  const char* source;
};
constexpr Builtin kBuiltins[] = {{"chatml", kChatml}, {"gemma3", kGemma3}, {"gemma", kGemma3}};

nlohmann::ordered_json parse_json(std::string_view text, const char* arg) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid_argument(kFn, arg, std::string(text.substr(0, 80)), std::string("must be JSON: ") + e.what());
  }
}

std::string render_with(const jinja::Template& t, nlohmann::ordered_json messages, const ChatRenderOptions& o) {
  LLMK_CHECK_ARG(messages.is_array() && !messages.empty(), kFn, "messages", messages.dump().substr(0, 80),
                 "must be a non-empty array of messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    LLMK_CHECK_ARG(m.is_object(), kFn, at, m.dump().substr(0, 80), "must be an object");
    LLMK_CHECK_ARG(m.contains("role") && m["role"].is_string(), kFn, at + ".role",
                   m.value("role", nlohmann::ordered_json()).dump(), "must be a string");
  }
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = std::move(messages);
  ctx["eos_token"] = o.eos_token;
  ctx["bos_token"] = o.bos_token;
  ctx["add_generation_prompt"] = o.add_generation_prompt;
  ctx["functions"] = nullptr;
  ctx["function_call"] = nullptr;
  ctx["tools"] = o.tools_json.empty() ? nlohmann::ordered_json() : parse_json(o.tools_json, "tools");
  ctx["tool_choice"] = nullptr;
  if (!o.kwargs_json.empty()) {
    auto kw = parse_json(o.kwargs_json, "kwargs");
    LLMK_CHECK_ARG(kw.is_object(), kFn, "kwargs", o.kwargs_json.substr(0, 80), "must be a JSON object");
    for (auto& [k, v] : kw.items()) ctx[k] = v;
  }
  std::string ctx_text;
  try {
    ctx_text = ctx.dump();
  } catch (const nlohmann::json::exception&) {  // a string that is not UTF-8
    throw_invalid_argument(kFn, "messages", "(a message, bos_token or eos_token)", "must be valid UTF-8");
  }
  jinja::RenderOptions ro;
  ro.now = o.now;
  return t.render(ctx_text, ro);
}

}  // namespace

ChatTemplate ChatTemplate::from_jinja(std::string_view jinja, std::string name) {
  LLMK_CHECK_ARG(!jinja.empty(), kFn, "template", "\"\"", "must not be empty");
  return ChatTemplate(std::make_shared<const jinja::Template>(jinja::Template::parse(jinja)), std::move(name),
                      std::string(jinja));
}

std::string_view ChatTemplate::builtin_source(std::string_view name) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return b.source;
  return "";
}

const std::vector<std::string>& ChatTemplate::names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const Builtin& b : kBuiltins) v.push_back(b.name);
    return v;
  }();
  return n;
}

ChatTemplate ChatTemplate::from_name(std::string_view name) {
  const std::string_view src = builtin_source(name);
  if (src.empty()) {
    std::ifstream f{std::string(name)};
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      return from_jinja(ss.str(), std::string(name));
    }
    std::string list;
    for (const std::string& n : names()) list += (list.empty() ? "" : ", ") + n;
    throw_invalid_argument(kFn, "name", std::string(name), "must be one of " + list + " or a Jinja template file");
  }
  return from_jinja(src, std::string(name));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const {
  nlohmann::ordered_json ms = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) ms.push_back({{"role", m.role}, {"content", m.content}});
  return render_with(*tpl_, std::move(ms), options);
}

std::string ChatTemplate::render_json(std::string_view messages_json, const ChatRenderOptions& options) const {
  return render_with(*tpl_, parse_json(messages_json, "messages"), options);
}

ChatTemplate chat_template_of(const Tokenizer& tok, std::string_view name) {
  if (!name.empty()) return ChatTemplate::from_name(name);
  LLMK_CHECK_ARG(!tok.chat_template().empty(), kFn, "tokenizer.chat_template", "(absent)",
                 "the model has no chat template (a base model?); pass --chat-template NAME or FILE "
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
