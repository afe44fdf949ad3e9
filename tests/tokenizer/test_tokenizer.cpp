// Tokenizer: pre-tokenizer splits (GPT-2, digits-first, Llama 3, Qwen2, DeepSeek), llama.cpp's
// UTF-8 decoding, BPE merge order, special tokens, byte fallback, decode round trips, the
// streaming decoder, ChatML rendering, pre-tokenizer names / add_bos / end-of-generation ids
// from GGUF metadata; llama.cpp's vocabulary files with their test vectors (skipped when not
// fetched); and on the real SmolLM2 vocabulary (skipped when the model is missing) token ids
// produced by llama.cpp (llama-cpp-python 0.3.16 and 0.3.36 agree) for the same texts.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "llmk/tokenizer.hpp"
#include "llmk/utf8.hpp"
#include "tests/common/testutil.hpp"
#include "tokenizer/unicode.hpp"

namespace llmk {
namespace {

std::vector<std::string> split(std::string_view text, PreTokenizer pre) {
  const std::vector<uint32_t> cps = unicode::decode_utf8_lenient(text);
  std::vector<size_t> ends;
  unicode::pre_split(cps, pre, ends);
  std::vector<std::string> words;
  size_t begin = 0;
  for (size_t end : ends) {
    std::string w;
    for (size_t i = begin; i < end; ++i) unicode::append_utf8(w, cps[i]);
    words.push_back(w);
    begin = end;
  }
  EXPECT_EQ(begin, cps.size()) << "the words must cover the text";
  return words;
}
using W = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Regex) {
  const auto g = PreTokenizer::gpt2;
  EXPECT_EQ(split("Hello world", g), (W{"Hello", " world"}));
  EXPECT_EQ(split("it's we'll I'M", g), (W{"it", "'s", " we", "'ll", " I", "'", "M"}));  // contractions are lower case
  EXPECT_EQ(split("  x", g), (W{" ", " x"}));  // \s+(?!\S) leaves the last space to the word
  EXPECT_EQ(split("a  ", g), (W{"a", "  "}));  // trailing run: \s+ takes it all
  EXPECT_EQ(split("x\n\n y", g), (W{"x", "\n\n", " y"}));
  EXPECT_EQ(split("abc123 45", g), (W{"abc", "123", " 45"}));
  EXPECT_EQ(split("(x)!! ?!", g), (W{"(", "x", ")!!", " ?!"}));
  EXPECT_EQ(split("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", g), (W{"caf\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac"}));
  // U+00A0 is whitespace but not ' ': it does not join the next word.
  EXPECT_EQ(split("a\xc2\xa0"
                  "b",
                  g),
            (W{"a", "\xc2\xa0", "b"}));
  // A combining mark (U+0301, category Mn) is neither letter nor number.
  EXPECT_EQ(split("e\xcc\x81t", g), (W{"e", "\xcc\x81", "t"}));
  EXPECT_EQ(split("", g), W{});
}

TEST(PreTokenizer, DigitsThenGpt2) {
  const auto d = PreTokenizer::digits_then_gpt2;
  EXPECT_EQ(split("abc123 45", d), (W{"abc", "1", "2", "3", " ", "4", "5"}));
  // Other \p{N}: Arabic-Indic digits (Nd), Roman numeral (Nl), vulgar fraction (No).
  EXPECT_EQ(split("\xd9\xa3\xd9\xa4x\xe2\x85\xab\xc2\xbd", d),
            (W{"\xd9\xa3", "\xd9\xa4", "x", "\xe2\x85\xab", "\xc2\xbd"}));
}

TEST(PreTokenizer, Llama3Regex) {
  const auto l = PreTokenizer::llama3;
  EXPECT_EQ(split("Hello world", l), (W{"Hello", " world"}));
  EXPECT_EQ(split("it's IT'S we'LL", l), (W{"it", "'s", " IT", "'S", " we", "'LL"}));  // contractions in any case
  EXPECT_EQ(split("12345 678", l), (W{"123", "45", " ", "678"}));                      // numbers in threes
  EXPECT_EQ(split("x\n\n y", l), (W{"x", "\n\n", " y"}));
  EXPECT_EQ(split("a  \n  b", l), (W{"a", "  \n", " ", " b"}));  // \s*[\r\n]+ ends at the last newline
  EXPECT_EQ(split("(x)!!\n\n?", l), (W{"(x", ")!!\n\n", "?"}));  // one non-letter joins the letters after it
  EXPECT_EQ(split("a\xc2\xa0"
                  "b",
                  l),
            (W{"a",
               "\xc2\xa0"
               "b"}));                                       // so does U+00A0
  EXPECT_EQ(split("e\xcc\x81t", l), (W{"e", "\xcc\x81t"}));  // and a combining mark
  EXPECT_EQ(split("\t\tx", l), (W{"\t", "\tx"}));
  EXPECT_EQ(split("a ", l), (W{"a", " "}));
  EXPECT_EQ(split("\r\nab", l), (W{"\r\n", "ab"}));  // a newline never joins the letters
  EXPECT_EQ(split("", l), W{});
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
  const auto q = PreTokenizer::qwen2;
  EXPECT_EQ(split("abc12345 6", q), (W{"abc", "1", "2", "3", "4", "5", " ", "6"}));
  EXPECT_EQ(split("it'S x\n\n y", q), (W{"it", "'S", " x", "\n\n", " y"}));
}

TEST(PreTokenizer, DeepSeekRegexLists) {
  const std::string text = "Hello world, 123 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e!\n";
  const std::string cjk = "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e";
  EXPECT_EQ(split(text, PreTokenizer::deepseek_coder),
            (W{"Hello", " world", ",", " ", "1", "2", "3", " ", cjk, "!", "\n"}));
  EXPECT_EQ(split(text, PreTokenizer::deepseek_llm), (W{"Hello", " world", ",", " ", "123", " ", cjk, "!", "\n"}));
  EXPECT_EQ(split("a , ", PreTokenizer::deepseek_llm), (W{"a", " ,", " "}));
  EXPECT_EQ(split("x\r\n\n", PreTokenizer::deepseek_coder), (W{"x", "\r", "\n", "\n"}));
  EXPECT_EQ(split("", PreTokenizer::deepseek_llm), W{});
}

TEST(Unicode, LenientUtf8DecodingAsLlamaCpp) {
  using V = std::vector<uint32_t>;
  const uint32_t r = 0xFFFD;
  EXPECT_EQ(unicode::decode_utf8_lenient("a\xf0\x9f\x99\x82"), (V{'a', 0x1F642}));
  EXPECT_EQ(unicode::decode_utf8_lenient("\xe2\x82"), (V{r, r}));  // cut short: one U+FFFD a byte
  EXPECT_EQ(unicode::decode_utf8_lenient("\xe2\x82"
                                         "a"),
            (V{r, r, 'a'}));
  EXPECT_EQ(unicode::decode_utf8_lenient("\xc0\x80"), (V{0}));  // overlong: its value
  EXPECT_EQ(unicode::decode_utf8_lenient("\xf0\x82\x82\xac"), (V{0x20AC}));
  EXPECT_EQ(unicode::decode_utf8_lenient("\xed\xa0\x80"), (V{0xD800}));          // a surrogate: its value
  EXPECT_EQ(unicode::decode_utf8_lenient("\xf4\x90\x80\x80"), (V{r, r, r, r}));  // above U+10FFFF
  EXPECT_EQ(unicode::decode_utf8_lenient("\xf8\x88\x80\x80\x80\xff\x80"), (V{r, r, r, r, r, r, r}));
}

TEST(Unicode, Utf8DecodingReplacesMaximalSubparts) {
  using V = std::vector<uint32_t>;
  EXPECT_EQ(unicode::decode_utf8("a\xf0\x9f\x99\x82"), (V{'a', 0x1F642}));
  EXPECT_EQ(unicode::decode_utf8("\xff"
                                 "a"),
            (V{0xFFFD, 'a'}));
  EXPECT_EQ(unicode::decode_utf8("\xe6\x97"
                                 "a"),
            (V{0xFFFD, 'a'}));                                                   // cut short: one U+FFFD
  EXPECT_EQ(unicode::decode_utf8("\xc0\xaf"), (V{0xFFFD, 0xFFFD}));              // overlong
  EXPECT_EQ(unicode::decode_utf8("\xed\xa0\x80"), (V{0xFFFD, 0xFFFD, 0xFFFD}));  // surrogate
  EXPECT_EQ(unicode::decode_utf8("\xe6\x97"), (V{0xFFFD}));                      // cut by the end
  EXPECT_TRUE(unicode::is_letter(0x65E5) && unicode::is_number(0x0663) && !unicode::is_letter(0x1F642));
}

// The public llmk/utf8.hpp: well-formed lengths, 0 for a start cut short, -1 for a bad start.
TEST(Unicode, Utf8SequenceLength) {
  EXPECT_EQ(utf8_sequence_length(""), 0);
  EXPECT_EQ(utf8_sequence_length("a\xff"), 1);
  EXPECT_EQ(utf8_sequence_length("\xc3\xa9"), 2);
  EXPECT_EQ(utf8_sequence_length("\xe6\x97\xa5x"), 3);
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x99\x82"), 4);
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x99"), 0);  // cut short
  EXPECT_EQ(utf8_sequence_length("\xff"), -1);
  EXPECT_EQ(utf8_sequence_length("\xc0\xaf"), -1);          // overlong
  EXPECT_EQ(utf8_sequence_length("\xed\xa0\x80"), -1);      // surrogate
  EXPECT_EQ(utf8_sequence_length("\xf4\x90\x80\x80"), -1);  // above U+10FFFF
  EXPECT_EQ(utf8_sequence_length("\xc3"
                                 "a"),
            -1);  // no continuation byte
}

// A small byte-level vocabulary: the 256 byte symbols, then merged pieces.
Tokenizer small_tokenizer(std::vector<std::string> merges, PreTokenizer pre = PreTokenizer::gpt2) {
  std::vector<std::string> tokens;
  uint32_t next = 256;  // GPT-2's map: unprintable bytes go to U+0100.. in order
  for (int b = 0; b < 256; ++b) {
    const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string s;
    unicode::append_utf8(s, self ? uint32_t(b) : next++);
    tokens.push_back(s);
  }
  for (const std::string& m : merges) {
    std::string t = m;
    t.erase(t.find(' '), 1);
    tokens.push_back(t);
  }
  std::vector<TokenType> types(tokens.size(), TokenType::normal);
  tokens.push_back("<|im_start|>");
  types.push_back(TokenType::control);
  tokens.push_back("<|im_end|>");
  types.push_back(TokenType::control);
  tokens.push_back("<tool>");
  types.push_back(TokenType::user_defined);
  return Tokenizer(tokens, merges, types, pre);
}

TEST(Tokenizer, MergesApplyByRankNotPosition) {
  {
    const Tokenizer t = small_tokenizer({"a b", "b c"});
    EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{t.find("ab"), 'c'}));
  }
  {
    const Tokenizer t = small_tokenizer({"b c", "a b"});
    EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{'a', t.find("bc")}));
  }
  {  // runs of one symbol: pairs overlap, and a pair whose right symbol was merged away is stale
    const Tokenizer t = small_tokenizer({"a a", "aa aa"});
    EXPECT_EQ(t.encode("aaaaa"), (std::vector<int32_t>{t.find("aaaa"), 'a'}));
    EXPECT_EQ(t.encode("aaaaaaa"), (std::vector<int32_t>{t.find("aaaa"), t.find("aa"), 'a'}));
  }
  {  // merges build on merges; the space is 'Ġ' (U+0120) in byte-level form
    const Tokenizer t = small_tokenizer({"l l", "h e", "he ll", "hell o", "\xc4\xa0 w"});
    EXPECT_EQ(t.encode("hello w"), (std::vector<int32_t>{t.find("hello"), t.find("\xc4\xa0w")}));
    EXPECT_EQ(t.decode(t.encode("hello w")), "hello w");
  }
}

