// Tokenizers built from a GGUF file's tokenizer.ggml.* metadata: byte-level BPE (GPT-2 style,
// tokenizer.ggml.model "gpt2") and SentencePiece BPE ("llama"), plus the ChatML chat template
// of SmolLM2-Instruct and a streaming decoder. Output matches llama.cpp's llama_tokenize
// (python/tests/test_tokenizer_llamacpp.py); docs/gguf_tokenizer.md has the steps.
//
// SentencePiece (SPM, as llama.cpp's llm_tokenizer_spm): special tokens are cut out as below;
// each text run gets a leading space when add_space_prefix and it starts the text or follows
// a special token, spaces become U+2581 ("▁"), the run is split into UTF-8 characters (a byte
// that starts no valid sequence is one symbol), and adjacent symbols whose concatenation is a
// token merge, highest score first (leftmost on ties), until none does; a symbol that is no
// token is re-split into the pieces it was merged from, and what is still no token becomes
// byte tokens <0xNN>. Decode: U+2581 back to a space, <0xNN> to its byte.
//
// Byte-level BPE:
// encode(text): 1. special tokens (types CONTROL and USER_DEFINED) are cut out of the text,
// longest first (CONTROL ones only when parse_special); 2. each remaining run is decoded as
// llama.cpp does (a byte that starts no sequence of continuation bytes becomes U+FFFD) and
// split into words by the pre-tokenizer named by tokenizer.ggml.pre (PreTokenizer); 3. each
// word's UTF-8 bytes are mapped to GPT-2's printable byte alphabet and merged by BPE, lowest
// merge rank first (merges whose parts or result are not tokens are ignored, as Hugging Face's
// tokenizers refuse them); with llama3 a word that is itself a token is taken whole.
// add_bos / add_eos: tokenizer.ggml.add_{bos,eos}_token, else llama.cpp's default (BOS for SPM
// and for the llama3 pre-tokenizer).
// encode/decode are const and keep no state: one Tokenizer serves many threads.
// decode: byte-level pieces map back to bytes; CONTROL tokens render as their text unless
// skip_special. Token ids are int32_t; bad ids are an InvalidArgument naming the id.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llmk/gguf.hpp"

namespace llmk {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// The byte-level pre-tokenizers (tokenizer.ggml.pre, by llama.cpp's names):
//   gpt2             GPT-2's regex ("gpt2", "gpt-2", "default", or no key)
//   digits_then_gpt2 each \p{N} alone, then GPT-2's regex ("smollm", "starcoder", "refact", ...)
//   llama3           Llama 3's regex (numbers in runs of up to 3 digits), whole-word tokens first
//                    ("llama-bpe", "llama3", "llama-v3")
//   qwen2            Llama 3's regex with single digits ("qwen2", "deepseek-r1-qwen")
//   deepseek_llm     DeepSeek LLM's list of regexes ("deepseek-llm")
//   deepseek_coder   DeepSeek Coder's list of regexes ("deepseek-coder")
// Any other name is a FormatError listing the supported ones.
enum class PreTokenizer { gpt2, digits_then_gpt2, llama3, qwen2, deepseek_llm, deepseek_coder };
enum class TokenizerKind { bpe, spm };

class Tokenizer {
 public:
  // Needs tokenizer.ggml.model == "gpt2" (tokens, merges) or "llama" (tokens, scores);
  // token_type, pre, bos/eos ids, add_bos_token, add_eos_token, add_space_prefix and
  // chat_template are optional. FormatError naming the key otherwise.
  static Tokenizer from_gguf(const gguf::File& file);
  // From parts (tests): tokens in byte-level form, merges as "a b", types (empty: all normal).
  Tokenizer(std::vector<std::string> tokens, const std::vector<std::string>& merges, std::vector<TokenType> types,
            PreTokenizer pre);
  // A SentencePiece vocabulary: tokens with U+2581 for spaces, one score each.
  static Tokenizer sentencepiece(std::vector<std::string> tokens, std::vector<float> scores,
                                 std::vector<TokenType> types, bool add_space_prefix);

