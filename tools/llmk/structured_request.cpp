#include "structured_request.hpp"

#include <mutex>

#include "llmk/grammar.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk::cli {
namespace {

using json = nlohmann::json;

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// Structured-output fields of other servers that llmk does not take.
constexpr const char* kRefused[] = {
    "guided_grammar", "guided_decoding_backend", "guided_whitespace_pattern", "regex", "choice",
    "ebnf",           "structural_tag",          "structured_outputs"};

struct Shared {
  std::mutex m;
  const Tokenizer* tok = nullptr;
  std::shared_ptr<const TokenVocab> vocab;
  GrammarCache cache;
};

Shared& shared() {
  static Shared s;
  return s;
}

std::shared_ptr<const TokenVocab> vocab_of(Shared& s, const Tokenizer& tok) {
  std::lock_guard<std::mutex> lk(s.m);
  if (s.tok != &tok) {
    s.vocab = TokenVocab::of(tok);
    s.tok = &tok;
  }
  return s.vocab;
}

std::string schema_text(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();  // a schema given as JSON text
  if (!v.is_object() && !v.is_boolean())
    throw StructuredRequestError{param, "must be a JSON Schema object, got " + shown(v)};
  return v.dump();
}

}  // namespace

std::shared_ptr<const Constraint> structured_output(const json& body, const Tokenizer& tok) {
  for (const char* f : kRefused) {
    auto it = body.find(f);
    if (it != body.end() && !it->is_null())
      throw StructuredRequestError{f,
                                   "is not supported (response_format, guided_json, guided_regex, guided_choice, "
                                   "json_schema and grammar are), got " +
                                       shown(*it)};
  }
  // (param, kind, text) of the one structured-output request.
  std::string param, kind, text;
  auto take = [&](const std::string& p, const std::string& k, const std::string& t) {
    if (!param.empty())
      throw StructuredRequestError{p,
                                   "cannot be combined with " + param + " (one structured-output field per request)"};
    param = p;
    kind = k;
    text = t;
  };
  auto field = [&](const char* name) -> const json* {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  if (const json* rf = field("response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      throw StructuredRequestError{"response_format", "must be an object with a string \"type\", got " + shown(*rf)};
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      take("response_format", "json_object", "");
    } else if (type == "json_schema") {
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object())
        throw StructuredRequestError{"response_format.json_schema",
                                     "must be an object {\"name\", \"schema\", \"strict\"}, got " +
                                         (js == rf->end() ? std::string("none") : shown(*js))};
      auto name = js->find("name");
      if (name == js->end() || !name->is_string() || name->get<std::string>().empty() ||
          name->get<std::string>().size() > 64 ||
          name->get<std::string>().find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos)
        throw StructuredRequestError{"response_format.json_schema.name",
                                     "must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-', got " +
                                         (name == js->end() ? std::string("none") : shown(*name))};
      auto strict = js->find("strict");
      if (strict != js->end() && !strict->is_null() && !strict->is_boolean())
        throw StructuredRequestError{"response_format.json_schema.strict",
                                     "must be true or false, got " + shown(*strict)};
      auto schema = js->find("schema");
      // OpenAI's default schema is an empty one: any JSON value.
      const std::string t = schema == js->end() || schema->is_null()
                                ? std::string("{}")
                                : schema_text(*schema, "response_format.json_schema.schema");
      take("response_format.json_schema.schema", "json_schema", t);
    } else if (type != "text") {
      throw StructuredRequestError{"response_format.type",
                                   "\"" + type + "\" is not supported (\"text\", \"json_object\" or \"json_schema\")"};
    }
  }
  if (const json* v = field("guided_json")) take("guided_json", "json_schema", schema_text(*v, "guided_json"));
  if (const json* v = field("json_schema")) take("json_schema", "json_schema", schema_text(*v, "json_schema"));
  if (const json* v = field("guided_regex")) {
    if (!v->is_string()) throw StructuredRequestError{"guided_regex", "must be a string, got " + shown(*v)};
    take("guided_regex", "regex", v->get<std::string>());
  }
  if (const json* v = field("grammar")) {
    if (!v->is_string()) throw StructuredRequestError{"grammar", "must be a GBNF string, got " + shown(*v)};
    take("grammar", "gbnf", v->get<std::string>());
  }
  std::vector<std::string> choices;
  if (const json* v = field("guided_choice")) {
    if (!v->is_array() || v->empty())
      throw StructuredRequestError{"guided_choice", "must be a non-empty list of strings, got " + shown(*v)};
    for (const json& c : *v) {
      if (!c.is_string()) throw StructuredRequestError{"guided_choice", "must hold strings only, got " + shown(c)};
      choices.push_back(c.get<std::string>());
    }
    take("guided_choice", "choice", v->dump());
  }
  if (param.empty()) return nullptr;
  std::shared_ptr<const Grammar> g;
  try {
    g = shared().cache.get(kind, text, [&] {
      if (kind == "json_object") return grammar_json_object();
      if (kind == "json_schema") return grammar_from_json_schema(text);
      if (kind == "regex") return grammar_from_regex(text);
      if (kind == "gbnf") return grammar_from_gbnf(text);
      return grammar_from_choice(choices);
    });
  } catch (const GrammarError& e) {
    throw StructuredRequestError{param, e.what()};
  }
  return std::make_shared<GrammarConstraint>(g, vocab_of(shared(), tok));
}