// The oracle: plain BPE, O(n^2) per word. Repeatedly merge the adjacent pair of lowest rank
// (leftmost among equals) until no pair has a rank.
std::vector<std::string> reference_bpe(const std::string& word, const std::vector<std::string>& merges) {
  std::vector<std::string> sym;
  for (size_t i = 0; i < word.size();) {
    const size_t len = size_t(unicode::utf8_sequence_length(std::string_view(word).substr(i)));
    sym.push_back(word.substr(i, len));
    i += len;
  }
  while (sym.size() > 1) {
    size_t best = merges.size(), at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      for (size_t r = 0; r < best; ++r)
        if (merges[r] == sym[i] + " " + sym[i + 1]) {
          best = r;
          at = i;
          break;
        }
    if (best == merges.size()) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + std::ptrdiff_t(at) + 1);
  }
  return sym;
}

TEST(Tokenizer, MatchesReferenceBpeOnRandomWords) {
  // Random vocabularies: each merge joins two existing tokens (letters a, b, c and earlier
  // merges) into a new one, so merges overlap and nest like trained ones (long runs of one
  // letter, long + short, ...). Words are random strings over the same letters.
  std::mt19937 rng(11);
  for (int vocab = 0; vocab < 20; ++vocab) {
    std::vector<std::string> pieces{"a", "b", "c"}, merges;
    while (merges.size() < 60) {
      const std::string& l = pieces[rng() % pieces.size()];
      const std::string& r = pieces[rng() % std::min<size_t>(pieces.size(), 3 + rng() % 6)];
      if (std::find(pieces.begin(), pieces.end(), l + r) != pieces.end()) continue;
      merges.push_back(l + " " + r);
      pieces.push_back(l + r);
    }
    const Tokenizer t = small_tokenizer(merges);
    for (int iter = 0; iter < 200; ++iter) {
      std::string word;
      const int letters = 1 + int(rng() % 3);
      for (int k = 1 + int(rng() % 48); k > 0; --k) word += char('a' + rng() % letters);
      std::vector<int32_t> want;
      for (const std::string& piece : reference_bpe(word, merges)) want.push_back(t.find(piece));
      ASSERT_EQ(t.encode(word), want) << "vocabulary " << vocab << ", word '" << word << "'";
    }
  }
}

