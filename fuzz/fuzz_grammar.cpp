// libFuzzer target: the grammar compilers and the matcher. The first byte picks the front end (JSON
// Schema, regex, GBNF), the rest up to a 0x00 byte is its text, and the bytes after it steer a walk of
// up to 8 tokens over a small vocabulary. Checks, beyond "no crash": only GrammarError escapes a
// compiler, the trie mask equals the per-token oracle at every step, an allowed token is accepted, and
// done() holds once only the end token is allowed.
// Build and run: scripts/fuzz-smoke (corpus: fuzz/corpus/grammar).
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmk/grammar.hpp"

using namespace llmk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = in.find('\0');
  // Short texts: an ambiguous grammar (GBNF "x ::= x x | ...") costs an Earley parser up to cubic time.
  const std::string text = in.substr(0, std::min<size_t>(cut, 512));
  const std::string steer = cut == std::string::npos ? "" : in.substr(cut + 1);
  GrammarOptions o;
  o.max_symbols = 20000;
  o.max_whitespace = data[0] & 0x30 ? 1 : 0;
  std::shared_ptr<const Grammar> g;
  try {
    switch (data[0] % 3) {
      case 0: g = grammar_from_json_schema(text, o); break;
      case 1: g = grammar_from_regex(text, o); break;
      default: g = grammar_from_gbnf(text, o); break;
    }
  } catch (const GrammarError&) {
    return 0;
  }
  static const std::shared_ptr<const TokenVocab> vocab = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 128; ++b) t.push_back(std::string(1, char(b)));
    for (const char* s :
         {"{\"", "\":", "\",\"", "true", "null", "12", "\xc3\xa9", "\xe2\x82", "ab", "a\"", "\\n", "[]"})
      t.push_back(s);
    t.push_back("");  // the end token
    return std::make_shared<const TokenVocab>(t, std::vector<int32_t>{int32_t(t.size()) - 1});
  }();
  GrammarMatcher m(g, vocab);
  const size_t words = size_t((vocab->size() + 31) / 32);
  std::vector<uint32_t> fast(words), slow(words);
  for (size_t step = 0; step < 8; ++step) {
    m.fill_mask(fast.data());
    m.fill_mask_slow(slow.data());
    if (fast != slow) std::abort();
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab->size(); ++t)
      if ((fast[size_t(t >> 5)] >> (t & 31)) & 1) allowed.push_back(t);
    if (allowed.empty()) return 0;
    if (allowed.size() == 1 && allowed[0] == vocab->size() - 1 && !m.done() && !m.complete()) std::abort();
    const int32_t t = allowed[(step < steer.size() ? uint8_t(steer[step]) : step) % allowed.size()];
    if (!m.accept_token(t)) std::abort();
    if (m.done()) return 0;
  }
  return 0;
}