std::shared_ptr<const Constraint> tool_call_output(ToolFormat format, const std::string& forced_tools, bool parallel,
                                                   bool reasoning, const Tokenizer& tok) {
  // How each format writes its calls, as its templates do (the parser: src/chat/tool_calls.cpp). A
  // marker that the vocabulary holds as a control token is written as text, which parses the same.
  ToolCallSyntax syn;
  switch (format) {
    case ToolFormat::hermes:
      syn = {"", "<tool_call>\n{\"name\": ", ", \"arguments\": ", "}\n</tool_call>", "\n", ""};
      break;
    case ToolFormat::llama3: syn = {"", "{\"name\": ", ", \"parameters\": ", "}", ";", ""}; break;
    case ToolFormat::mistral: syn = {"[TOOL_CALLS][", "{\"name\": ", ", \"arguments\": ", "}", ", ", "]"}; break;
    case ToolFormat::deepseek_r1:
      syn = {"<｜tool▁calls▁begin｜>",
             "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
             "\n```json\n",
             "\n```<｜tool▁call▁end｜>",
             "\n",
             "<｜tool▁calls▁end｜>"};
      syn.name_json = false;
      break;
    default: throw StructuredRequestError{"tool_choice", "needs a tool-call format (--tool-parser NAME)"};
  }
  syn.reasoning = reasoning;
  using ojson = nlohmann::ordered_json;  // properties keep their order
  const ojson forced = ojson::parse(forced_tools);
  std::vector<ToolSchema> tools;
  for (const ojson& t : forced) {
    ToolSchema s{t["name"].get<std::string>(), t["parameters"].is_null() ? std::string() : t["parameters"].dump()};
    const std::string param = "tools[" + std::to_string(t["index"].get<size_t>()) + "].function.parameters";
    if (!t["parameters"].is_null() && !t["parameters"].is_object())
      throw StructuredRequestError{param, "must be a JSON Schema object, got " + shown(json(t["parameters"]))};
    try {  // each schema on its own first, so that an error names its tool
      if (!s.parameters.empty())
        shared().cache.get("json_schema", s.parameters, [&] { return grammar_from_json_schema(s.parameters); });
    } catch (const GrammarError& e) {
      throw StructuredRequestError{param, e.what()};
    }
    tools.push_back(std::move(s));
  }
  const std::string key = std::string(tool_format_name(format)) + (parallel ? " parallel" : " one") +
                          (reasoning ? " reasoning " : " ") + forced_tools;
  std::shared_ptr<const Grammar> g;
  try {
    g = shared().cache.get("tool_calls", key, [&] { return grammar_for_tool_calls(tools, syn, 1, parallel ? -1 : 1); });
  } catch (const GrammarError& e) {
    throw StructuredRequestError{"tools", e.what()};
  }
  return std::make_shared<GrammarConstraint>(g, vocab_of(shared(), tok));
}

}  // namespace llmk::cli
