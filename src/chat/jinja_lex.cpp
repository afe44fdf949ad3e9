// Jinja's lexer (jinja2/lexer.py) with trim_blocks and lstrip_blocks on: template data, tags
// with their whitespace control, and the tokens inside tags.
#include "chat/jinja_internal.hpp"

#include <cstring>

namespace llmk::jinja {

[[noreturn]] void fail(int line, const std::string& msg) {
  throw InvalidArgument("llmk::jinja: line " + std::to_string(line) + ": " + msg);
}

size_t py_space_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const size_t left = s.size() - i;
  const uint8_t c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xc2 && left >= 2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;
  if (c == 0xe1 && left >= 3 && b(1) == 0x9a && b(2) == 0x80) return 3;  // U+1680
  if (c == 0xe2 && left >= 3) {
    if (b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf))
      return 3;                                  // U+2000-200A, 2028/9, 202F
    if (b(1) == 0x81 && b(2) == 0x9f) return 3;  // U+205F
  }
  if (c == 0xe3 && left >= 3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

size_t char_start_before(std::string_view s, size_t end) {
  size_t i = end - 1;
  for (int k = 0; k < 3 && i > 0 && (uint8_t(s[i]) & 0xc0) == 0x80; ++k) --i;
  return i;
}

size_t py_lstrip_pos(std::string_view s, size_t a) {
  while (a < s.size()) {
    const size_t n = py_space_len(s, a);
    if (n == 0) break;
    a += n;
  }
  return a;
}

size_t py_rstrip_pos(std::string_view s, size_t a) {
  size_t b = s.size();
  while (b > a) {
    const size_t start = char_start_before(s, b);
    if (start < a || py_space_len(s, start) != b - start) break;
    b = start;
  }
  return b;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's unicode-escape decoding of a string literal's body (jinja's str token).
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    auto hex = [&](int n) {
      uint32_t cp = 0;
      for (int k = 0; k < n; ++k) {
        if (i + 1 >= body.size()) fail(line, "truncated \\x/\\u escape in a string");
        const char h = body[++i];
        cp = cp * 16 + uint32_t(is_digit(h)                              ? h - '0'
                                : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10
                                                                         : 99);
        if (cp > 0x10ffff * 16) fail(line, "bad hex escape in a string");
      }
      if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) fail(line, "bad \\x/\\u escape in a string");
      append_utf8(out, cp);
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\n': break;
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7': {
        uint32_t cp = uint32_t(e - '0');
        for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
          cp = cp * 8 + uint32_t(body[++i] - '0');
        append_utf8(out, cp);
        break;
      }
      case 'N': fail(line, "\\N{...} escapes are not supported");
      default: out += '\\'; out += e;
    }
  }
  return out;
}

struct Scanner {
  std::string src;
  size_t pos = 0;
  int line = 1;
  std::vector<Segment> out;
  bool line_starting = true;

  bool at(std::string_view s) const { return src.compare(pos, s.size(), s) == 0; }
  void advance(size_t n) {
    for (size_t k = 0; k < n; ++k)
      if (src[pos + k] == '\n') ++line;
    pos += n;
  }
  size_t space_len(size_t p) const { return p < src.size() ? py_space_len(src, p) : 0; }
  void skip_space() {
    while (size_t n = space_len(pos)) advance(n);
  }
  // Text before a tag whose start sign is `sign`; `block` for {% and {#.
  void emit_text(std::string text, char sign, bool block, int text_line) {
    if (sign == '-') {
      text.resize(py_rstrip_pos(text, 0));
    } else if (sign != '+' && block) {
      const size_t l_pos = text.rfind('\n') + 1;  // npos + 1 == 0
      if ((l_pos > 0 || line_starting) && l_pos < text.size() && py_lstrip_pos(text, l_pos) == text.size())
        text.resize(l_pos);
    }
    if (!text.empty()) out.push_back(Segment{Segment::Text, text_line, std::move(text), {}});
  }
  // The end of a block or comment tag at pos: "+%}", "-%}" + whitespace, or "%}" + one newline.
  bool block_end(char close) {
    const char end[3] = {'%', '}', 0};
    std::string e = std::string(1, close == '#' ? '#' : end[0]) + "}";
    if (at("+" + e)) {
      advance(3);
    } else if (at("-" + e)) {
      advance(3);
      const size_t before = pos;
      skip_space();
      line_starting = pos > before && src[pos - 1] == '\n';
      return true;
    } else if (at(e)) {
      advance(2);
      if (pos < src.size() && src[pos] == '\n') {
        advance(1);
        line_starting = true;
        return true;
      }
    } else {
      return false;
    }
    line_starting = false;
    return true;
  }

