// Tool-call and reasoning parsing (include/llmk/tool_calls.hpp).
#include "llmk/tool_calls.hpp"

#include <nlohmann/json.hpp>

#include "llmk/error.hpp"

namespace llmk {

namespace {

using json = nlohmann::ordered_json;

struct Named {
  ToolFormat f;
  const char* name;
};
constexpr Named kFormats[] = {{ToolFormat::none, "none"},
                              {ToolFormat::hermes, "hermes"},
                              {ToolFormat::llama3, "llama3"},
                              {ToolFormat::mistral, "mistral"},
                              {ToolFormat::deepseek_r1, "deepseek-r1"}};

constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallBegin = "<｜tool▁call▁begin｜>",
                           kDsSep = "<｜tool▁sep｜>", kDsCallEnd = "<｜tool▁call▁end｜>",
                           kDsCallsEnd = "<｜tool▁calls▁end｜>";

std::string_view trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// A JSON value parsed from s, or nullopt-like discarded json.
bool parse_json(std::string_view s, json* out) {
  *out = json::parse(s, nullptr, false);
  return !out->is_discarded();
}

// {"name": N, "arguments" | "parameters": {...}} -> a call; false when it is not one.
bool call_of(const json& j, ToolCall* c) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const json* args = j.contains("arguments") ? &j["arguments"] : j.contains("parameters") ? &j["parameters"] : nullptr;
  json a = args ? *args : json::object();
  if (a.is_string()) {  // arguments given as a JSON string
    json inner;
    if (!parse_json(a.get<std::string>(), &inner)) return false;
    a = inner;
  }
  if (!a.is_object()) return false;
  c->name = j["name"].get<std::string>();
  c->arguments = a.dump();
  return true;
}

void parse_hermes(std::string_view text, ParsedReply& r) {
  constexpr std::string_view open = "<tool_call>", close = "</tool_call>";
  const size_t first = text.find(open);
  if (first == std::string_view::npos) {
    r.content = std::string(text);
    return;
  }
  r.content = std::string(trim(text.substr(0, first)));
  size_t at = first;
  while (at != std::string_view::npos) {
    const size_t body = at + open.size();
    const size_t end = text.find(close, body);
    json j;
    ToolCall c;
    if (end == std::string_view::npos || !parse_json(trim(text.substr(body, end - body)), &j) || !call_of(j, &c)) {
      r.malformed = true;
      return;
    }
    r.calls.push_back(std::move(c));
    const std::string_view rest = trim(text.substr(end + close.size()));
    if (rest.empty()) return;
    if (!rest.starts_with(open)) {  // text after the calls
      r.malformed = true;
      return;
    }
    at = text.find(open, end);
  }
}

void parse_llama3(std::string_view text, ParsedReply& r) {
  std::string_view t = trim(text);
  const bool tagged = t.starts_with("<|python_tag|>");
  if (tagged) t = trim(t.substr(std::string_view("<|python_tag|>").size()));
  if (!t.starts_with("{")) {
    if (tagged) r.malformed = true;
    else r.content = std::string(text);
    return;
  }
  size_t a = 0;
  while (a < t.size()) {
    // the objects are separated by ';' outside strings: parse the longest JSON prefix
    size_t end = t.size();
    json j;
    bool ok = false;
    for (size_t e = t.find(';', a); e != std::string_view::npos; e = t.find(';', e + 1))
      if (parse_json(trim(t.substr(a, e - a)), &j)) {
        end = e;
        ok = true;
        break;
      }
    if (!ok) ok = parse_json(trim(t.substr(a)), &j);
    ToolCall c;
    if (!ok || !call_of(j, &c)) {
      r.calls.clear();
      r.malformed = true;
      return;
    }
    r.calls.push_back(std::move(c));
    a = end + 1;
  }
}

void parse_mistral(std::string_view text, ParsedReply& r) {
  constexpr std::string_view tag = "[TOOL_CALLS]", args_tag = "[ARGS]";
  const size_t first = text.find(tag);
  if (first == std::string_view::npos) {
    r.content = std::string(text);
    return;
  }
  r.content = std::string(trim(text.substr(0, first)));
  std::string_view rest = trim(text.substr(first + tag.size()));
  if (rest.starts_with("[")) {  // [TOOL_CALLS][{...}, ...]
    json j;
    if (!parse_json(rest, &j) || !j.is_array() || j.empty()) {
      r.malformed = true;
      return;
    }
    for (const json& e : j) {
      ToolCall c;
      if (!call_of(e, &c)) {
        r.calls.clear();
        r.malformed = true;
        return;
      }
      r.calls.push_back(std::move(c));
    }
    return;
  }
  // [TOOL_CALLS]name[ARGS]{...}[TOOL_CALLS]name[ARGS]{...}
  for (;;) {
    const size_t at = rest.find(args_tag);
    if (at == std::string_view::npos) {
      r.calls.clear();
      r.malformed = true;
      return;
    }
    const std::string name(trim(rest.substr(0, at)));
    std::string_view after = rest.substr(at + args_tag.size());
    const size_t next = after.find(tag);
    json j;
    ToolCall c;
    if (name.empty() || !parse_json(trim(after.substr(0, next)), &j) ||
        !call_of(json{{"name", name}, {"arguments", j}}, &c)) {
      r.calls.clear();
      r.malformed = true;
      return;
    }
    r.calls.push_back(std::move(c));
    if (next == std::string_view::npos) return;
    rest = trim(after.substr(next + tag.size()));
  }
}

void parse_deepseek(std::string_view text, ParsedReply& r) {
  const size_t first = text.find(kDsCallsBegin);
  if (first == std::string_view::npos) {
    r.content = std::string(text);
    return;
  }
  r.content = std::string(trim(text.substr(0, first)));
  std::string_view rest = text.substr(first + kDsCallsBegin.size());
  for (;;) {
    rest = trim(rest);
    if (rest.starts_with(kDsCallsEnd) && !r.calls.empty()) return;
    const size_t end = rest.find(kDsCallEnd);
    if (!rest.starts_with(kDsCallBegin) || end == std::string_view::npos) break;
    std::string_view call = rest.substr(kDsCallBegin.size(), end - kDsCallBegin.size());
    rest = rest.substr(end + kDsCallEnd.size());
    const size_t sep = call.find(kDsSep);
    if (sep == std::string_view::npos) break;
    call = call.substr(sep + kDsSep.size());
    const size_t nl = call.find('\n');
    if (nl == std::string_view::npos) break;
    const std::string name(trim(call.substr(0, nl)));
    std::string_view body = trim(call.substr(nl + 1));
    if (body.starts_with("```json")) body = body.substr(7);
    else if (body.starts_with("```")) body = body.substr(3);
    if (body.ends_with("```")) body = body.substr(0, body.size() - 3);
    json j;
    ToolCall c;
    if (name.empty() || !parse_json(trim(body), &j) || !call_of(json{{"name", name}, {"arguments", j}}, &c)) break;
    r.calls.push_back(std::move(c));
  }
  r.calls.clear();
  r.malformed = true;
}

}  // namespace

