// The Jinja interpreter (llmk/jinja.hpp) and chat templates on top of it. Expected texts are
// what jinja2 3.1 renders for the same template with trim_blocks and lstrip_blocks (as
// llama-cpp-python's Jinja2ChatFormatter); python/tests/test_chat_template.py compares every
// llama.cpp template with jinja2 itself on many conversations.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llmk/chat_template.hpp"
#include "llmk/error.hpp"
#include "llmk/gguf.hpp"
#include "llmk/jinja.hpp"

namespace llmk {
namespace {

std::string jr(std::string_view src, std::string_view ctx = "{}", jinja::Limits limits = {}) {
  jinja::RenderOptions o;
  o.now = 1756900800;  // 2025-09-03
  o.limits = limits;
  return jinja::Template::parse(src).render(ctx, o);
}

std::string error_of(std::string_view src, std::string_view ctx = "{}", jinja::Limits limits = {}) {
  try {
    jr(src, ctx, limits);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, PythonSemantics) {
  EXPECT_EQ(jr("{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}, (1,)] }}"),
            "[1, 'a', None, True, 1.5, {'k': \"it's\"}, (1,)]");
  EXPECT_EQ(jr("{{ {'b': 1, 'a': [1, 2.0, 'é<'], 'c': none} | tojson }}"),
            "{\"b\": 1, \"a\": [1, 2.0, \"é<\"], \"c\": null}");
  EXPECT_EQ(jr("{{ {'b': 1, 'a': 'é'} | tojson(ensure_ascii=true, sort_keys=true) }}"),
            "{\"a\": \"\\u00e9\", \"b\": 1}");
  EXPECT_EQ(jr("{{ {'a': 1} | tojson(indent=2) }}"), "{\n  \"a\": 1\n}");
  EXPECT_EQ(jr("{{ '日本語x'[1:] }}|{{ 'abc'[::-1] }}|{{ 'a,b,,c'.split(',') }}|{{ ' x\u3000'.strip() }}|"),
            "本語x|cba|['a', 'b', '', 'c']|x|");
  EXPECT_EQ(jr("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 2 ** 10 }}"),
            "3 -4 2 3.5 1e+20 0.30000000000000004 1024");
  EXPECT_EQ(jr("{{ 'x' if 1 == 1.0 and true == 1 }}{{ 'y' if none }}"), "x");
  EXPECT_EQ(jr("{{ '<' + ('x' | safe) }}|{{ '<' ~ ('x' | safe) }}"), "&lt;x|<x");  // markupsafe.Markup
}

TEST(Jinja, StatementsAndWhitespace) {
  EXPECT_EQ(jr("{% for x in [1, 2, 3] if x != 2 %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% "
               "endfor %}"),
            "1/2,2/2");
  EXPECT_EQ(jr("{% set ns = namespace(n=0) %}{% for x in 'abc' %}{% set ns.n = ns.n + 1 %}{% set y = x %}{% endfor %}"
               "{{ ns.n }}{{ y is defined }}"),
            "3False");
  EXPECT_EQ(jr("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1B][23]");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indent before one goes
  EXPECT_EQ(jr("a\n  {% if true %}\n  x\n  {% endif %}\nb"), "a\n  x\nb");
  EXPECT_EQ(jr("a  {{- ' b ' -}}  c\n"), "a b c");
  EXPECT_EQ(jr("{% for k, v in {'z': 1, 'a': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "z1a2");
  EXPECT_EQ(
      jr("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('+') }}",
         R"({"messages": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"}, {"role": "user", "content": "c"}]})"),
      "a+c");
  EXPECT_EQ(jr("{{ strftime_now('%d %b %Y') }}").size(), 11u);
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_NE(error_of("x\n{% frobnicate %}").find("line 2: unknown tag 'frobnicate'"), std::string::npos);
  EXPECT_NE(error_of("{% break %}").find("'break' outside of a loop"), std::string::npos);
  EXPECT_EQ(jr("{% for x in range(9) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}"
               "{{ x }}{% endfor %}{% generation %}g{% endgeneration %}"),
            "02g");
  EXPECT_NE(error_of("{% include 'x' %}").find("'include' tag is not supported"), std::string::npos);
  EXPECT_NE(error_of("\n\n{{ x | nosuch }}").find("line 3: no filter named 'nosuch'"), std::string::npos);
  EXPECT_EQ(error_of("{% if false %}{{ x | nosuch }}{% endif %}"), "(no error)");  // deferred, as jinja2's compiler
  EXPECT_NE(error_of("{{ raise_exception('roles must alternate') }}").find("roles must alternate"), std::string::npos);
  EXPECT_NE(error_of("{% set l = [] %}{{ l.append(1) }}").find("immutable sandbox"), std::string::npos);
  EXPECT_NE(error_of("{{ x.y }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + 'a' }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(error_of("{{ (").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}").find("nested deeper"),
            std::string::npos);
}

TEST(Jinja, SandboxBoundsStopHostileTemplates) {
  jinja::Limits small;
  small.max_steps = 100000;
  small.max_output = 1 << 16;
  EXPECT_NE(error_of("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "{}", small)
                .find("max_steps"),
            std::string::npos);
  EXPECT_NE(error_of("{% for a in range(100000) %}xxxxxxxxxx{% endfor %}", "{}", small).find("max_output"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000 }}", "{}", small).find("max_output"), std::string::npos);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}").find("max_depth"), std::string::npos);
  EXPECT_NE(error_of("{{ range(200000) | length }}").find("100000"), std::string::npos);
}

const std::vector<ChatMessage> kConv{{"system", " S "}, {"user", " Hi\n"}, {"assistant", "A"}, {"user", "Q"}};

TEST(ChatTemplate, BuiltinsMatchJinja2) {
  ChatRenderOptions o{true, "<bos>", "<eos>"};
  EXPECT_EQ(ChatTemplate::from_name("chatml").render(kConv, o),
            "<|im_start|>system\n S <|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::from_name("gemma").render(kConv, o),
            "<bos><start_of_turn>user\n S \n\nHi<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>"
            "user\n"
            "Q<end_of_turn>\n<start_of_turn>model\n");
  std::string err;
  try {
    ChatTemplate::from_name("gemma3").render(std::vector<ChatMessage>{{"assistant", "x"}}, o);
  } catch (const InvalidArgument& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("Conversation roles must alternate"), std::string::npos) << err;
}

TEST(ChatTemplate, ToolsAndKwargsReachTheTemplate) {
  const ChatTemplate t = ChatTemplate::from_jinja(
      "{{ tools | map(attribute='function.name') | join(',') }}|{{ enable_thinking }}|"
      "{% for m in messages %}{{ m.role }}:{{ m.tool_calls[0].function.arguments.city if m.tool_calls else m.content "
      "}};"
      "{% endfor %}");
  ChatRenderOptions o;
  o.tools_json = R"([{"type": "function", "function": {"name": "get_weather"}}])";
  o.kwargs_json = R"({"enable_thinking": false})";
  EXPECT_EQ(t.render_json(R"([{"role": "user", "content": "w?"}, {"role": "assistant", "content": null,
      "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "cold"}])",
                          o),
            "get_weather|False|user:w?;assistant:Oslo;tool:cold;");
}

TEST(ChatTemplate, BadArgumentsAreNamed) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([] { ChatTemplate::from_name("vicuna"); }).find("'name' = vicuna: must be one of chatml"),
            std::string::npos);
  EXPECT_NE(message([] { ChatTemplate::from_jinja(""); }).find("must not be empty"), std::string::npos);
  EXPECT_NE(message([] { ChatTemplate::from_name("chatml").render({}, {}); }).find("'messages'"), std::string::npos);
  const std::vector<ChatMessage> bad_utf8{{"user", "a\x8b"}};
  EXPECT_NE(message([&] { ChatTemplate::from_name("chatml").render(bad_utf8, {}); }).find("must be valid UTF-8"),
            std::string::npos);
  EXPECT_NE(message([] {
              ChatTemplate::from_name("chatml").render_json("[{\"content\": \"x\"}]", {});
            }).find("'messages[0].role'"),
            std::string::npos);
}

TEST(ChatTemplate, SmolLM2UsesItsOwnTemplate) {
  const std::string path = gguf::default_model_path();
  if (path.empty()) GTEST_SKIP() << "skipped: default model not found (run scripts/fetch-model or set LLMK_MODEL)";
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const std::vector<ChatMessage> user{{"user", "Hi"}};
  EXPECT_EQ(chat_template_of(tok).render(user, chat_render_options(tok)),
            render_chatml(user, true, chatml_default_system(tok.chat_template())));
  EXPECT_EQ(chat_template_of(tok, "gemma").name(), "gemma");
}

}  // namespace
}  // namespace llmk
