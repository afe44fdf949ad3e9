// Building the grammar IR (llmk/grammar.hpp): rules, deduplicated byte sets, repetition, UTF-8 code point
// ranges and the JSON lexical rules shared by the front ends.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llmk/grammar.hpp"

namespace llmk::grammar {

// The value of hex digit c (0-9, a-f, A-F), else -1.
inline int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

using Seq = std::vector<GrammarSymbol>;
using CpRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code point ranges
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
// The names of the unconstrained JSON string's rules (Builder::json_string), which the matcher's mask
// walk recognizes; a space keeps them apart from any GBNF rule name.
inline constexpr const char* kJsonCharRule = "json char";
inline constexpr const char* kJsonPlainCharRule = "json plain char";
inline constexpr const char* kJsonStringRule = "json string";

inline bool has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }
inline void add(ByteSet& s, uint8_t b) { s[b >> 6] |= uint64_t(1) << (b & 63); }
inline void add_range(ByteSet& s, int lo, int hi) {
  for (int b = lo; b <= hi; ++b) add(s, uint8_t(b));
}

class Builder {
 public:
  Builder(const char* front_end, const GrammarOptions& o);
  // A new rule with no alternatives yet.
  int32_t rule(const std::string& name);
  void alt(int32_t r, Seq s);
  static GrammarSymbol ref(int32_t r) { return {r, -1}; }
  GrammarSymbol set(const ByteSet& s);
  GrammarSymbol byte(uint8_t b);
  Seq literal(std::string_view bytes);
  // A rule matching `s` repeated between lo and hi times (hi < 0: unbounded).
  GrammarSymbol repeat(const Seq& s, int64_t lo, int64_t hi, const std::string& name);
  GrammarSymbol optional(const Seq& s, const std::string& name) { return repeat(s, 0, 1, name); }
  // One UTF-8 encoded code point in the ranges (surrogates excluded).
  GrammarSymbol codepoints(CpRanges ranges, const std::string& name);
  // JSON lexical rules (each made once): a string's content character, a whole string, a number, an
  // integer, any value, whitespace (empty unless max_whitespace > 0).
  GrammarSymbol json_char();
  GrammarSymbol json_string();
  GrammarSymbol json_number();
  GrammarSymbol json_integer();
  GrammarSymbol json_value();
  GrammarSymbol json_object();
  Seq ws();
  // Refuses (GrammarError) a grammar over its symbol or time budget.
  void check_budget();
  [[noreturn]] void fail(const std::string& where, const std::string& what) const;
  std::shared_ptr<const Grammar> finish(int32_t start);
  Grammar g;

 private:
  const char* front_;
  GrammarOptions o_;
  std::map<ByteSet, int32_t> set_ids_;
  int64_t symbols_ = 0;
  std::chrono::steady_clock::time_point t0_;
  int32_t json_char_ = -1, json_string_ = -1, json_number_ = -1, json_integer_ = -1, json_value_ = -1,
          json_object_ = -1, ws_ = -1;
};

CpRanges complement(CpRanges r);  // over [0, kMaxCodePoint]
CpRanges normalize(CpRanges r);   // sorted, merged

// The regex compiler, shared by grammar_from_regex and JSON Schema's `pattern` / `format`. json_string:
// the text matched is the content of a JSON string, so '"', '\' and control characters are written as
// escapes. Returns a symbol matching the whole regex.
GrammarSymbol compile_regex(Builder& b, std::string_view re, bool json_string, const std::string& where);

// A JSON Schema's values (the json_schema front end, no leading whitespace) as a symbol of b's grammar, so
// that other grammars can embed it; GrammarError as grammar_from_json_schema.
GrammarSymbol compile_json_schema(Builder& b, std::string_view schema_json);

}  // namespace llmk::grammar
