// Grammar front ends (JSON Schema, json_object, regex, choice, GBNF) against texts they must accept or
// refuse; the trie mask (fill_mask) against the oracle that tries each token alone (fill_mask_slow) on
// random walks over random and real vocabularies (llama.cpp's Llama 3 and Qwen2 vocab files); errors that
// name the keyword and its JSON pointer; the engine hook (Constraint) on a mask of logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "llmk/gguf.hpp"
#include "llmk/grammar.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk {
namespace {

std::shared_ptr<const TokenVocab> byte_vocab() {  // 256 one-byte tokens and an eog token
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, char(b)));
  t.push_back("");
  return std::make_shared<const TokenVocab>(t, std::vector<int32_t>{256});
}

bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, byte_vocab());
  return m.accept_bytes(text) && m.complete();
}

TEST(Grammar, Regex) {
  auto g = grammar_from_regex("^(ab|c)+[0-9]{2,3}x?$");
  EXPECT_TRUE(matches(g, "ab12"));
  EXPECT_TRUE(matches(g, "cabc123x"));
  EXPECT_FALSE(matches(g, "ab1"));
  EXPECT_FALSE(matches(g, "ab1234"));
  EXPECT_FALSE(matches(g, "12"));
  auto u = grammar_from_regex("[^a-z]\\d\\s.[é-ë]");
  EXPECT_TRUE(matches(u, "Z1 \xe2\x82\xac\xc3\xa9"));  // € é
  EXPECT_FALSE(matches(u, "a1 xé"));
  EXPECT_FALSE(matches(u, "Z1 \nx"));        // '.' is not a newline
  EXPECT_FALSE(matches(u, "Z1 x\xc3\xac"));  // ì is past ë
  // Stacked quantifiers (collapsed where they are a star) keep their language.
  for (const char* re : {"a**", "a?*", "a+*", "a*?", "a*{3}", "a+?+"}) {
    auto q = grammar_from_regex(std::string("x") + re + "y");
    const bool plus = std::string(re) == "a+?+";
    EXPECT_EQ(matches(q, "xy"), !plus) << re;
    EXPECT_TRUE(matches(q, "xaaay")) << re;
  }
  auto q2 = grammar_from_regex("a?{2}");
  EXPECT_TRUE(matches(q2, "") && matches(q2, "aa"));
  EXPECT_FALSE(matches(q2, "aaa"));
  for (const char* bad : {"(?=a)b", "a\\1", "(a", "a)", "*a", "\\bfoo", "a{3,2}", "[a", "(?i)a", "\\p{L}"})
    EXPECT_THROW(grammar_from_regex(bad), GrammarError) << bad;
}

TEST(Grammar, Choice) {
  auto g = grammar_from_choice({"yes", "no", "maybe so"});
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "maybe so"));
  EXPECT_FALSE(matches(g, "ye"));
  EXPECT_FALSE(matches(g, "yesno"));
  EXPECT_THROW(grammar_from_choice({}), GrammarError);
}

