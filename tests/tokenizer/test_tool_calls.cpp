// Tool-call and reasoning parsing (llmk/tool_calls.hpp) on replies written from each format's
// published description: Hermes / Qwen <tool_call>, Llama 3.1 JSON tool calls and
// <|python_tag|>, Mistral [TOOL_CALLS] (v3 JSON list and the [ARGS] form), DeepSeek R1's tool
// tags; with malformed and truncated calls, which must come back as content.
#include <gtest/gtest.h>

#include "llmk/error.hpp"
#include "llmk/tool_calls.hpp"

namespace llmk {
namespace {

void expect_calls(const ParsedReply& r, const std::vector<std::pair<std::string, std::string>>& want,
                  const std::string& content = "") {
  EXPECT_FALSE(r.malformed);
  EXPECT_EQ(r.content, content);
  ASSERT_EQ(r.calls.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r.calls[i].name, want[i].first);
    EXPECT_EQ(r.calls[i].arguments, want[i].second);
  }
}

void expect_malformed(std::string_view text, ToolFormat f) {
  const ParsedReply r = parse_reply(text, f, false);
  EXPECT_TRUE(r.malformed) << text;
  EXPECT_TRUE(r.calls.empty()) << text;
  EXPECT_EQ(r.content, text);
}

TEST(ToolCalls, Hermes) {
  expect_calls(parse_reply("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                           "\"Paris\"}}\n</tool_call>",
                           ToolFormat::hermes, false),
               {{"get_weather", R"({"city":"Paris"})"}});
  expect_calls(parse_reply("Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                           "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>",
                           ToolFormat::hermes, false),
               {{"a", "{}"}, {"b", R"({"x":1})"}}, "Let me check.");
  expect_calls(parse_reply("no call here", ToolFormat::hermes, false), {}, "no call here");
  expect_malformed("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}", ToolFormat::hermes);  // truncated
  expect_malformed("<tool_call>\n{\"name\": \"a\", \"arguments\": {x: 1}}\n</tool_call>", ToolFormat::hermes);
  expect_malformed("<tool_call>\n{\"arguments\": {}}\n</tool_call>", ToolFormat::hermes);  // no name
}

TEST(ToolCalls, Llama3) {
  expect_calls(parse_reply("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", ToolFormat::llama3,
                           false),
               {{"get_weather", R"({"city":"Oslo"})"}});
  expect_calls(parse_reply("<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x;y\"}}; {\"name\": \"b\", "
                           "\"parameters\": {}}",
                           ToolFormat::llama3, false),
               {{"a", R"({"s":"x;y"})"}, {"b", "{}"}});
  expect_calls(parse_reply("The weather is fine.", ToolFormat::llama3, false), {}, "The weather is fine.");
  expect_malformed("{\"name\": \"get_weather\", \"parameters\": {\"city\": ", ToolFormat::llama3);
  expect_malformed("<|python_tag|>brave_search.call(query=\"x\")", ToolFormat::llama3);
}

TEST(ToolCalls, Mistral) {
  expect_calls(parse_reply("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", "
                           "\"arguments\": {}}]",
                           ToolFormat::mistral, false),
               {{"a", R"({"x":1})"}, {"b", "{}"}});
  expect_calls(parse_reply("[TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[ARGS]{}", ToolFormat::mistral, false),
               {{"a", R"({"x":1})"}, {"b", "{}"}});
  expect_malformed("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}", ToolFormat::mistral);
  expect_malformed("[TOOL_CALLS]a{\"x\": 1}", ToolFormat::mistral);
}

TEST(ToolCalls, DeepSeekR1) {
  const std::string call =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  expect_calls(parse_reply(call, ToolFormat::deepseek_r1, false), {{"get_weather", R"({"city":"Paris"})"}});
  const ParsedReply r = parse_reply("<think>\nneed weather\n</think>\n\n" + call, ToolFormat::deepseek_r1, true);
  EXPECT_EQ(r.reasoning, "need weather");
  expect_calls(r, {{"get_weather", R"({"city":"Paris"})"}});
  expect_malformed(call.substr(0, call.size() - 40), ToolFormat::deepseek_r1);  // truncated
}

TEST(ToolCalls, Reasoning) {
  ParsedReply r = parse_reply("<think>\nx = 1\n</think>\n\nThe answer is 1.", ToolFormat::none, true);
  EXPECT_EQ(r.reasoning, "x = 1");
  EXPECT_EQ(r.content, "The answer is 1.");
  r = parse_reply("reasoning after a prompt that opened <think>\n</think>\nanswer", ToolFormat::none, true);
  EXPECT_EQ(r.reasoning, "reasoning after a prompt that opened <think>");
  EXPECT_EQ(r.content, "answer");
  r = parse_reply("<think>\nstill thinking", ToolFormat::none, true);  // truncated: all reasoning
  EXPECT_EQ(r.reasoning, "still thinking");
  EXPECT_EQ(r.content, "");
  r = parse_reply("<think>x</think>y", ToolFormat::none, false);  // --reasoning-format none
  EXPECT_EQ(r.content, "<think>x</think>y");
}

TEST(ToolCalls, DetectionAndNames) {
  EXPECT_EQ(detect_tool_format("... <tool_call>\\n{{ tool_call | tojson }}"), ToolFormat::hermes);
  EXPECT_EQ(detect_tool_format("{{ '[TOOL_CALLS]' }}"), ToolFormat::mistral);
  EXPECT_EQ(detect_tool_format("{{ '<|python_tag|>' }}"), ToolFormat::llama3);
  EXPECT_EQ(detect_tool_format("<｜tool▁calls▁begin｜>"), ToolFormat::deepseek_r1);
  EXPECT_EQ(detect_tool_format("{{ messages }}"), ToolFormat::none);
  EXPECT_EQ(tool_format_from_name("deepseek-r1"), ToolFormat::deepseek_r1);
  EXPECT_THROW(tool_format_from_name("qwen-xml"), InvalidArgument);
}

}  // namespace
}  // namespace llmk
