// Unicode helpers for the tokenizer: UTF-8 decoding (invalid bytes -> U+FFFD, as llama.cpp),
// encoding, the categories the pre-tokenizer needs (\p{L}, \p{N}, \s) and the pre-tokenizer
// splits themselves (unicode.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llmk/tokenizer.hpp"
#include "llmk/utf8.hpp"

namespace llmk::unicode {

struct CodepointRange {
  uint32_t first, last;  // inclusive
};
extern const CodepointRange kLetterRanges[];  // general category L*
extern const size_t kLetterRanges_count;
extern const CodepointRange kNumberRanges[];  // general category N*
extern const size_t kNumberRanges_count;
extern const CodepointRange kPunctuationRanges[];  // general category P*
extern const size_t kPunctuationRanges_count;

bool is_letter(uint32_t cp);
bool is_number(uint32_t cp);
bool is_punctuation(uint32_t cp);
// The White_Space property: U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029,
// 202F, 205F, 3000 (what \s means in the pre-tokenizer regexes).
bool is_whitespace(uint32_t cp);

// Decodes UTF-8; each maximal ill-formed subpart (Unicode's "substitution of maximal
// subparts", as Python's errors="replace": a bad lead byte, or the valid start of a sequence
// cut short) becomes one U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view s);
// Decodes UTF-8 as llama.cpp's unicode_cpts_from_utf8 does before its BPE pre-tokenizers: the
// lead byte fixes the length and the following bytes need only be continuation bytes
// (overlong forms and surrogates decode to their value); a byte that starts no such sequence
// becomes one U+FFFD and decoding resumes at the next byte. A sequence above U+10FFFF (where
// llama.cpp aborts) is treated as such a byte too.
std::vector<uint32_t> decode_utf8_lenient(std::string_view s);
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
// Llama 3's pre-tokenizer regex (max_digits = 3) and Qwen2's (max_digits = 1):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// as llama.cpp's unicode_regex_split_custom_llama3 / _qwen2 implement it (where the two differ
// from the regex, llama.cpp is followed).
void split_llama3(const std::vector<uint32_t>& cps, size_t begin, size_t end, int max_digits,
                  std::vector<size_t>& ends);
// DeepSeek's pre-tokenizers: llama.cpp runs a list of regexes one after another, each splitting
// every piece the previous ones left into its matches (leftmost first, as std::regex_search
// finds them) and the gaps between them. deepseek-llm (DeepSeek LLM 7B/67B):
//   [\r\n] ; \s?[DeepSeek's letters]+ ; \s?[!-/:-~！-／：-～‘-‟　-。]+ ; \s+$ ; [一-龥ࠀ-一가-퟿]+ ;
//   \p{N}+
// deepseek-coder (DeepSeek Coder 1.3B-33B):
//   [\r\n] ; \s?\p{L}+ ; \s?\p{P}+ ; [一-龥ࠀ-一가-퟿]+ ; \p{N}
// A non-ASCII \s (U+3000 too) matches no bracketed class: llama.cpp turns it into U+000B first.
void split_deepseek_llm(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends);
void split_deepseek_coder(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>& ends);
// The words of all of cps under pre-tokenizer pre: appends each word's end to ends.
void pre_split(const std::vector<uint32_t>& cps, PreTokenizer pre, std::vector<size_t>& ends);

}  // namespace llmk::unicode
