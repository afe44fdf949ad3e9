// Structured output: grammars over bytes, a token trie over a vocabulary, and per-step token masks.
//
// Every front end compiles to one IR, a context-free grammar over bytes (Grammar):
//   grammar_from_json_schema  JSON Schema, the OpenAI strict-mode subset (docs/structured_output.md lists
//                             the keywords); any other keyword is a GrammarError naming it and its JSON
//                             pointer (fail closed: a keyword is never ignored)
//   grammar_json_object       any JSON object (response_format {"type": "json_object"})
//   grammar_from_regex        a regular expression, matched whole (no lookaround, no backreferences)
//   grammar_from_choice       one of a list of strings
//   grammar_from_gbnf         llama.cpp's GBNF text, start rule `root`
//   grammar_for_tool_calls    tool calls in a chat template's format, arguments of each tool's schema
// JSON output is compact: no whitespace between tokens unless GrammarOptions::max_whitespace > 0, and then
// at most that many whitespace bytes at each place JSON allows them (a model cannot loop on spaces).
// GrammarMatcher runs an Earley parser over the grammar's bytes. Its mask for the next token walks the
// vocabulary's token trie (TokenVocab, built once per tokenizer) depth first, advancing the parser one byte
// per trie edge and skipping a whole subtree as soon as its first byte is refused.
// Errors: bad input is a GrammarError (an llmk::InvalidArgument) that names the front end, the place
// (keyword and JSON pointer, GBNF line, regex offset) and the value. Compiled grammars are immutable and may
// be shared between threads; a GrammarMatcher is used by one thread at a time.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "llmk/constraint.hpp"
#include "llmk/error.hpp"

