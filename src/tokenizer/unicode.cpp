// UTF-8 coding, category lookups and the hand-written GPT-2 pre-tokenizer (see unicode.hpp).
// The splitter follows the regex's alternatives in order at each position, which is what a
// backtracking regex engine does for this pattern: the first alternative that matches wins.
#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <iterator>

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
  const CodepointRange* it = std::upper_bound(r, end, cp,
                                              [](uint32_t c, const CodepointRange& x) { return c < x.first; });
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
bool is_punctuation(uint32_t cp) { return in_ranges(kPunctuationRanges, kPunctuationRanges_count, cp); }
bool is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
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

std::vector<uint32_t> decode_utf8_lenient(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint8_t b0 = uint8_t(s[i]);
    const size_t len = b0 < 0x80          ? 1
                       : (b0 & 0x40) == 0 ? 0
                       : (b0 & 0x20) == 0 ? 2
                       : (b0 & 0x10) == 0 ? 3
                       : (b0 & 0x08) == 0 ? 4
                                          : 0;
    bool ok = len > 0 && len <= s.size() - i;
    uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (uint8_t(s[i + k]) & 0xC0) == 0x80;
      cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
    }
    if (!ok || cp > 0x10FFFF) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
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

void split_llama3(const std::vector<uint32_t>& cps, size_t begin, size_t end, int max_digits,
                  std::vector<size_t>& ends) {
  auto letter = [&](size_t i) { return i < end && is_letter(cps[i]); };
  auto number = [&](size_t i) { return i < end && is_number(cps[i]); };
  auto space = [&](size_t i) { return i < end && is_whitespace(cps[i]); };
  auto other = [&](size_t i) { return i < end && !is_whitespace(cps[i]) && !is_letter(cps[i]) && !is_number(cps[i]); };
  auto newline = [&](size_t i) { return i < end && (cps[i] == '\r' || cps[i] == '\n'); };
  // Only A-Z lowercase to the contraction letters (no other code point has a simple lowercase
  // mapping onto s, t, r, e, v, m, l or d).
  auto lower = [](uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; };
  size_t prev = begin;  // a word ends only where it is not empty
  auto add = [&](size_t e) {
    if (e > prev) ends.push_back(e);
    prev = e;
  };
  size_t pos = begin;
  while (pos < end) {
    const uint32_t c = cps[pos];
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'' && pos + 1 < end) {
      const uint32_t n1 = lower(cps[pos + 1]);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        add(pos += 2);
        continue;
      }
      if (pos + 2 < end) {
        const uint32_t n2 = lower(cps[pos + 2]);
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          add(pos += 3);
          continue;
        }
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!newline(pos) && !number(pos) && (letter(pos) || letter(pos + 1))) {
      ++pos;
      while (letter(pos)) ++pos;
      add(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (number(pos)) {
      for (size_t first = pos; number(pos);)
        if (++pos - first >= size_t(max_digits)) add(first = pos);
      add(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (a lone space at the end counts as a match, as in llama.cpp)
    const size_t q = c == ' ' ? pos + 1 : pos;
    if (q == end || other(q)) {
      pos = q;
      while (other(pos)) ++pos;
      while (newline(pos)) ++pos;
      add(pos);
      continue;
    }
    // \s*[\r\n]+ up to the last newline of the whitespace run, else \s+(?!\S), else \s+
    size_t n = 0, after_newline = 0;
    for (; space(pos + n); ++n)
      if (newline(pos + n)) after_newline = pos + n + 1;
    if (after_newline > 0) pos = after_newline;
    else if (n > 1 && pos + n < end) pos += n - 1;
    else pos += std::max<size_t>(n, 1);
    add(pos);
  }
}

namespace {
// The letter class of DeepSeek LLM's regex (its tokenizer.json, as llama.cpp's
// LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM spells it), as sorted inclusive ranges.
constexpr CodepointRange kDeepSeekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// [!-/:-~！-／：-～‘-‟　-。] (U+3000 itself is whitespace: never in the class).
constexpr CodepointRange kDeepSeekPunct[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
                                             {0x3001, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};

bool deepseek_letter(uint32_t cp) { return in_ranges(kDeepSeekLetters, std::size(kDeepSeekLetters), cp); }
bool deepseek_punct(uint32_t cp) { return in_ranges(kDeepSeekPunct, std::size(kDeepSeekPunct), cp); }
// [一-龥ࠀ-一가-퟿]: U+0800..U+9FA5 and U+AC00..U+D7FF, less the whitespace in them.
bool deepseek_cjk(uint32_t cp) {
  return ((cp >= 0x800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF)) && !is_whitespace(cp);
}
bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// One regex of the list: each piece (ends, the pieces' end indices from `begin`) becomes its
// matches and the gaps between them. match(p, e) is the length of the match at p within a
// piece ending at e, 0 for none.
template <class Match>
void refine(const std::vector<uint32_t>& cps, size_t begin, std::vector<size_t>& ends, Match match) {
  std::vector<size_t> out;
  out.reserve(ends.size());
  size_t start = begin;
  for (size_t e : ends) {
    size_t gap = start;
    for (size_t p = start; p < e;) {
      const size_t n = match(cps, p, e);
      if (n == 0) {
        ++p;
        continue;
      }
      if (p > gap) out.push_back(p);
      out.push_back(p += n);
      gap = p;
    }
    if (gap < e) out.push_back(e);
    start = e;
  }
  ends = std::move(out);
}

size_t match_newline(const std::vector<uint32_t>& cps, size_t p, size_t) { return is_newline(cps[p]) ? 1 : 0; }
// \s?[class]+ (the class holds no whitespace, so \s? gives the space back only on failure)
template <bool (*In)(uint32_t)>
size_t match_space_run(const std::vector<uint32_t>& cps, size_t p, size_t e) {
  size_t q = p;
  if (is_whitespace(cps[q]) && q + 1 < e && In(cps[q + 1])) ++q;
  else if (!In(cps[q])) return 0;
  while (q < e && In(cps[q])) ++q;
  return q - p;
}
template <bool (*In)(uint32_t)>
size_t match_run(const std::vector<uint32_t>& cps, size_t p, size_t e) {
  size_t q = p;
  while (q < e && In(cps[q])) ++q;
  return q - p;
}
size_t match_one_number(const std::vector<uint32_t>& cps, size_t p, size_t) { return is_number(cps[p]) ? 1 : 0; }

// \s+$: the whitespace run that ends the piece (done per piece: a match attempt at every
// position of a long run would be quadratic).
void split_trailing_space(const std::vector<uint32_t>& cps, size_t begin, std::vector<size_t>& ends) {
  std::vector<size_t> out;
  out.reserve(ends.size());
  size_t start = begin;
  for (size_t e : ends) {
    size_t t = e;
    while (t > start && is_whitespace(cps[t - 1])) --t;
    if (t > start && t < e) out.push_back(t);
    out.push_back(e);
    start = e;
  }
  ends = std::move(out);
}
}  // namespace

void split_deepseek_llm(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends) {
  if (begin == end) return;
  std::vector<size_t> pieces{end};
  refine(cps, begin, pieces, match_newline);
  refine(cps, begin, pieces, match_space_run<deepseek_letter>);
  refine(cps, begin, pieces, match_space_run<deepseek_punct>);
  split_trailing_space(cps, begin, pieces);
  refine(cps, begin, pieces, match_run<deepseek_cjk>);
  refine(cps, begin, pieces, match_run<is_number>);
  ends.insert(ends.end(), pieces.begin(), pieces.end());
}

void split_deepseek_coder(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends) {
  if (begin == end) return;
  std::vector<size_t> pieces{end};
  refine(cps, begin, pieces, match_newline);
  refine(cps, begin, pieces, match_space_run<is_letter>);
  refine(cps, begin, pieces, match_space_run<is_punctuation>);
  refine(cps, begin, pieces, match_run<deepseek_cjk>);
  refine(cps, begin, pieces, match_one_number);
  ends.insert(ends.end(), pieces.begin(), pieces.end());
}

void pre_split(const std::vector<uint32_t>& cps, PreTokenizer pre, std::vector<size_t>& ends) {
  switch (pre) {
    case PreTokenizer::gpt2: split_gpt2(cps, 0, cps.size(), ends); break;
    case PreTokenizer::digits_then_gpt2: split_digits_then_gpt2(cps, 0, cps.size(), ends); break;
    case PreTokenizer::llama3: split_llama3(cps, 0, cps.size(), 3, ends); break;
    case PreTokenizer::qwen2: split_llama3(cps, 0, cps.size(), 1, ends); break;
    case PreTokenizer::deepseek_llm: split_deepseek_llm(cps, 0, cps.size(), ends); break;
    case PreTokenizer::deepseek_coder: split_deepseek_coder(cps, 0, cps.size(), ends); break;
  }
}

}  // namespace llmk::unicode
