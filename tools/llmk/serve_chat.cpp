// Chat requests of `llmk serve` (serve_chat.hpp).
#include "serve_chat.hpp"

#include <algorithm>
#include <cstdlib>

#include "llmk/error.hpp"

namespace llmk::serve {

namespace {

using ojson = nlohmann::ordered_json;

std::string shown(const ojson& v) {
  std::string s = v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ChatRequestError{param, message}; }

// A message as the template gets it: content text parts joined, tool-call arguments given as a
// JSON string parsed into an object (the form chat templates expect), developer -> system.
ojson message_for_template(const ojson& m, size_t i) {
  const std::string at = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) bad(at, "must be an object, got " + shown(m));
  const ojson* role = m.contains("role") ? &m["role"] : nullptr;
  static const char* const roles[] = {"system", "developer", "user", "assistant", "tool"};
  if (!role || !role->is_string() ||
      std::none_of(std::begin(roles), std::end(roles), [&](const char* r) { return *role == r; }))
    bad(at + ".role", "must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\", got " +
                          (role ? shown(*role) : "none"));
  ojson out = m;
  if (*role == "developer") out["role"] = "system";
  const ojson* content = m.contains("content") ? &m["content"] : nullptr;
  const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
  if (content && content->is_array()) {  // text parts
    std::string text;
    for (const ojson& part : *content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        bad(at + ".content", "parts must be {\"type\": \"text\", \"text\": STRING}, got " + shown(part));
      text += part["text"].get<std::string>();
    }
    out["content"] = text;
  } else if (content && !content->is_string() && !(content->is_null() && *role == "assistant")) {
    bad(at + ".content", "must be a string, got " + shown(*content));
  } else if (!content && !(*role == "assistant" && has_calls)) {
    bad(at + ".content", "is required");
  }
  if (has_calls) {
    const ojson& calls = m["tool_calls"];
    if (*role != "assistant" || !calls.is_array()) bad(at + ".tool_calls", "must be an array on an assistant message");
    for (size_t k = 0; k < calls.size(); ++k) {
      const std::string ck = at + ".tool_calls[" + std::to_string(k) + "]";
      const ojson& c = calls[k];
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
          !c["function"]["name"].is_string())
        bad(ck, "must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}, got " + shown(c));
      const ojson* args = c["function"].contains("arguments") ? &c["function"]["arguments"] : nullptr;
      if (args && args->is_string()) {
        ojson parsed = ojson::parse(args->get<std::string>(), nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object())
          bad(ck + ".function.arguments", "must be a JSON object (as a string), got " + shown(*args));
        out["tool_calls"][k]["function"]["arguments"] = parsed;
      }
    }
  }
  if (*role == "tool" && m.contains("tool_call_id") && !m["tool_call_id"].is_string())
    bad(at + ".tool_call_id", "must be a string, got " + shown(m["tool_call_id"]));
  return out;
}

nlohmann::json call_json(const ToolCall& c, const std::string& id) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

ParsedReply parse(const std::string& text, const ChatReplyOptions& o) {
  // Test-only: LLMK_TEST_FORCED_REPLY replaces what the model wrote, so the parsing and the
  // deltas can be checked end to end on a random-weight model (python/tests/test_server_tools.py).
  static const char* forced = std::getenv("LLMK_TEST_FORCED_REPLY");
  ParsedReply r = parse_reply(forced ? std::string(forced) : text, o.parse_tools ? o.format : ToolFormat::none,
                              o.split_reasoning);
  if (!o.parallel && r.calls.size() > 1) r.calls.resize(1);
  return r;
}

std::string finish_of(const ParsedReply& r, const std::string& engine_finish) {
  if (!r.calls.empty()) return "tool_calls";
  if (r.malformed) return "stop";
  return engine_finish;
}

}  // namespace