TEST(Grammar, Gbnf) {
  const char* text = R"g(# arithmetic
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= num | "(" expr ")"
num  ::= [0-9]{1,3} | "\u00e9"
)g";
  auto g = grammar_from_gbnf(text);
  EXPECT_TRUE(matches(g, "1+(22-333)"));
  EXPECT_TRUE(matches(g, "\xc3\xa9"));
  EXPECT_FALSE(matches(g, "1+"));
  EXPECT_FALSE(matches(g, "1234"));
  // Left recursion is fine for an Earley parser.
  auto l = grammar_from_gbnf("root ::= root \"a\" | \"b\"\n");
  EXPECT_TRUE(matches(l, "baaa"));
  EXPECT_FALSE(matches(l, "ab"));
  auto err = [](const char* t, const char* what) {
    try {
      grammar_from_gbnf(t);
      ADD_FAILURE() << t;
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  err("root ::= foo\n", "'foo' is not defined");
  err("start ::= \"a\"\n", "root");
  err("root ::= \"a\"\nroot ::= \"b\"\n", "line 2");
  err("root ::= [a\n", "line 1");
}

TEST(Grammar, JsonObjectAndWhitespace) {
  auto g = grammar_json_object();
  EXPECT_TRUE(matches(g, R"({"a":[1,-2.5e3,true,null,{"b":"c\n\u00e9"}],"x":{}})"));
  EXPECT_FALSE(matches(g, R"({"a": 1})"));  // compact by default
  EXPECT_FALSE(matches(g, R"([1])"));
  EXPECT_FALSE(matches(g, R"({"a":01})"));
  GrammarOptions o;
  o.max_whitespace = 2;
  auto w = grammar_json_object(o);
  EXPECT_TRUE(matches(w, "{\"a\": 1 ,\n \"b\":2}"));
  EXPECT_FALSE(matches(w, "{\"a\":   1}"));  // three spaces
}

TEST(Grammar, JsonSchemaKeywords) {
  const char* schema = R"g({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 3},
      "age": {"type": "integer", "minimum": -5, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 2},
      "kind": {"const": "k"},
      "score": {"type": ["number", "null"], "minimum": 0, "maximum": 10},
      "id": {"type": "string", "format": "uuid"},
      "code": {"type": "string", "pattern": "^[A-Z]{2}\"[0-9]$"},
      "next": {"$ref": "#/$defs/node"}
    },
    "required": ["name", "age"],
    "additionalProperties": false,
    "$defs": {"node": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                                                    "required": ["next"], "additionalProperties": false}]}}
  })g";
  auto g = grammar_from_json_schema(schema);
  EXPECT_TRUE(matches(g, R"({"name":"abc","age":-5})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","age":120,"tags":["a",3],"kind":"k","score":9.5})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","age":0,"score":10.000,"next":{"next":{"next":null}}})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","age":7,"id":"123e4567-e89b-12d3-a456-426614174000","code":"AB\"7"})"));
  EXPECT_FALSE(matches(g, R"({"age":1,"name":"x"})"));                       // order
  EXPECT_FALSE(matches(g, R"({"name":"","age":1})"));                        // minLength
  EXPECT_FALSE(matches(g, R"({"name":"abcd","age":1})"));                    // maxLength
  EXPECT_FALSE(matches(g, R"({"name":"a","age":121})"));                     // maximum
  EXPECT_FALSE(matches(g, R"({"name":"a","age":-6})"));                      // minimum
  EXPECT_FALSE(matches(g, R"({"name":"a","age":1.5})"));                     // integer
  EXPECT_FALSE(matches(g, R"({"name":"a","age":1,"tags":[]})"));             // minItems
  EXPECT_FALSE(matches(g, R"({"name":"a","age":1,"tags":["a","b","a"]})"));  // maxItems
  EXPECT_FALSE(matches(g, R"({"name":"a","age":1,"score":10.5})"));
  EXPECT_FALSE(matches(g, R"({"name":"a","age":1,"score":-0.5})"));
  EXPECT_FALSE(matches(g, R"({"name":"a","age":1,"extra":1})"));  // additionalProperties
  EXPECT_FALSE(matches(g, R"({"name":"a"})"));                    // required
}

TEST(Grammar, JsonSchemaIntegerRanges) {
  // Every integer in a window against the bounds, for bounds straddling digit-count boundaries.
  const int64_t bounds[][2] = {{0, 9}, {7, 10}, {-13, 99}, {95, 1005}, {-1000, -99}, {10, 10}, {-1, 0}};
  for (auto [lo, hi] : bounds) {
    auto g = grammar_from_json_schema(R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" +
                                      std::to_string(hi) + "}");
    for (int64_t x = lo - 30; x <= hi + 30; ++x)
      EXPECT_EQ(matches(g, std::to_string(x)), x >= lo && x <= hi) << lo << " " << hi << " " << x;
    EXPECT_FALSE(matches(g, "-0" + std::to_string(std::abs(lo))));
  }
  auto x = grammar_from_json_schema(R"({"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":6.5})");
  for (int v = 0; v < 10; ++v) EXPECT_EQ(matches(x, std::to_string(v)), v > 3 && v < 6.5) << v;
}