TEST(Tokenizer, SpecialTokens) {
  const Tokenizer t = small_tokenizer({});
  const int32_t im_start = t.find("<|im_start|>"), im_end = t.find("<|im_end|>"), tool = t.find("<tool>");
  EXPECT_EQ(t.encode("<|im_start|>x<|im_end|>"), (std::vector<int32_t>{im_start, 'x', im_end}));
  // Not parsed: CONTROL tokens are plain text; USER_DEFINED ones are always matched.
  const std::vector<int32_t> plain = t.encode("<|im_start|><tool>", false);
  EXPECT_EQ(plain.size(), 13u);
  EXPECT_EQ(plain.back(), tool);
  EXPECT_EQ(t.decode(t.encode("<|im_start|>x")), "<|im_start|>x");
  EXPECT_EQ(t.decode(t.encode("<|im_start|>x"), true), "x");
  EXPECT_TRUE(t.is_eog(im_end));
  EXPECT_FALSE(t.is_eog(im_start));
  EXPECT_THROW(t.piece(-1), InvalidArgument);
  EXPECT_THROW(t.decode(std::vector<int32_t>{t.n_vocab()}), InvalidArgument);
}

TEST(Tokenizer, ByteFallbackRoundTripsAnyUtf8) {
  const Tokenizer t = small_tokenizer({"h e"}, PreTokenizer::digits_then_gpt2);
  std::mt19937 rng(3);
  const uint32_t pool[] = {'a', ' ', '\n', '7', 0xE9, 0x65E5, 0x1F642, 0x0301, 0x00A0, '\'', 's', 0x3000, 0x10FFFF};
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    for (int k = int(rng() % 20); k > 0; --k) unicode::append_utf8(s, pool[rng() % std::size(pool)]);
    EXPECT_EQ(t.decode(t.encode(s, false)), s);
  }
  // Invalid UTF-8 is encoded as U+FFFD, like llama.cpp.
  EXPECT_EQ(t.decode(t.encode("a\xff")), "a\xef\xbf\xbd");
}

