// Regular expressions to the grammar IR: the whole text must match (a leading '^' and a trailing '$' are
// accepted and mean that already). Alternation, groups ((...), (?:...), named), classes with ranges and
// negation, '.', \d \w \s and their negations, escapes (\n \t \xHH \uHHHH, punctuation), and the
// quantifiers * + ? {m} {m,} {m,n} (lazy forms match the same text). Lookaround, backreferences, word
// boundaries, inline flags and \p{...} are errors naming their offset.
#include <cstdio>
#include <cstdlib>

#include "grammar/builder.hpp"

namespace llmk::grammar {
namespace {

class RegexParser {
 public:
  RegexParser(Builder& b, std::string_view re, bool json, const std::string& where)
      : b_(b), re_(re), json_(json), where_(where) {}

  GrammarSymbol parse() {
    if (!re_.empty() && re_[0] == '^') ++i_;
    const GrammarSymbol r = alternation();
    if (i_ < re_.size()) fail(re_[i_] == ')' ? "unbalanced ')'" : "unexpected '" + std::string(1, re_[i_]) + "'");
    return r;
  }

 private:
  Builder& b_;
  std::string_view re_;
  bool json_;
  std::string where_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    b_.fail(where_, "regex \"" + std::string(re_.substr(0, 200)) + "\" at offset " + std::to_string(i_) + ": " + what);
  }
  bool at_end() const { return i_ >= re_.size(); }
  // A trailing '$' (not escaped) ends the regex.
  bool at_dollar_end() const { return i_ + 1 == re_.size() && re_[i_] == '$'; }

  GrammarSymbol alternation() {
    std::vector<Seq> alts{concat()};
    while (!at_end() && re_[i_] == '|') {
      ++i_;
      alts.push_back(concat());
    }
    if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
    const int32_t r = b_.rule("regex-alt");
    for (Seq& s : alts) b_.alt(r, std::move(s));
    return Builder::ref(r);
  }

  Seq concat() {
    Seq s;
    while (!at_end() && re_[i_] != '|' && re_[i_] != ')') {
      if (at_dollar_end()) {
        ++i_;
        break;
      }
      GrammarSymbol a = atom();
      a = quantified(a);
      s.push_back(a);
    }
    return s;
  }

  int64_t number() {
    size_t j = i_;
    while (j < re_.size() && re_[j] >= '0' && re_[j] <= '9' && j - i_ < 9) ++j;
    if (j == i_) fail("expected a number in {m,n}");
    const int64_t v = std::strtoll(std::string(re_.substr(i_, j - i_)).c_str(), nullptr, 10);
    i_ = j;
    return v;
  }

  GrammarSymbol quantified(GrammarSymbol a) {
    // Stacked quantifiers over a star, plus or optional collapse to one (x** = x*, (x+)? = x*, ...): the
    // nested form has the same language but an Earley set of it grows with every way to split the text.
    const GrammarSymbol inner = a;
    int64_t plo = -1, phi = -1;  // the quantifier applied so far (plo < 0: none)
    while (!at_end()) {
      const char c = re_[i_];
      int64_t lo, hi;
      if (c == '*') lo = 0, hi = -1, ++i_;
      else if (c == '+') lo = 1, hi = -1, ++i_;
      else if (c == '?') lo = 0, hi = 1, ++i_;
      else if (c == '{' && i_ + 1 < re_.size() && re_[i_ + 1] >= '0' && re_[i_ + 1] <= '9') {
        ++i_;
        lo = hi = number();
        if (!at_end() && re_[i_] == ',') {
          ++i_;
          hi = !at_end() && re_[i_] == '}' ? -1 : number();
        }
        if (at_end() || re_[i_] != '}') fail("expected '}'");
        ++i_;
        if (hi >= 0 && hi < lo) fail("{m,n} with n < m");
      } else {
        break;
      }
      if (!at_end() && re_[i_] == '?') ++i_;  // lazy: the same text
      else if (!at_end() && re_[i_] == '+') fail("possessive quantifiers are not supported");
      const bool prev_star = plo == 0 && phi < 0, prev_plus = plo == 1 && phi < 0, prev_opt = plo == 0 && phi == 1;
      const bool q_star = lo == 0 && hi < 0, q_plus = lo == 1 && hi < 0, q_opt = lo == 0 && hi == 1;
      if ((prev_star && hi != 0) || (prev_plus && (q_star || q_opt)) || (prev_opt && (q_star || q_plus))) {
        if (!prev_star) a = b_.repeat({inner}, 0, -1, "regex-repeat");  // all x*
        plo = 0;
        phi = -1;
        continue;
      }
      if (prev_plus && q_plus) continue;  // x++ written as (x+)+: x+
      a = b_.repeat({a}, lo, hi, "regex-repeat");
      if (plo < 0) plo = lo, phi = hi;
      else plo = 2, phi = 0;  // a generic nesting: nothing more collapses
    }
    return a;
  }

