// Unicode helpers for the tokenizer: UTF-8 decoding (invalid bytes -> U+FFFD, as llama.cpp),
// encoding, the categories the pre-tokenizer needs (\p{L}, \p{N}, \s) and the pre-tokenizer
// splits themselves (unicode.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llmk/utf8.hpp"

namespace llmk::unicode {

struct CodepointRange {
  uint32_t first, last;  // inclusive
};
extern const CodepointRange kLetterRanges[];  // general category L*
extern const size_t kLetterRanges_count;
extern const CodepointRange kNumberRanges[];  // general category N*
extern const size_t kNumberRanges_count;

bool is_letter(uint32_t cp);
bool is_number(uint32_t cp);
// The White_Space property: U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029,
// 202F, 205F, 3000 (what \s means in the pre-tokenizer regexes).
bool is_whitespace(uint32_t cp);

// Decodes UTF-8; each maximal ill-formed subpart (Unicode's "substitution of maximal
// subparts", as Python's errors="replace": a bad lead byte, or the valid start of a sequence
// cut short) becomes one U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);
using llmk::utf8_sequence_length;  // llmk/utf8.hpp
// For s whose start is not valid (utf8_sequence_length(s) < 0): the length of its maximal
// ill-formed subpart, 1..3.
size_t utf8_invalid_length(std::string_view s);

// GPT-2's pre-tokenizer regex, done by hand:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over cps[begin, end); appends the end index of each word to `ends`.
void split_gpt2(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends);
// \p{N} first (each number code point a word of its own), then GPT-2's regex on the rest.
void split_digits_then_gpt2(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends);

}  // namespace llmk::unicode