// SentencePiece by hand: ids 0..2 <unk> <s> </s>, 3..258 the byte tokens <0x00>..<0xFF>, then
// "▁" 259, "a" 260, "b" 261, "ab" 262 (score -1), "▁a" 263 (-2), "▁ab" 264 (-0.5), "c" 265.
// "ab c" with the space prefix is "▁ab▁c": "ab" (-1) merges before "▁a" (-2), then "▁ab";
// "d" is no token: byte 0x64; a stray 0xFF byte likewise.
TEST(Tokenizer, SentencePieceMergesByScoreWithByteFallback) {
  using V = std::vector<int32_t>;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<TokenType> types = {TokenType::unknown, TokenType::control, TokenType::control};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(TokenType::byte);
  }
  const std::string sp = "\xE2\x96\x81";
  for (const std::string& t :
       {sp, std::string("a"), std::string("b"), std::string("ab"), sp + "a", sp + "ab", std::string("c")}) {
    tokens.push_back(t);
    types.push_back(TokenType::normal);
  }
  std::vector<float> scores(tokens.size(), -10.0f);
  scores[262] = -1.0f;
  scores[263] = -2.0f;
  scores[264] = -0.5f;
  const Tokenizer t = Tokenizer::sentencepiece(tokens, scores, types, true);
  EXPECT_EQ(t.kind(), TokenizerKind::spm);
  EXPECT_EQ(t.encode("ab c"), (V{264, 259, 265}));
  EXPECT_EQ(t.encode("abd"), (V{264, 3 + 0x64}));  // "▁ab", then d as a byte
  EXPECT_EQ(t.encode("a\xff"), (V{263, 3 + 0xff}));
  EXPECT_EQ(t.encode("<s>b"), (V{1, 259, 261}));  // the prefix space again after a special token
  EXPECT_EQ(t.encode(""), V{});                   // no fragment, so no prefix space
  EXPECT_EQ(t.decode(V{264, 259, 265, 3 + 0x64}), " ab cd");
  const Tokenizer no_prefix = Tokenizer::sentencepiece(tokens, scores, types, false);
  EXPECT_EQ(no_prefix.encode("ab c"), (V{262, 259, 265}));
  EXPECT_THROW(Tokenizer::sentencepiece(tokens, std::vector<float>(3), types, true), InvalidArgument);
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  const Tokenizer t = small_tokenizer({});
  const std::vector<int32_t> ids = t.encode("x\xf0\x9f\x99\x82y\xe6\x97\xa5");  // x 🙂 y 日: one token per byte
  ASSERT_EQ(ids.size(), 9u);
  StreamDecoder d(t);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(d.push(id));
  EXPECT_EQ(out, (W{"x", "", "", "", "\xf0\x9f\x99\x82", "y", "", "", "\xe6\x97\xa5"}));
  EXPECT_EQ(d.finish(), "");
  // A character cut short at the end, then an invalid byte in the middle.
  StreamDecoder e(t);
  EXPECT_EQ(e.push(ids[1]), "");
  EXPECT_EQ(e.push(ids[2]), "");
  EXPECT_EQ(e.finish(), "\xef\xbf\xbd");
  EXPECT_EQ(e.push(ids[1]), "");
  EXPECT_EQ(e.push('a'),
            "\xef\xbf\xbd"
            "a");
}

