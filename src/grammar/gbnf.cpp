// llama.cpp's GBNF to the grammar IR: `name ::= alternatives`, start rule `root`; literals "..." and
// classes [...] / [^...] with escapes (\n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH), '.', groups,
// rule references, and the quantifiers * + ? {m} {m,} {m,n}; '#' comments. As in llama.cpp, a rule's
// sequence ends at a newline unless inside parentheses or right after '|' or '::='. Errors name the line.
#include <map>

#include "grammar/builder.hpp"

namespace llmk::grammar {
namespace {

class GbnfParser {
 public:
  GbnfParser(Builder& b, std::string_view text) : b_(b), s_(text) {}

  std::shared_ptr<const Grammar> parse() {
    space(true);
    while (!at_end()) {
      const size_t at = i_;
      const std::string name = ident();
      if (name.empty()) fail("expected a rule name");
      space(false);
      if (s_.substr(i_, 3) != "::=") fail("expected '::=' after '" + name + "'");
      i_ += 3;
      space(true);
      const int32_t r = rule_id(name);
      if (defined_.count(r)) {
        i_ = at;
        fail("rule '" + name + "' is defined twice");
      }
      defined_[r] = line();
      alternates(r, false);
      if (!at_end() && s_[i_] != '\n' && s_[i_] != '\r') fail("expected the end of the line");
      space(true);
    }
    for (const auto& [name, r] : ids_)
      if (!defined_.count(r)) b_.fail("line " + std::to_string(first_use_[r]), "rule '" + name + "' is not defined");
    auto it = ids_.find("root");
    if (it == ids_.end()) b_.fail("", "no rule named 'root'");
    return b_.finish(it->second);
  }

 private:
  Builder& b_;
  std::string_view s_;
  size_t i_ = 0;
  std::map<std::string, int32_t> ids_;
  std::map<int32_t, int> defined_, first_use_;

  bool at_end() const { return i_ >= s_.size(); }
  int line() const {
    int n = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) n += s_[k] == '\n';
    return n;
  }
  [[noreturn]] void fail(const std::string& what) const { b_.fail("line " + std::to_string(line()), what); }
  void space(bool newlines) {
    while (!at_end()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) ++i_;
      else if (c == '#') {
        while (!at_end() && s_[i_] != '\n' && s_[i_] != '\r') ++i_;
      } else {
        break;
      }
    }
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  std::string ident() {
    const size_t j = i_;
    while (!at_end() && name_char(s_[i_])) ++i_;
    return std::string(s_.substr(j, i_ - j));
  }
  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t r = b_.rule(name);
    ids_[name] = r;
    first_use_[r] = line();
    return r;
  }

  void alternates(int32_t r, bool nested) {
    b_.alt(r, sequence(nested));
    while (!at_end() && s_[i_] == '|') {
      ++i_;
      space(true);
      b_.alt(r, sequence(nested));
    }
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (at_end()) fail("expected " + std::to_string(n) + " hex digits");
      const char c = s_[i_++];
      const int d = hex_digit(c);
      if (d < 0) fail("expected a hex digit");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }
  // One (possibly escaped) code point of a literal or class.
  uint32_t character() {
    if (at_end()) fail("unexpected end of the grammar");
    uint8_t c = uint8_t(s_[i_]);
    if (c == '\\') {
      ++i_;
      if (at_end()) fail("trailing '\\'");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '/': return uint32_t(e);
        default: --i_; fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + size_t(n) > s_.size()) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    return cp;
  }

  GrammarSymbol item(bool nested) {
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      Seq lit;
      while (true) {
        if (at_end() || s_[i_] == '\n') fail("unterminated string literal");
        if (s_[i_] == '"') {
          ++i_;
          break;
        }
        const uint32_t cp = character();
        lit.push_back(b_.codepoints({{cp, cp}}, "char"));
      }
      const int32_t r = b_.rule("literal");
      b_.alt(r, std::move(lit));
      return Builder::ref(r);
    }
    if (c == '[') {
      ++i_;
      bool neg = false;
      if (!at_end() && s_[i_] == '^') neg = true, ++i_;
      CpRanges r;
      while (true) {
        if (at_end() || s_[i_] == '\n') fail("unterminated character class");
        if (s_[i_] == ']') {
          ++i_;
          break;
        }
        const uint32_t lo = character();
        uint32_t hi = lo;
        if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
          ++i_;
          hi = character();
          if (hi < lo) fail("a range out of order");
        }
        r.push_back({lo, hi});
      }
      return b_.codepoints(neg ? complement(r) : r, "class");
    }
    if (c == '.') {
      ++i_;
      return b_.codepoints({{0, kMaxCodePoint}}, "any-char");
    }
    if (c == '(') {
      ++i_;
      space(true);
      const int32_t r = b_.rule("group");
      alternates(r, true);
      if (at_end() || s_[i_] != ')') fail("expected ')'");
      ++i_;
      return Builder::ref(r);
    }
    if (name_char(c)) return Builder::ref(rule_id(ident()));
    fail(std::string("unexpected '") + c + "'");
  }

  int64_t number() {
    const size_t j = i_;
    while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9' && i_ - j < 9) ++i_;
    if (j == i_) fail("expected a number");
    return std::stoll(std::string(s_.substr(j, i_ - j)));
  }

  Seq sequence(bool nested) {
    Seq s;
    while (!at_end()) {
      const char c = s_[i_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      // The next rule's "name ::=" on the same line is not part of this sequence (llama.cpp reads it so too).
      GrammarSymbol a = item(nested);
      space(nested);
      while (!at_end() && (s_[i_] == '*' || s_[i_] == '+' || s_[i_] == '?' || s_[i_] == '{')) {
        int64_t lo = 0, hi = -1;
        const char q = s_[i_++];
        if (q == '+') lo = 1;
        else if (q == '?') hi = 1;
        else if (q == '{') {
          space(false);
          lo = hi = number();
          space(false);
          if (!at_end() && s_[i_] == ',') {
            ++i_;
            space(false);
            hi = !at_end() && s_[i_] == '}' ? -1 : number();
            space(false);
          }
          if (at_end() || s_[i_] != '}') fail("expected '}'");
          ++i_;
          if (hi >= 0 && hi < lo) fail("{m,n} with n < m");
        }
        a = b_.repeat({a}, lo, hi, "repeat");
        space(nested);
      }
      s.push_back(a);
    }
    return s;
  }
};

}  // namespace
}  // namespace llmk::grammar

namespace llmk {

std::shared_ptr<const Grammar> grammar_from_gbnf(std::string_view gbnf, const GrammarOptions& o) {
  grammar::Builder b("gbnf", o);
  return grammar::GbnfParser(b, gbnf).parse();
}

}  // namespace llmk