namespace llmk {

class Tokenizer;

class GrammarError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// A symbol is a rule reference (rule >= 0) or a byte set (set >= 0), never both.
struct GrammarSymbol {
  int32_t rule = -1;
  int32_t set = -1;
};
using ByteSet = std::array<uint64_t, 4>;  // bit b set: byte b matches

// rules[r] is a list of alternatives, each a sequence of symbols (empty: matches the empty string).
struct Grammar {
  std::vector<ByteSet> sets;
  std::vector<std::vector<std::vector<GrammarSymbol>>> rules;
  std::vector<std::string> names;  // [rules], for messages
  int32_t start = 0;
  std::vector<uint8_t> nullable;  // [rules]: the rule matches the empty string (set by finalize())
  // Checks every reference and computes `nullable`; GrammarError for a rule or set index out of range.
  void finalize();
  int64_t size() const;  // symbols in all alternatives
};

struct GrammarOptions {
  int32_t max_whitespace = 0;              // JSON: whitespace bytes allowed at each place, >= 0
  double max_compile_seconds = 1.0;        // a grammar taking longer is refused (GrammarError with its size)
  int64_t max_symbols = int64_t(1) << 22;  // a grammar with more symbols is refused likewise
};

std::shared_ptr<const Grammar> grammar_from_json_schema(std::string_view schema_json, const GrammarOptions& o = {});
std::shared_ptr<const Grammar> grammar_json_object(const GrammarOptions& o = {});
std::shared_ptr<const Grammar> grammar_from_regex(std::string_view regex, const GrammarOptions& o = {});
std::shared_ptr<const Grammar> grammar_from_choice(const std::vector<std::string>& choices,
                                                   const GrammarOptions& o = {});
std::shared_ptr<const Grammar> grammar_from_gbnf(std::string_view gbnf, const GrammarOptions& o = {});

// Tool calls forced by an OpenAI tool_choice ("required" or a named function): a reply of between
// min_calls and max_calls (< 0: no bound) calls, each one of `tools`, written
//   begin  call_open NAME name_close ARGS call_close  separator  call_open ...  end
// where NAME is the tool's name (a JSON string when name_json, else as is) and ARGS a JSON value of the
// tool's `parameters` schema (the json_schema front end; an empty schema text: any JSON object).
// GrammarError for an empty tool list, bad counts, an empty name (or, unquoted, one with a control
// character), or a tool's schema (the message names the tool's index and name).
// With reasoning, the calls may follow a block <think>TEXT</think> and up to 4 whitespace bytes, where
// TEXT is any bytes without "</think>" (a reasoning model thinks before it calls).
struct ToolCallSyntax {
  std::string begin, call_open, name_close, call_close, separator, end;
  bool name_json = true;
  bool reasoning = false;
};
struct ToolSchema {
  std::string name;
  std::string parameters;  // JSON Schema text
};
std::shared_ptr<const Grammar> grammar_for_tool_calls(const std::vector<ToolSchema>& tools,
                                                      const ToolCallSyntax& syntax, int32_t min_calls,
                                                      int32_t max_calls, const GrammarOptions& o = {});

// The vocabulary as a byte trie, in depth-first order. Tokens with no bytes (control tokens, empty
// pieces) are never allowed by a grammar; `eog` tokens are allowed exactly where the text is complete.
class TokenVocab {
 public:
  // token_bytes[t]: token t's bytes, "" for a token a grammar never produces. eog: ids in [0, size).
  TokenVocab(const std::vector<std::string>& token_bytes, std::vector<int32_t> eog);
  // The tokenizer's tokens (control tokens excluded) and its end-of-generation set.
  static std::shared_ptr<const TokenVocab> of(const Tokenizer& tok);
  int32_t size() const { return n_; }
  const std::string& bytes(int32_t t) const { return bytes_[size_t(t)]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  int64_t nodes() const { return int64_t(byte_.size()); }

 private:
  friend class GrammarMatcher;
  int32_t n_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;
  // Trie nodes in depth-first order (the root excluded): the edge byte, depth (1 = first byte), the index
  // one past the node's subtree, and its tokens as [tok_begin, tok_end) of `toks_`.
  std::vector<uint8_t> byte_;
  std::vector<int32_t> depth_, skip_, tok_begin_;
  std::vector<int32_t> toks_;
};

// One sequence's parse state. The mask is a bitset over the vocabulary: bit t of word t / 32.
class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> vocab);
  GrammarMatcher(const GrammarMatcher&);
  GrammarMatcher& operator=(const GrammarMatcher&);
  ~GrammarMatcher();
  // Advances over the bytes; false (state unchanged) when the grammar refuses them.
  bool accept_bytes(std::string_view bytes);
  // Advances over token t (its bytes; an eog token only where the text is complete, and then done()).
  bool accept_token(int32_t t);
  bool complete() const;  // the text so far is a sentence of the grammar
  bool done() const;      // complete, and no byte may follow (or an eog token was accepted)
  // mask: (size + 31) / 32 words, every bit written. The fast path (trie walk).
  void fill_mask(uint32_t* mask);
  // The oracle: each token's bytes tried on its own from the current state.
  void fill_mask_slow(uint32_t* mask) const;
  int32_t vocab_size() const { return vocab_->size(); }

 private:
  struct Impl;
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::unique_ptr<Impl> p_;
};

// A grammar with a vocabulary, as the engine's Constraint (llmk/constraint.hpp).
class GrammarConstraint : public Constraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> vocab);
  std::unique_ptr<ConstraintState> start() const override;
  const std::shared_ptr<const Grammar>& grammar() const { return g_; }

 private:
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenVocab> vocab_;
};

// Compiled grammars by (kind, text), e.g. ("json_schema", schema text); thread-safe; at most `capacity`
// entries (the oldest go first). compile() returns the cached grammar or calls `make` and keeps its result.
class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 256) : capacity_(capacity) {}
  template <class F>
  std::shared_ptr<const Grammar> get(const std::string& kind, const std::string& text, F&& make) {
    const std::string key = kind + '\0' + text;
    {
      std::lock_guard<std::mutex> lk(m_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    std::shared_ptr<const Grammar> g = make();
    std::lock_guard<std::mutex> lk(m_);
    if (map_.size() >= capacity_ && !order_.empty()) {
      map_.erase(order_.front());
      order_.erase(order_.begin());
    }
    if (map_.emplace(key, g).second) order_.push_back(key);
    return g;
  }

 private:
  size_t capacity_;
  std::mutex m_;
  std::map<std::string, std::shared_ptr<const Grammar>> map_;
  std::vector<std::string> order_;
};

}  // namespace llmk