TEST(Chat, ChatMlRendering) {
  const std::vector<ChatMessage> msgs{{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
  EXPECT_EQ(render_chatml(msgs, true, "Be brief."),
            "<|im_start|>system\nBe "
            "brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> sys{{"system", "S"}, {"user", "U"}};
  EXPECT_EQ(render_chatml(sys, false, "ignored"), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  const std::string smollm =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
      "'<|im_start|>system\\nYou are "
      "a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}";
  EXPECT_EQ(chatml_default_system(smollm), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(chatml_default_system("{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>' }}"), "");
  EXPECT_EQ(chatml_default_system("no template"), "");
}

// A byte-level vocabulary in a GGUF file: the 256 byte symbols, "ab" (without a merge "a b"),
// and specials; tokenizer.ggml.pre = pre unless empty; extra metadata from `more`.
gguf::File vocab_file(const std::string& pre, const std::function<void(gguf::Writer&)>& more = {}) {
  std::vector<std::string> tokens;
  uint32_t next = 256;  // GPT-2's byte alphabet
  for (int b = 0; b < 256; ++b) {
    const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string sym;
    unicode::append_utf8(sym, self ? uint32_t(b) : next++);
    tokens.push_back(sym);
  }
  const std::vector<std::string> extra{"ab", "<|begin_of_text|>", "<|eot_id|>", "<|fim_pad|>", "<custom_eot>"};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  std::vector<int32_t> types(tokens.size(), 1);
  for (size_t i = 257; i < tokens.size(); ++i) types[i] = 3;  // CONTROL
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  if (!pre.empty()) w.set("tokenizer.ggml.pre", gguf::Value::string(pre));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::array_of<int32_t>(types));
  w.set("tokenizer.ggml.merges", gguf::Value::strings({}));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of<uint32_t>(257));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::of<uint32_t>(258));
  if (more) more(w);
  return gguf::File::parse(w.bytes());
}

TEST(Tokenizer, PreTokenizersFromGguf) {
  const std::vector<std::pair<std::string, PreTokenizer>> cases{{"", PreTokenizer::gpt2},
                                                                {"gpt-2", PreTokenizer::gpt2},
                                                                {"smollm", PreTokenizer::digits_then_gpt2},
                                                                {"llama-bpe", PreTokenizer::llama3},
                                                                {"llama3", PreTokenizer::llama3},
                                                                {"qwen2", PreTokenizer::qwen2}};
  for (const auto& c : cases) {
    const Tokenizer t = Tokenizer::from_gguf(vocab_file(c.first));
    EXPECT_EQ(t.pre(), c.second) << c.first;
    // BOS by default with llama3 only (llama.cpp's defaults); the metadata overrides it.
    EXPECT_EQ(t.add_bos(), c.second == PreTokenizer::llama3) << c.first;
    // llama3 takes a word that is a token whole, though no merge makes it.
    const std::vector<int32_t> ab{256}, a_b{t.find("a"), t.find("b")};
    EXPECT_EQ(t.encode("ab"), c.second == PreTokenizer::llama3 ? ab : a_b) << c.first;
  }
  const Tokenizer no_bos = Tokenizer::from_gguf(vocab_file("llama-bpe", [](gguf::Writer& w) {
    w.set("tokenizer.ggml.add_bos_token", gguf::Value::of<bool>(false));
  }));
  EXPECT_FALSE(no_bos.add_bos());
  EXPECT_EQ(no_bos.encode("ab", true, no_bos.add_bos()), std::vector<int32_t>{256});
  try {
    Tokenizer::from_gguf(vocab_file("deepseek-v3"));
    FAIL() << "an unsupported pre-tokenizer must be refused";
  } catch (const gguf::FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'tokenizer.ggml.pre' = 'deepseek-v3' is not supported"), std::string::npos) << m;
    EXPECT_NE(m.find("supported: default, gpt2, gpt-2, smollm"), std::string::npos) << m;
    EXPECT_NE(m.find("llama-bpe"), std::string::npos) << m;
    EXPECT_NE(m.find("qwen2"), std::string::npos) << m;
  }
}

TEST(Tokenizer, EndOfGenerationFromMetadataAndText) {
  // eos, <|eot_id|> and <|fim_pad|> by their text, and an eot_token_id from the metadata.
  const Tokenizer t = Tokenizer::from_gguf(vocab_file("llama-bpe", [](gguf::Writer& w) {
    w.set("tokenizer.ggml.eot_token_id", gguf::Value::of<uint32_t>(260));
  }));
  EXPECT_EQ(t.eog_ids(), (std::vector<int32_t>{258, 259, 260}));
  EXPECT_TRUE(t.is_eog(258) && t.is_eog(260) && !t.is_eog(257) && !t.is_eog(-1) && !t.is_eog(1 << 30));
  // A fim_pad id in the metadata replaces the one found by text.
  const Tokenizer m = Tokenizer::from_gguf(vocab_file("qwen2", [](gguf::Writer& w) {
    w.set("tokenizer.ggml.fim_pad_token_id", gguf::Value::of<uint32_t>(256));
  }));
  EXPECT_EQ(m.eog_ids(), (std::vector<int32_t>{256, 258}));
}

// llama.cpp's vocabulary files and test vectors (scripts/fetch-llamacpp-vocab): the .out ids
// for each .inp text (no BOS, special tokens as text, as test-tokenizer-0 runs them), and
// decode(encode(text)) == text for those texts and for random valid UTF-8.
class LlamaCppVocab : public ::testing::TestWithParam<const char*> {};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_P(LlamaCppVocab, TestVectorsAndRoundTrips) {
  const char* cache = std::getenv("LLMK_CACHE");
  const char* home = std::getenv("HOME");
  const std::string base = (cache && *cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/llmk") +
                           "/llamacpp-vocab/ggml-vocab-" + GetParam() + ".gguf";
  if (!std::ifstream(base) || !std::ifstream(base + ".inp") || !std::ifstream(base + ".out"))
    GTEST_SKIP() << "skipped: " << base << " not found (run scripts/fetch-llamacpp-vocab)";
  const gguf::File f = gguf::File::open(base);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const std::string inp = slurp(base + ".inp"), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    size_t e = inp.find(sep, pos);
    if (e == std::string::npos) e = inp.size();
    texts.push_back(inp.substr(pos, e - pos));
    pos = e + sep.size();
  }
  std::istringstream outs(slurp(base + ".out"));
  size_t n = 0;
  for (const std::string& text : texts) {
    std::string line;
    ASSERT_TRUE(std::getline(outs, line)) << "no ids for text " << n;
    std::istringstream ids(line);
    std::vector<int32_t> want;
    for (int32_t id; ids >> id;) want.push_back(id);
    const std::vector<int32_t> got = tok.encode(text, false);
    EXPECT_EQ(got, want) << GetParam() << " text " << n << ": '" << text << "'";
    if (tok.kind() == TokenizerKind::bpe) EXPECT_EQ(tok.decode(got), text) << GetParam() << " text " << n;
    ++n;
  }
  EXPECT_GT(n, 20u);
  if (tok.kind() != TokenizerKind::bpe) return;  // SentencePiece adds a space prefix
  std::mt19937 rng(7);
  const std::vector<uint32_t> pool{'a',    'Z',    '1',     ' ',     ' ',    '\n', '\r',  '\t',
                                   '\'',   's',    '.',     '!',     0xE9,   0xA0, 0x301, 0x3000,
                                   0x65E5, 0xD55C, 0x1F642, 0x1F3FD, 0x2028, 0x85, 0x7F,  0x0};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (int k = int(rng() % 30); k >= 0; --k) unicode::append_utf8(text, pool[rng() % pool.size()]);
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << GetParam() << " random text " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaCppVocab,
                         ::testing::Values("llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "gpt-2", "starcoder",
                                           "refact", "llama-spm", "phi-3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The real vocabulary. Expected ids: llama.cpp via llama-cpp-python 0.3.36 (as 0.3.16),
// Llama(model_path, vocab_only=True).tokenize(text.encode(), add_bos=False, special=True).
class SmolLM2Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = gguf::default_model_path();
    if (path.empty()) GTEST_SKIP() << "skipped: default model not found (run scripts/fetch-model or set LLMK_MODEL)";
    file_ = std::make_unique<gguf::File>(gguf::File::open(path));
    tok_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
  }
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SmolLM2Tokenizer, KnownSequencesFromLlamaCpp) {
  const Tokenizer& t = *tok_;
  using V = std::vector<int32_t>;
  EXPECT_EQ(t.encode("Hello, world!"), (V{19556, 28, 905, 17}));
  EXPECT_EQ(t.encode("<|im_start|>user\nWhat is 2+2?<|im_end|>\n"),
            (V{1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198}));
  EXPECT_EQ(t.encode("na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82"),
            (V{3546, 46494, 37366, 17097, 241, 115, 40993, 179, 120, 248, 47526}));
  EXPECT_EQ(t.encode("def f(x):\n\treturn x  # 100%\n"),
            (V{1604, 275, 24, 104, 727, 198, 197, 5406, 1792, 216, 907, 216, 33, 32, 32, 21, 198}));
  EXPECT_EQ(t.encode("<|im_start|>", false), (V{44, 108, 306, 79, 3738, 108, 46}));
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.is_eog(2) && t.is_eog(0) && !t.is_eog(1));
  EXPECT_EQ(t.pre(), PreTokenizer::digits_then_gpt2);
  EXPECT_EQ(chatml_default_system(t.chat_template()),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  // render_chat (`llmk chat`, llmk.LLM.chat): the template's default system prompt unless one is given
  const std::vector<ChatMessage> user{{"user", "Hi"}}, sys{{"system", "S"}, {"user", "Hi"}};
  EXPECT_EQ(render_chat(t, user),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(t, sys), render_chatml(sys, true, ""));
}

TEST_F(SmolLM2Tokenizer, RoundTripsALongText) {
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  if (!in) GTEST_SKIP() << "skipped: /usr/share/common-licenses/GPL-3 not found";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::vector<int32_t> ids = tok_->encode(text);
  EXPECT_EQ(tok_->decode(ids), text);
  EXPECT_LT(ids.size(), text.size() / 3);  // English BPE: about 4 bytes per token, far below 1
  StreamDecoder d(*tok_);
  std::string streamed;
  for (int32_t id : ids) streamed += d.push(id);
  EXPECT_EQ(streamed + d.finish(), text);
}

}  // namespace
}  // namespace llmk