  void tokens(Segment& seg, bool var) {
    std::vector<char> balance;
    for (;;) {
      if (pos >= src.size())
        fail(seg.line, var ? "unexpected end of template: '}}' missing" : "unexpected end of template: '%}' missing");
      if (balance.empty()) {
        if (var) {
          if (at("-}}")) {
            advance(3);
            const size_t before = pos;
            skip_space();
            line_starting = pos > before && src[pos - 1] == '\n';
            return;
          }
          if (at("}}")) {
            advance(2);
            line_starting = false;
            return;
          }
        } else if (block_end('%')) {
          return;
        }
      }
      if (size_t n = space_len(pos)) {
        advance(n);
        continue;
      }
      Token t;
      t.line = line;
      const char c = src[pos];
      if (is_digit(c)) {
        size_t p = pos;
        auto digits = [&](size_t& q) {
          const size_t s = q;
          while (q < src.size() &&
                 (is_digit(src[q]) || (src[q] == '_' && q + 1 < src.size() && is_digit(src[q + 1]) && q > s)))
            ++q;
          return q > s;
        };
        digits(p);
        bool is_float = false;
        size_t q = p;
        if (q + 1 < src.size() && src[q] == '.' && is_digit(src[q + 1])) {
          ++q;
          digits(q);
          is_float = true;
        }
        size_t r = q;
        if (r < src.size() && (src[r] == 'e' || src[r] == 'E')) {
          ++r;
          if (r < src.size() && (src[r] == '+' || src[r] == '-')) ++r;
          if (r < src.size() && is_digit(src[r])) {
            digits(r);
            q = r;
            is_float = true;
          }
        }
        std::string text;
        for (size_t k = pos; k < q; ++k)
          if (src[k] != '_') text += src[k];
        if (is_float) {
          t.kind = Token::Float;
          t.f = std::strtod(text.c_str(), nullptr);
        } else {
          if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos)
            fail(line, "integer literals with a leading 0 (octal, hex, binary) are not supported: " + text);
          t.kind = Token::Int;
          errno = 0;
          t.i = std::strtoll(text.c_str(), nullptr, 10);
          if (errno == ERANGE) fail(line, "integer literal out of range: " + text);
        }
        advance(q - pos);
      } else if (is_name_start(c)) {
        size_t q = pos;
        while (q < src.size() && is_name_char(src[q])) ++q;
        t.kind = Token::Name;
        t.s = src.substr(pos, q - pos);
        advance(q - pos);
      } else if (c == '\'' || c == '"') {
        size_t q = pos + 1;
        while (q < src.size() && src[q] != c) q += src[q] == '\\' ? 2 : 1;
        if (q >= src.size()) fail(line, "unterminated string literal");
        t.kind = Token::Str;
        t.s = unescape(std::string_view(src).substr(pos + 1, q - pos - 1), line);
        advance(q + 1 - pos);
      } else {
        static const char* const ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                          "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
        const char* op = nullptr;
        for (const char* o : ops)
          if (at(o)) {
            op = o;
            break;
          }
        if (!op) fail(line, std::string("unexpected character '") + c + "' in a tag");
        t.kind = Token::Op;
        t.s = op;
        advance(std::strlen(op));
        if (t.s == "(" || t.s == "[" || t.s == "{") {
          balance.push_back(t.s == "(" ? ')' : t.s == "[" ? ']' : '}');
        } else if (t.s == ")" || t.s == "]" || t.s == "}") {
          if (balance.empty() || balance.back() != t.s[0]) fail(line, "unexpected '" + t.s + "'");
          balance.pop_back();
        }
      }
      seg.tokens.push_back(std::move(t));
    }
  }

  void run() {
    for (;;) {
      size_t at_tag = std::string::npos;
      for (size_t p = src.find('{', pos); p != std::string::npos; p = src.find('{', p + 1))
        if (p + 1 < src.size() && (src[p + 1] == '{' || src[p + 1] == '%' || src[p + 1] == '#')) {
          at_tag = p;
          break;
        }
      const int text_line = line;
      if (at_tag == std::string::npos) {
        std::string text = src.substr(pos);
        advance(src.size() - pos);
        if (!text.empty()) out.push_back(Segment{Segment::Text, text_line, std::move(text), {}});
        return;
      }
      std::string text = src.substr(pos, at_tag - pos);
      advance(at_tag - pos);
      const char kind = src[pos + 1];
      const char sign = pos + 2 < src.size() && (src[pos + 2] == '-' || src[pos + 2] == '+') ? src[pos + 2] : 0;
      // {% raw %}: the text up to {% endraw %}, verbatim.
      if (kind == '%') {
        size_t p = pos + 2 + (sign ? 1 : 0);
        while (p < src.size() && py_space_len(src, p)) p += py_space_len(src, p);
        if (src.compare(p, 3, "raw") == 0 && !(p + 3 < src.size() && is_name_char(src[p + 3]))) {
          emit_text(std::move(text), sign, true, text_line);
          advance(p + 3 - pos);
          skip_space();
          if (!block_end('%')) fail(line, "expected '%}' after 'raw'");
          const int raw_line = line;
          std::string body;
          for (;;) {
            const size_t e = src.find("{%", pos);
            if (e == std::string::npos) fail(raw_line, "missing end of raw directive");
            size_t q = e + 2;
            const char esign = q < src.size() && (src[q] == '-' || src[q] == '+') ? src[q] : 0;
            if (esign) ++q;
            while (q < src.size() && py_space_len(src, q)) q += py_space_len(src, q);
            if (src.compare(q, 6, "endraw") == 0) {
              body += src.substr(pos, e - pos);
              advance(q + 6 - pos);
              skip_space();
              emit_text(std::move(body), esign, true, raw_line);
              if (!block_end('%')) fail(line, "expected '%}' after 'endraw'");
              break;
            }
            body += src.substr(pos, e + 2 - pos);
            advance(e + 2 - pos);
          }
          continue;
        }
      }
      emit_text(std::move(text), sign, kind != '{', text_line);
      advance(2 + (sign ? 1 : 0));
      if (kind == '#') {
        const int start = line;
        for (;;) {
          const size_t e = src.find("#}", pos);
          if (e == std::string::npos) fail(start, "missing end of comment tag");
          const size_t s = e > pos && (src[e - 1] == '-' || src[e - 1] == '+') ? e - 1 : e;
          advance(s - pos);
          if (!block_end('#')) fail(line, "bad comment end");
          break;
        }
        continue;
      }
      Segment seg{kind == '{' ? Segment::Var : Segment::Block, line, "", {}};
      tokens(seg, kind == '{');
      if (seg.tokens.empty())
        fail(seg.line, kind == '{' ? "expected an expression in '{{ }}'" : "expected a tag name in '{% %}'");
      out.push_back(std::move(seg));
    }
  }
};

}  // namespace

std::vector<Segment> scan(std::string_view source) {
  for (size_t i = 0; i < source.size();) {
    const int n = utf8_sequence_length(source.substr(i));
    if (n <= 0) fail(1, "template is not valid UTF-8 (at byte " + std::to_string(i) + ")");
    i += size_t(n);
  }
  Scanner sc;
  // Newlines normalised to \n; one trailing newline dropped (keep_trailing_newline=False).
  sc.src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      sc.src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      sc.src += source[i];
    }
  }
  if (!sc.src.empty() && sc.src.back() == '\n') sc.src.pop_back();
  sc.run();
  return std::move(sc.out);
}

}  // namespace llmk::jinja