TEST(Grammar, JsonSchemaErrorsNameKeywordAndPointer) {
  auto err = [](const std::string& schema, const std::string& keyword, const std::string& pointer) {
    try {
      grammar_from_json_schema(schema);
      ADD_FAILURE() << schema;
    } catch (const GrammarError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'" + keyword + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(pointer), std::string::npos) << m;
    }
  };
  err(R"({"type":"object","properties":{"a":{"not":{"type":"null"}}}})", "not", "#/properties/a/not");
  err(R"({"if":{},"then":{}})", "if", "#/if");
  err(R"({"type":"array","uniqueItems":true})", "uniqueItems", "#/uniqueItems");
  err(R"j({"type":"string","pattern":"a(?=b)"})j", "pattern", "#/pattern");
  err(R"({"type":"string","format":"hostname"})", "format", "#/format");
  err(R"({"anyOf":[{"type":"string","patternProperties":{}}]})", "patternProperties", "#/anyOf/0/patternProperties");
  err(R"({"type":"number","multipleOf":0.5})", "multipleOf", "#/multipleOf");
  err(R"({"type":"object","properties":{"a~/b":{"oneOf":[]}}})", "oneOf", "#/properties/a~0~1b/oneOf");
  EXPECT_THROW(grammar_from_json_schema("{"), GrammarError);
  EXPECT_THROW(grammar_from_json_schema(R"({"const": 7.7e7777})"), GrammarError);  // out of double's range
  EXPECT_THROW(grammar_from_json_schema(R"({"$ref":"#/nowhere"})"), GrammarError);
}

// Forced tool calls: hermes syntax around each tool's arguments schema; the mask (fast path and oracle)
// admits exactly the tools' names and schema-valid arguments.
TEST(Grammar, ToolCalls) {
  const std::vector<ToolSchema> tools = {
      {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},)"
                      R"("required":["city"],"additionalProperties":false})"},
      {"add", ""}};
  const ToolCallSyntax hermes = {"", "<tool_call>\n{\"name\": ", ", \"arguments\": ", "}\n</tool_call>", "\n", ""};
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>";
  const std::string add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":1}}\n</tool_call>";
  auto any = grammar_for_tool_calls(tools, hermes, 1, -1);
  EXPECT_TRUE(matches(any, weather));
  EXPECT_TRUE(matches(any, add));
  EXPECT_TRUE(matches(any, weather + "\n" + add + "\n" + weather));
  EXPECT_FALSE(matches(any, ""));  // required: at least one call
  EXPECT_FALSE(matches(any, "Sure. " + weather));
  EXPECT_FALSE(
      matches(any, "<tool_call>\n{\"name\": \"get_weathe\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(any, "<tool_call>\n{\"name\": \"sub\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(matches(any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(matches(any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":7}}\n</tool_call>"));
  EXPECT_FALSE(
      matches(any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"P\",\"x\":1}}\n</tool_call>"));
  EXPECT_FALSE(matches(any, "<tool_call>\n{\"name\": \"add\", \"arguments\": [1]}\n</tool_call>"));
  auto one = grammar_for_tool_calls(tools, hermes, 1, 1);  // parallel_tool_calls false
  EXPECT_TRUE(matches(one, weather));
  EXPECT_FALSE(matches(one, weather + "\n" + add));
  auto named = grammar_for_tool_calls({tools[0]}, hermes, 1, -1);  // a named function
  EXPECT_TRUE(matches(named, weather));
  EXPECT_FALSE(matches(named, add));
  const ToolCallSyntax llama3 = {"", "{\"name\": ", ", \"parameters\": ", "}", ";", ""};
  auto l3 = grammar_for_tool_calls(tools, llama3, 1, -1);
  EXPECT_TRUE(matches(l3, R"({"name": "add", "parameters": {}};{"name": "get_weather", "parameters": {"city":"a"}})"));
  EXPECT_FALSE(matches(l3, R"({"name": "add", "arguments": {}})"));
  // A reasoning block may come first; the first "</think>" ends it.
  ToolCallSyntax think = hermes;
  think.reasoning = true;
  auto rs = grammar_for_tool_calls(tools, think, 1, 1);
  EXPECT_TRUE(matches(rs, weather));
  EXPECT_TRUE(matches(rs, "<think>\nthe user wants <b> weather </thin</think\n</think>\n\n" + weather));
  EXPECT_TRUE(matches(rs, "<think></think>" + weather));
  EXPECT_FALSE(matches(rs, "<think>a</think>b</think>" + weather));
  EXPECT_FALSE(matches(rs, "<think>a</think>     " + weather));  // at most 4 whitespace bytes
  EXPECT_FALSE(matches(rs, "<think>a" + weather));
  EXPECT_FALSE(matches(rs, "Sure. " + weather));
  // An unquoted name between markers, as DeepSeek R1 writes it.
  ToolCallSyntax ds = {"<B>", "<b>function<s>", "\n```json\n", "\n```<e>", "\n", "<E>"};
  ds.name_json = false;
  auto r1 = grammar_for_tool_calls(tools, ds, 1, -1);
  EXPECT_TRUE(matches(r1,
                      "<B><b>function<s>add\n```json\n{}\n```<e>\n<b>function<s>get_weather\n```json\n"
                      "{\"city\":\"a\"}\n```<e><E>"));
  EXPECT_FALSE(matches(r1, "<B><b>function<s>\"add\"\n```json\n{}\n```<e><E>"));
  EXPECT_THROW(grammar_for_tool_calls({{"a\nb", ""}}, ds, 1, -1), GrammarError);

  // The mask after `{"name": "`: the first bytes of the tools' names only, no eog; once the call is
  // whole, eog too. The trie walk agrees with the oracle at every step.
  const auto v = byte_vocab();
  GrammarMatcher m(one, v);
  std::vector<uint32_t> fast((v->size() + 31) / 32), slow(fast.size());
  auto allowed = [&](int t) { return (fast[size_t(t) / 32] >> (t % 32)) & 1; };
  ASSERT_TRUE(m.accept_bytes("<tool_call>\n{\"name\": \""));
  m.fill_mask(fast.data());
  m.fill_mask_slow(slow.data());
  EXPECT_EQ(fast, slow);
  for (int t = 0; t < v->size(); ++t) EXPECT_EQ(allowed(t), t == 'g' || t == 'a') << t;
  ASSERT_TRUE(m.accept_bytes("get_weather\", \"arguments\": {"));
  m.fill_mask(fast.data());
  m.fill_mask_slow(slow.data());
  EXPECT_EQ(fast, slow);
  for (int t = 0; t < v->size(); ++t) EXPECT_EQ(allowed(t), t == '"') << t;  // a property name; city required
  ASSERT_FALSE(m.accept_bytes("\"days\""));
  ASSERT_TRUE(m.accept_bytes("\"city\":\"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(m.complete());
  m.fill_mask(fast.data());
  for (int t = 0; t < v->size(); ++t) EXPECT_EQ(allowed(t), t == 256) << t;  // only eog: one call

  // A schema error names the tool and the keyword's pointer; bad lists and counts are errors.
  try {
    grammar_for_tool_calls({{"f", R"({"type":"object","properties":{"a":{"not":{}}}})"}}, hermes, 1, -1);
    ADD_FAILURE();
  } catch (const GrammarError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tools[0] 'f'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("#/properties/a/not"), std::string::npos) << msg;
  }
  EXPECT_THROW(grammar_for_tool_calls({}, hermes, 1, -1), GrammarError);
  EXPECT_THROW(grammar_for_tool_calls({{"", ""}}, hermes, 1, -1), GrammarError);
  EXPECT_THROW(grammar_for_tool_calls(tools, hermes, 0, -1), GrammarError);
  EXPECT_THROW(grammar_for_tool_calls(tools, hermes, 2, 1), GrammarError);
}

TEST(Grammar, Budget) {
  GrammarOptions o;
  o.max_symbols = 1000;
  EXPECT_THROW(grammar_from_regex("a{5000}", o), GrammarError);
  o = {};
  o.max_compile_seconds = 0;
  try {
    grammar_from_regex("(ab){1,3000}", o);
    ADD_FAILURE();
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("symbols"), std::string::npos) << e.what();
  }
}

// The fast mask against the oracle, on random walks: at each step both masks are computed, the words
// past the end are checked untouched, and a random allowed token is taken.
void walk_and_compare(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const TokenVocab>& v,
                      uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  GrammarMatcher m(g, v);
  const size_t words = size_t((v->size() + 31) / 32);
  std::vector<uint32_t> fast(words + 1), slow(words);
  for (int s = 0; s < steps; ++s) {
    fast[words] = 0xDEADBEEF;
    m.fill_mask(fast.data());
    m.fill_mask_slow(slow.data());
    ASSERT_EQ(fast[words], 0xDEADBEEFu);
    for (size_t w = 0; w < words; ++w) ASSERT_EQ(fast[w], slow[w]) << "step " << s << " word " << w;
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < v->size(); ++t)
      if ((fast[size_t(t >> 5)] >> (t & 31)) & 1) allowed.push_back(t);
    if (allowed.empty()) {
      ASSERT_TRUE(m.done());
      return;
    }
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept_token(t));
    if (m.done()) return;
  }
}