  // text -> token ids. parse_special: recognize CONTROL tokens (e.g. <|im_start|>) written
  // in the text; add_bos: prepend bos_id() (when the vocabulary has one); add_eos: append
  // eos_id() (likewise).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true, bool add_bos = false,
                              bool add_eos = false) const;
  // ids -> text bytes (may end inside a UTF-8 character if the ids do).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // One token's bytes (empty for CONTROL tokens when skip_special).
  std::string token_bytes(int32_t id, bool skip_special = false) const;

  int32_t n_vocab() const { return int32_t(tokens_.size()); }
  const std::string& piece(int32_t id) const;  // the stored (byte-level) token text
  TokenType type(int32_t id) const;
  int32_t find(std::string_view piece) const;  // -1 when absent
  int32_t bos_id() const { return bos_; }      // -1 when the vocabulary has none
  int32_t eos_id() const { return eos_; }
  // Whether generation should stop at `id`: llama.cpp's end-of-generation set, i.e. eos, the
  // eot / eom / fim_pad / fim_rep / fim_sep ids of the metadata (tokenizer.ggml.*_token_id; the
  // fim ones found by their text when absent) and the tokens llama.cpp stops at by their text
  // (<|im_end|>, <|endoftext|>, <|eot_id|>, <|eom_id|>, <end_of_turn>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }  // sorted
  bool add_bos() const { return add_bos_; }                     // tokenizer.ggml.add_bos_token
  bool add_eos() const { return add_eos_; }                     // tokenizer.ggml.add_eos_token
  TokenizerKind kind() const { return kind_; }
  PreTokenizer pre() const { return pre_; }
  const std::string& chat_template() const { return chat_template_; }  // "" when absent

 private:
  // Transparent hashing: lookups by string_view allocate nothing.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
  void check_id(int32_t id, const char* fn) const;
  void add_eog(int32_t id);
  // (left id, right id) -> (rank, merged id), open addressing with linear probing.
  struct MergeTable {
    std::vector<uint64_t> keys;  // UINT64_MAX: empty slot
    std::vector<std::pair<int32_t, int32_t>> vals;
    const std::pair<int32_t, int32_t>* find(int32_t left, int32_t right) const;
    void insert(int32_t left, int32_t right, std::pair<int32_t, int32_t> val);
  };
  struct Scratch;
  void bpe_word(std::string_view raw, Scratch& s, std::vector<int32_t>& out) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
  int32_t byte_token(uint8_t b) const;

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  StringMap token_id_;
  MergeTable merges_;             // merges whose two parts and result are all tokens
  std::vector<int32_t> byte_id_;  // [256]: the token of each byte's symbol, -1 if none
  std::vector<int32_t> special_;  // CONTROL / USER_DEFINED ids, longest text first
  std::vector<int32_t> eog_;      // sorted, unique
  PreTokenizer pre_ = PreTokenizer::gpt2;
  TokenizerKind kind_ = TokenizerKind::bpe;
  std::vector<float> scores_;      // SPM: one per token
  bool add_space_prefix_ = false;  // SPM
  bool ignore_merges_ = false;     // llama3: a word that is a token is taken whole
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  std::string chat_template_;
};

// Incremental decoding for streaming output: push() returns the text that is complete so
// far, holding back a UTF-8 character split across tokens until its last byte arrives.
// Invalid bytes come out as U+FFFD. finish() flushes what is held back (as U+FFFD).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false) : tok_(tok), skip_(skip_special) {}
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer& tok_;
  bool skip_;
  std::string pending_;  // at most 3 bytes: the start of an incomplete character
};

// Chat messages and SmolLM2-Instruct's ChatML template:
//   [<|im_start|>system\n{default_system}<|im_end|>\n]   (only when the first message is not
//                                                          a system one and default_system != "")
//   <|im_start|>{role}\n{content}<|im_end|>\n   for each message
//   <|im_start|>assistant\n                      when add_generation_prompt
struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};
std::string render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt = true,
                          std::string_view default_system = "");
// The default system prompt a ChatML Jinja template inserts when the first message is not a
// system one (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging
// Face"), read from the template's literal '<|im_start|>system\n...<|im_end|>'; "" if none.
std::string chatml_default_system(std::string_view jinja_template);
// The prompt text of a chat with tok's model (generation prompt added): its own template,
// rendered as llmk/chat_template.hpp says (chat_template_of(tok)).
std::string render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages);

}  // namespace llmk
