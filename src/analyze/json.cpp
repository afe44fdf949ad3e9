// Strict recursive-descent JSON reader (see json.hpp). Nesting is capped at 64
// levels so a hostile file cannot overflow the stack.
#include "analyze/json.hpp"

#include <cstdint>

#include "llmk/error.hpp"
#include "tokenizer/unicode.hpp"

namespace llmk::analyze::json {

namespace {

class Parser {
 public:
  Parser(std::string_view s, std::string_view source) : s_(s), source_(source) {}

  Value document() {
    Value v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  std::string_view s_, source_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    int64_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw_invalid_argument("analyze::parse_model_config", std::string(source_),
                           "line " + std::to_string(line) + " column " + std::to_string(col), what);
  }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!eat(c)) fail(std::string("expected ") + what);
  }

  Value value(int depth) {
    if (depth > 64) fail("nesting deeper than 64 levels");
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[i_];
    Value v;
    if (c == '{') {
      ++i_;
      v.kind = Value::Kind::object;
      if (eat('}')) return v;
      do {
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
        std::string key = string();
        for (const auto& [k, _] : v.members)
          if (k == key) fail("duplicate key '" + key + "'");
        expect(':', "':' after a key");
        v.members.push_back(Member{std::move(key), value(depth + 1)});
      } while (eat(','));
      expect('}', "',' or '}' in an object");
    } else if (c == '[') {
      ++i_;
      v.kind = Value::Kind::array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']', "',' or ']' in an array");
    } else if (c == '"') {
      v.kind = Value::Kind::string;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::Kind::number;
      v.text = number();
    } else if (literal("true")) {
      v.kind = Value::Kind::boolean;
      v.b = true;
    } else if (literal("false")) {
      v.kind = Value::Kind::boolean;
    } else if (!literal("null")) {
      fail("expected a JSON value");
    }
    return v;
  }

  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  std::string number() {
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (i_ < s_.size() && digit(s_[i_])) {
      while (i_ < s_.size() && digit(s_[i_])) ++i_;
    } else {
      fail("malformed number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !digit(s_[i_])) fail("malformed number");
      while (i_ < s_.size() && digit(s_[i_])) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !digit(s_[i_])) fail("malformed number");
      while (i_ < s_.size() && digit(s_[i_])) ++i_;
    }
    return std::string(s_.substr(start, i_ - start));
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t u = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      u <<= 4;
      if (digit(h)) u |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') u |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') u |= uint32_t(h - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return u;
  }

  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      switch (const char e = s_[i_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!literal("\\u")) fail("unpaired surrogate in \\u escape");
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("unpaired surrogate in \\u escape");
          }
          unicode::append_utf8(out, cp);
          break;
        }
        default: fail("bad escape in a string");
      }
    }
  }
};

}  // namespace

std::string Value::repr() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::boolean: return b ? "true" : "false";
    case Kind::number: return text;
    case Kind::string: return "\"" + text + "\"";
    case Kind::array: return "[...]";
    case Kind::object: return "{...}";
  }
  return "?";
}

Value parse(std::string_view text, std::string_view source) { return Parser(text, source).document(); }

}  // namespace llmk::analyze::json