std::string render_chat_request(const std::string& raw, const ChatTemplate& tpl, const ChatRenderOptions& base,
                                const ChatConfig& cfg, ChatReplyOptions* reply) {
  const ojson body = ojson::parse(raw, nullptr, false);  // already checked by the caller
  if (!body.is_object()) bad("", "the body must be a JSON object");
  const ojson* msgs = body.contains("messages") ? &body["messages"] : nullptr;
  if (!msgs) bad("messages", "is required");
  if (!msgs->is_array() || msgs->empty()) bad("messages", "must be a non-empty list, got " + shown(*msgs));
  ojson ms = ojson::array();
  for (size_t i = 0; i < msgs->size(); ++i) ms.emplace_back(message_for_template((*msgs)[i], i));

  ChatRenderOptions o = base;
  *reply = ChatReplyOptions{};
  // reasoning is split for templates that know <think> (Qwen3, DeepSeek R1, QwQ ...)
  reply->split_reasoning = cfg.split_reasoning && tpl.source().find("<think>") != std::string::npos;
  const ojson* tools = body.contains("tools") && !body["tools"].is_null() ? &body["tools"] : nullptr;
  std::string choice = "auto", forced_name;  // choice: none, auto, required or function
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const ojson& tc = body["tool_choice"];
    if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") && tc["function"].is_object() &&
        tc["function"].contains("name") && tc["function"]["name"].is_string()) {
      choice = "function";
      forced_name = tc["function"]["name"].get<std::string>();
    } else if (tc.is_string() && (tc == "none" || tc == "auto" || tc == "required")) {
      choice = tc.get<std::string>();
    } else {
      bad("tool_choice",
          "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": "
          "NAME}}, got " +
              shown(tc));
    }
    if ((choice == "required" || choice == "function") && (!tools || !tools->is_array() || tools->empty()))
      bad("tool_choice", shown(tc) + " needs a non-empty tools list");
  }
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) bad("parallel_tool_calls", "must be a boolean");
    reply->parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (tools && !tools->empty()) {
    if (!tools->is_array()) bad("tools", "must be an array, got " + shown(*tools));
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string())
        bad("tools[" + std::to_string(i) + "]",
            "must be {\"type\": \"function\", \"function\": {\"name\": STRING, ...}}, got " + shown(t));
    }
    if (choice != "none") {
      reply->format = cfg.tool_format != ToolFormat::none ? cfg.tool_format : detect_tool_format(tpl.source());
      if (reply->format == ToolFormat::none)
        bad("tools",
            "the model's chat template writes no tool-call format llmk parses; start the server with "
            "--tool-parser NAME");
      reply->parse_tools = true;
      o.tools_json = tools->dump();
      if (choice == "required" || choice == "function") {
        ojson forced = ojson::array();
        for (size_t i = 0; i < tools->size(); ++i) {
          const ojson& f = (*tools)[i]["function"];
          if (choice == "function" && f["name"] != forced_name) continue;
          forced.push_back({{"index", i},
                            {"name", f["name"]},
                            {"parameters", f.contains("parameters") ? f["parameters"] : ojson()}});
        }
        if (forced.empty()) bad("tool_choice.function.name", "\"" + forced_name + "\" is not one of the tools");
        reply->forced_tools = forced.dump();
      }
    }
  }
  ojson kwargs = ojson::object();
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) bad("chat_template_kwargs", "must be an object");
    kwargs = body["chat_template_kwargs"];
  }
  if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) {
    if (!body["reasoning_effort"].is_string()) bad("reasoning_effort", "must be a string");
    kwargs["reasoning_effort"] = body["reasoning_effort"];
  }
  for (const char* reserved : {"messages", "tools", "bos_token", "eos_token", "add_generation_prompt"})
    if (kwargs.contains(reserved)) bad("chat_template_kwargs", std::string("must not set '") + reserved + "'");
  if (!kwargs.empty()) o.kwargs_json = kwargs.dump();
  try {
    return tpl.render_json(ms.dump(), o);
  } catch (const InvalidArgument& e) {  // the template refuses the conversation
    bad("messages", e.what());
  }
}

nlohmann::json reply_message(const std::string& text, const ChatReplyOptions& o, const std::string& engine_finish,
                             const std::string& id_base, std::string* finish_reason) {
  const ParsedReply r = parse(text, o);
  *finish_reason = finish_of(r, engine_finish);
  nlohmann::json m = {{"role", "assistant"}};
  m["content"] = r.calls.empty() || !r.content.empty() ? nlohmann::json(r.content) : nlohmann::json(nullptr);
  if (!r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.calls.empty()) {
    m["tool_calls"] = nlohmann::json::array();
    for (size_t k = 0; k < r.calls.size(); ++k)
      m["tool_calls"].push_back(call_json(r.calls[k], "call_" + id_base + "_" + std::to_string(k)));
  }
  return m;
}

std::vector<nlohmann::json> reply_deltas(const std::string& text, const ChatReplyOptions& o,
                                         const std::string& engine_finish, const std::string& id_base,
                                         std::string* finish_reason) {
  const ParsedReply r = parse(text, o);
  *finish_reason = finish_of(r, engine_finish);
  std::vector<nlohmann::json> out;
  if (!r.reasoning.empty()) out.push_back({{"reasoning_content", r.reasoning}});
  if (!r.content.empty()) out.push_back({{"content", r.content}});
  for (size_t k = 0; k < r.calls.size(); ++k) {
    nlohmann::json c = call_json(r.calls[k], "call_" + id_base + "_" + std::to_string(k));
    c["index"] = k;
    out.push_back({{"tool_calls", nlohmann::json::array({c})}});
  }
  return out;
}

}  // namespace llmk::serve
