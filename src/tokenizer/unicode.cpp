// UTF-8 coding, category lookups and the hand-written GPT-2 pre-tokenizer (see unicode.hpp).
// The splitter follows the regex's alternatives in order at each position, which is what a
// backtracking regex engine does for this pattern: the first alternative that matches wins.
#include "tokenizer/unicode.hpp"

#include <algorithm>

namespace llmk {

int utf8_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  const uint8_t b0 = uint8_t(s[0]);
  if (b0 < 0x80) return 1;
  // Well-formed sequences (Unicode Table 3-7): the lead byte fixes the length and the range
  // of the second byte (this excludes overlong forms, surrogates and > U+10FFFF).
  int len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
  else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
  else return -1;
  for (int k = 1; k < len; ++k) {
    if (size_t(k) >= s.size()) return 0;  // a valid start, cut short
    const uint8_t b = uint8_t(s[k]);
    if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return -1;
  }
  return len;
}

}  // namespace llmk

namespace llmk::unicode {

static bool in_ranges(const CodepointRange* r, size_t n, uint32_t cp) {
  const CodepointRange* end = r + n;
  const CodepointRange* it = std::upper_bound(r, end, cp, [](uint32_t c, const CodepointRange& x) { return c < x.first; });
  return it != r && cp <= (it - 1)->last;
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetterRanges, kLetterRanges_count, cp);
}
bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, kNumberRanges_count, cp);
}
bool is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

size_t utf8_invalid_length(std::string_view s) {
  size_t k = 1;
  while (k < 3 && k < s.size() && utf8_sequence_length(s.substr(0, k + 1)) == 0) ++k;
  return k;
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const int len = utf8_sequence_length(s.substr(i));
    if (len <= 0) {  // invalid, or valid but cut short by the end of the input
      out.push_back(0xFFFD);
      i += len < 0 ? utf8_invalid_length(s.substr(i)) : s.size() - i;
      continue;
    }
    const uint8_t b0 = uint8_t(s[i]);
    uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

void split_gpt2(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends) {
  enum Class { kNone, kSpace, kLetter, kNumber, kOther };
  auto cls = [&](size_t i) {
    if (i >= end) return kNone;
    const uint32_t c = cps[i];
    return is_whitespace(c) ? kSpace : is_letter(c) ? kLetter : is_number(c) ? kNumber : kOther;
  };
  auto at = [&](size_t i) { return i < end ? cps[i] : 0u; };
  size_t pos = begin;
  while (pos < end) {
    const uint32_t c = cps[pos];
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c == '\'') {
      const uint32_t n1 = at(pos + 1), n2 = at(pos + 2);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        ends.push_back(pos += 2);
        continue;
      }
      if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
        ends.push_back(pos += 3);
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class
    const size_t start = (c == ' ') ? pos + 1 : pos;
    const Class k = cls(start);
    if (k == kLetter || k == kNumber || k == kOther) {
      size_t p = start + 1;
      while (cls(p) == k) ++p;
      ends.push_back(pos = p);
      continue;
    }
    // \s+(?!\S): a whitespace run not followed by non-space; it gives back its last
    // character when something follows (which then starts the next word), else \s+ takes all.
    size_t n = 0;
    while (cls(pos + n) == kSpace) ++n;
    if (n > 1 && pos + n < end) {
      ends.push_back(pos += n - 1);
      continue;
    }
    ends.push_back(pos += std::max<size_t>(n, 1));
  }
}

void split_digits_then_gpt2(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends) {
  size_t run = begin;
  for (size_t i = begin; i < end; ++i) {
    if (!is_number(cps[i])) continue;
    if (run < i) split_gpt2(cps, run, i, ends);
    ends.push_back(i + 1);
    run = i + 1;
  }
  if (run < end) split_gpt2(cps, run, end, ends);
}

}  // namespace llmk::unicode