std::shared_ptr<const TokenVocab> random_vocab(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  const std::string alphabet = "{}[]\":,0123456789-.eE+ abcxyz\\n\xc3\xa9\x80";
  std::vector<std::string> t;
  for (int b = 0; b < 128; ++b) t.push_back(std::string(1, char(b)));  // every ASCII byte alone
  while (int(t.size()) < n) {
    std::string s;
    const int len = 1 + int(rng() % 6);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    t.push_back(s);
  }
  t.push_back("");  // eog
  t.push_back("");  // a control token
  return std::make_shared<const TokenVocab>(t, std::vector<int32_t>{int32_t(t.size()) - 2});
}

std::vector<std::shared_ptr<const Grammar>> test_grammars() {
  return {grammar_json_object(),
          grammar_from_json_schema(R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"number"}},
              "b":{"type":"string","maxLength":4},"c":{"enum":[1,"x",null]}},"required":["c"]})"),
          grammar_from_regex("[a-c]+(-[0-9]{1,4})?\\.e"),
          grammar_from_gbnf("root ::= \"{\" item (\",\" item)* \"}\"\nitem ::= [a-z]+ \":\" [0-9]+\n"),
          grammar_from_choice({"abc", "ab", "xyz"})};
}

TEST(GrammarMask, TrieMatchesOracleOnRandomVocabularies) {
  const auto gs = test_grammars();
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const auto v = random_vocab(seed, 500 + int(seed) * 37);
    for (size_t i = 0; i < gs.size(); ++i) {
      SCOPED_TRACE("grammar " + std::to_string(i) + " seed " + std::to_string(seed));
      walk_and_compare(gs[i], v, seed * 100 + uint32_t(i), 30);
    }
  }
}

