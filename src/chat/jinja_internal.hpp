// The interpreter's pieces: lexer (jinja_lex.cpp), parser (jinja_parse.cpp), evaluator
// (jinja_eval.cpp), Python's value semantics (jinja_py.cpp).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.hpp"
#include "llmk/error.hpp"
#include "llmk/jinja.hpp"
#include "llmk/utf8.hpp"
#include "tokenizer/unicode.hpp"

namespace llmk::jinja {

[[noreturn]] void fail(int line, const std::string& msg);

// Python's str.isspace() set: the byte length of the whitespace character at s[i], else 0.
size_t py_space_len(std::string_view s, size_t i);
size_t char_start_before(std::string_view s, size_t end);
size_t py_lstrip_pos(std::string_view s, size_t a);  // first non-space at or after a
size_t py_rstrip_pos(std::string_view s, size_t a);  // end of s less trailing spaces, >= a
using unicode::append_utf8;                          // cp as UTF-8 onto out
std::vector<uint32_t> to_cps(std::string_view s);    // s is valid UTF-8
std::string from_cps(const std::vector<uint32_t>& cps, size_t a, size_t b);

struct Token {
  enum Kind { Name, Str, Int, Float, Op } kind = Op;
  int line = 0;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

struct Segment {
  enum Kind { Text, Var, Block } kind;
  int line;
  std::string text;
  std::vector<Token> tokens;
};

std::vector<Segment> scan(std::string_view source);

struct Node;
using NodeP = std::unique_ptr<Node>;
using Body = std::vector<NodeP>;

struct Node {
  enum Kind {
    // expressions
    Lit,
    Name,
    Attr,
    Item,
    Slice,
    Call,
    Filter,
    Test,
    Neg,
    Pos,
    Not,
    And,
    Or,
    Bin,
    Compare,
    Cond,
    ListLit,
    TupleLit,
    DictLit,
    // statements
    Text,
    Print,
    If,
    For,
    Set,
    SetNs,
    SetBlock,
    Macro,
    CallBlock,
    FilterBlock,
    Break,
    Continue
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value value;
  std::vector<NodeP> a;            // operands; null where optional and absent
  std::vector<std::string> names;  // keyword names of call arguments, compare ops, targets, params
  std::vector<Body> bodies;        // If: one per condition; For/Macro/blocks: bodies[0]
  Body else_body;
  bool negated = false;  // Test: "is not"; For: the body reads `loop`
  bool flag = false;     // For: recursive; Filter/Test: unknown name, an error when evaluated
};

Body parse(std::vector<Segment> segments);

// Python semantics (jinja_py.cpp).
bool truthy(const Value& v);
std::string to_str(const Value& v);   // str(v)
std::string py_repr(const Value& v);  // repr(v)
bool py_equal(const Value& a, const Value& b);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys): the tojson filter of
// llama-cpp-python's Jinja2ChatFormatter (Transformers' chat-template tojson).
struct JsonOpts {
  bool ensure_ascii = false;
  bool indent = false;
  std::string indent_str;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOpts& o, int line);
std::string html_escape(std::string_view s);  // markupsafe.escape
std::string format_float(double d);           // float.__repr__
Value from_json_text(std::string_view json);

}  // namespace llmk::jinja
