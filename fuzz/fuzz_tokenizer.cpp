// libFuzzer target: Tokenizer::encode on arbitrary bytes, with a small byte-level vocabulary
// (256 byte symbols, merges, whole-word tokens, ChatML and Llama 3 control tokens) and every
// pre-tokenizer. Checks, beyond "no crash": decode(encode(x)) equals x as llama.cpp decodes it
// (unicode::decode_utf8_lenient: a byte that starts no sequence becomes U+FFFD; overlong forms
// and surrogates keep their value), and the streaming decoder gives decode()'s text with each
// ill-formed subpart (such as an encoded surrogate) replaced by U+FFFD.
// Build and run: scripts/fuzz-smoke (corpus: fuzz/corpus/tokenizer).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "llmk/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

using namespace llmk;

static Tokenizer make(PreTokenizer pre) {
  std::vector<std::string> tokens;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string s;
    unicode::append_utf8(s, self ? uint32_t(b) : next++);
    tokens.push_back(s);
  }
  const std::vector<std::string> merges = {"\xc4\xa0 t",
                                           "h e",
                                           "i n",
                                           "\xc4\xa0t he",
                                           "e r",
                                           "\xc3\xa6 \xc2\x97",
                                           "1 2",
                                           "\xc4\xa0 \xc4\xa0",
                                           "\xc4\xa0\xc4\xa0 \xc4\xa0\xc4\xa0",
                                           "\xc4\x8a \xc4\x8a"};
  for (const std::string& m : merges) tokens.push_back(std::string(m).erase(m.find(' '), 1));
  // Words with no merges that make them (llama3 takes them whole) and a newline run.
  for (const char* w : {"\xc4\xa0world", "'S", "123", "\xc4\x8a\xc4\x8a\xc4\x8a"}) tokens.push_back(w);
  std::vector<TokenType> types(tokens.size(), TokenType::normal);
  for (const char* s : {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>"}) {
    tokens.push_back(s);
    types.push_back(TokenType::control);
  }
  return Tokenizer(tokens, merges, types, pre);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer toks[] = {make(PreTokenizer::gpt2),         make(PreTokenizer::digits_then_gpt2),
                                   make(PreTokenizer::llama3),       make(PreTokenizer::qwen2),
                                   make(PreTokenizer::deepseek_llm), make(PreTokenizer::deepseek_coder)};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string want;
  for (uint32_t cp : unicode::decode_utf8_lenient(text)) unicode::append_utf8(want, cp);
  for (const Tokenizer& t : toks) {
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = t.encode(text, special);
      const std::string got = t.decode(ids);
      if (got != want) std::abort();  // round trip broken
      std::string valid;
      for (uint32_t cp : unicode::decode_utf8(got)) unicode::append_utf8(valid, cp);
      StreamDecoder d(t);
      std::string streamed;
      for (int32_t id : ids) streamed += d.push(id);
      if (streamed + d.finish() != valid) std::abort();
    }
  }
  return 0;
}
