// The structured-output fields of an OpenAI-style request body (`llmk serve`, docs/structured_output.md):
//   response_format {"type": "text"} | {"type": "json_object"} |
//                   {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   and, as vLLM and llama.cpp's server name them: guided_json, guided_regex, guided_choice (vLLM),
//   json_schema, grammar (GBNF; llama.cpp's server).
// At most one of them per request. Any other structured-output field (guided_grammar: Lark, not GBNF;
// structural_tag, ...) or type is an error naming the field and its value, never ignored.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "llmk/constraint.hpp"
#include "llmk/tool_calls.hpp"

namespace llmk {
class Tokenizer;
}

namespace llmk::cli {

// Thrown for a structured-output field the server refuses: `param` is the field's path
// (e.g. "response_format.json_schema.schema"), `message` says why and shows the value.
struct StructuredRequestError {
  std::string param, message;
};

// The constraint the request asks for (null: none). Compiled grammars are cached by their text, and the
// tokenizer's trie is built once; safe to call from any thread.
std::shared_ptr<const Constraint> structured_output(const nlohmann::json& body, const Tokenizer& tok);

// The constraint of a forced tool_choice ("required" or a named function): the reply is one or more
// calls (exactly one when !parallel) in the template's tool-call format, each naming one of
// `forced_tools` (ChatReplyOptions::forced_tools) with arguments of its `parameters` schema; with
// `reasoning` (the reply's <think> block is split off), after an optional <think>...</think> block.
// StructuredRequestError for a format llmk cannot force or a schema it cannot compile.
std::shared_ptr<const Constraint> tool_call_output(ToolFormat format, const std::string& forced_tools, bool parallel,
                                                   bool reasoning, const Tokenizer& tok);

}  // namespace llmk::cli