  // One code point of UTF-8 text at i_.
  uint32_t utf8_char() {
    const uint8_t c = uint8_t(re_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + size_t(n) > re_.size()) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n; ++k) {
      const uint8_t d = uint8_t(re_[i_ + size_t(k)]);
      if ((d >> 6) != 2) fail("invalid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    i_ += size_t(n);
    return cp;
  }

  uint32_t hex(int n) {
    if (i_ + size_t(n) > re_.size()) fail("expected " + std::to_string(n) + " hex digits");
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char c = re_[i_++];
      const int d = hex_digit(c);
      if (d < 0) fail("expected a hex digit");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // An escape after '\' (i_ at the letter): its code point ranges.
  CpRanges escape(bool in_class) {
    if (at_end()) fail("trailing '\\'");
    const char c = re_[i_++];
    static const CpRanges digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        space{{'\t', '\r'}, {' ', ' '}};
    switch (c) {
      case 'd': return digit;
      case 'D': return complement(digit);
      case 'w': return word;
      case 'W': return complement(word);
      case 's': return space;
      case 'S': return complement(space);
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': {
        const uint32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        const uint32_t v = hex(4);
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        --i_;
        fail("word boundaries (\\b) are not supported");
      default: break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
      --i_;
      fail(std::string("the escape \\") + c + " is not supported (backreferences, anchors, \\p{...})");
    }
    return {{uint32_t(uint8_t(c)), uint32_t(uint8_t(c))}};
  }

  CpRanges char_class() {  // i_ after '['
    bool neg = false;
    if (!at_end() && re_[i_] == '^') neg = true, ++i_;
    CpRanges r;
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated '['");
      if (re_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (re_[i_] == '[' && i_ + 1 < re_.size() && (re_[i_ + 1] == ':' || re_[i_ + 1] == '=' || re_[i_ + 1] == '.'))
        fail("POSIX classes ([:alpha:]) are not supported");
      CpRanges lo_r;
      if (re_[i_] == '\\') {
        ++i_;
        lo_r = escape(true);
      } else {
        const uint32_t cp = utf8_char();
        lo_r = {{cp, cp}};
      }
      if (lo_r.size() == 1 && lo_r[0].first == lo_r[0].second && i_ + 1 < re_.size() && re_[i_] == '-' &&
          re_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (re_[i_] == '\\') {
          ++i_;
          const CpRanges h = escape(true);
          if (h.size() != 1 || h[0].first != h[0].second) fail("a range must end in one character");
          hi = h[0].first;
        } else {
          hi = utf8_char();
        }
        if (hi < lo_r[0].first) fail("a range out of order");
        r.push_back({lo_r[0].first, hi});
      } else {
        r.insert(r.end(), lo_r.begin(), lo_r.end());
      }
    }
    return neg ? complement(r) : normalize(r);
  }

  // A set of code points as a symbol; in a JSON string, '"', '\' and controls become escapes.
  GrammarSymbol chars(CpRanges r) {
    r = normalize(std::move(r));
    if (!json_) return b_.codepoints(r, "regex-char");
    CpRanges plain;
    std::vector<uint32_t> special;
    for (auto [lo, hi] : r) {
      for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x5C); ++c)
        if (c < 0x20 || c == '"' || c == '\\') special.push_back(c);
      plain.push_back({lo, hi});
    }
    plain = complement(plain);  // remove the specials: complement, add them, complement back
    plain.push_back({0, 0x1F});
    plain.push_back({'"', '"'});
    plain.push_back({'\\', '\\'});
    plain = complement(plain);
    if (special.empty()) return b_.codepoints(plain, "regex-char");
    const int32_t rr = b_.rule("regex-json-char");
    if (!plain.empty()) b_.alt(rr, {b_.codepoints(plain, "regex-char")});
    for (uint32_t c : special) {
      std::string e;
      switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\t': e = "\\t"; break;
        case '\r': e = "\\r"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default: {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          e = buf;
        }
      }
      b_.alt(rr, b_.literal(e));
    }
    return Builder::ref(rr);
  }

  GrammarSymbol atom() {
    const char c = re_[i_];
    if (c == '(') {
      ++i_;
      if (!at_end() && re_[i_] == '?') {
        ++i_;
        if (!at_end() && re_[i_] == ':') ++i_;
        else if (!at_end() && (re_[i_] == 'P' ||
                               (re_[i_] == '<' && i_ + 1 < re_.size() && re_[i_ + 1] != '=' && re_[i_ + 1] != '!'))) {
          while (!at_end() && re_[i_] != '>') ++i_;
          if (at_end()) fail("unterminated group name");
          ++i_;
        } else {
          fail("lookaround and inline flags ((?=, (?!, (?<=, (?<!, (?i)) are not supported");
        }
      }
      const GrammarSymbol r = alternation();
      if (at_end() || re_[i_] != ')') fail("missing ')'");
      ++i_;
      // An empty group matches the empty string.
      return r;
    }
    if (c == '[') {
      ++i_;
      return chars(char_class());
    }
    if (c == '.') {
      ++i_;
      return chars(complement({{'\n', '\n'}}));
    }
    if (c == '\\') {
      ++i_;
      return chars(escape(false));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("nothing to repeat");
    if (c == '^' || c == '$') fail("anchors are only supported at the start ('^') and the end ('$')");
    const uint32_t cp = utf8_char();
    return chars({{cp, cp}});
  }
};

}  // namespace

GrammarSymbol compile_regex(Builder& b, std::string_view re, bool json_string, const std::string& where) {
  return RegexParser(b, re, json_string, where).parse();
}

}  // namespace llmk::grammar

namespace llmk {

std::shared_ptr<const Grammar> grammar_from_regex(std::string_view regex, const GrammarOptions& o) {
  grammar::Builder b("regex", o);
  const GrammarSymbol s = grammar::compile_regex(b, regex, false, "");
  const int32_t root = b.rule("root");
  b.alt(root, {s});
  return b.finish(root);
}

}  // namespace llmk