std::string vocab_path(const std::string& name) {
  const char* cache = std::getenv("LLMK_CACHE");
  const char* home = std::getenv("HOME");
  return (cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/llmk") + "/llamacpp-vocab/ggml-vocab-" +
         name + ".gguf";
}

class RealVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(RealVocab, TrieMatchesOracle) {
  const std::string path = vocab_path(GetParam());
  if (!std::ifstream(path)) GTEST_SKIP() << "skipped: " << path << " not found (run scripts/fetch-llamacpp-vocab)";
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const auto v = TokenVocab::of(tok);
  EXPECT_EQ(v->size(), tok.n_vocab());
  // The oracle costs a full pass over the vocabulary per token per step: short walks.
  const auto gs = test_grammars();
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("grammar " + std::to_string(i));
    walk_and_compare(gs[i], v, uint32_t(i) + 7, i == 0 ? 8 : 4);
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, RealVocab, ::testing::Values("llama-bpe", "qwen2"));

TEST(GrammarConstraint, MasksLogitsAndEndsWhenDone) {
  auto v = byte_vocab();
  GrammarConstraint c(grammar_from_choice({"ab", "abc"}), v);
  auto st = c.start();
  std::vector<float> z(260, 1.0f);  // V larger than the vocabulary: the tail is masked too
  st->mask(z.data(), int64_t(z.size()));
  for (int t = 0; t < 260; ++t) EXPECT_EQ(std::isinf(z[size_t(t)]), t != 'a') << t;
  st->accept('a');
  EXPECT_THROW(st->accept('x'), InvalidArgument);
  st->accept('b');
  EXPECT_FALSE(st->done());
  z.assign(260, 0.5f);
  st->mask(z.data(), 260);
  for (int t = 0; t < 260; ++t) EXPECT_EQ(std::isinf(z[size_t(t)]), t != 'c' && t != 256) << t;  // 'c' or eog
  st->accept('c');
  EXPECT_TRUE(st->done());
}

}  // namespace
}  // namespace llmk