const std::vector<std::string>& tool_format_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const Named& f : kFormats) v.push_back(f.name);
    return v;
  }();
  return n;
}

ToolFormat tool_format_from_name(std::string_view name) {
  for (const Named& f : kFormats)
    if (name == f.name) return f.f;
  std::string list;
  for (const Named& f : kFormats) list += (list.empty() ? "" : ", ") + std::string(f.name);
  throw_invalid_argument("llmk::tool_format_from_name", "name", std::string(name), "must be one of " + list);
}

std::string_view tool_format_name(ToolFormat f) {
  for (const Named& n : kFormats)
    if (n.f == f) return n.name;
  return "none";
}

ToolFormat detect_tool_format(std::string_view src) {
  if (src.find("<tool_call>") != std::string_view::npos) return ToolFormat::hermes;
  if (src.find(kDsCallsBegin) != std::string_view::npos) return ToolFormat::deepseek_r1;
  if (src.find("[TOOL_CALLS]") != std::string_view::npos) return ToolFormat::mistral;
  if (src.find("<|python_tag|>") != std::string_view::npos ||
      (src.find("<|start_header_id|>") != std::string_view::npos &&
       src.find("\"parameters\"") != std::string_view::npos))
    return ToolFormat::llama3;
  return ToolFormat::none;
}

ParsedReply parse_reply(std::string_view text, ToolFormat format, bool split_reasoning) {
  ParsedReply r;
  std::string_view rest = text;
  if (split_reasoning) {
    constexpr std::string_view open = "<think>", close = "</think>";
    std::string_view t = rest;
    const size_t lead = t.find_first_not_of(" \t\r\n");
    const bool opens = lead != std::string_view::npos && t.substr(lead).starts_with(open);
    const size_t end = t.find(close);
    if (opens || end != std::string_view::npos) {
      const size_t start = opens ? lead + open.size() : 0;
      if (end == std::string_view::npos || end < start) {
        r.reasoning = std::string(trim(t.substr(start)));
        return r;
      }
      r.reasoning = std::string(trim(t.substr(start, end - start)));
      rest = t.substr(end + close.size());
      const size_t a = rest.find_first_not_of(" \t\r\n");
      rest = a == std::string_view::npos ? std::string_view() : rest.substr(a);
    }
  }
  switch (format) {
    case ToolFormat::none: r.content = std::string(rest); break;
    case ToolFormat::hermes: parse_hermes(rest, r); break;
    case ToolFormat::llama3: parse_llama3(rest, r); break;
    case ToolFormat::mistral: parse_mistral(rest, r); break;
    case ToolFormat::deepseek_r1: parse_deepseek(rest, r); break;
  }
  if (r.malformed) {
    r.calls.clear();
    r.content = std::string(rest);
  }
  return r;
}

}  // namespace llmk
