// Byte-level BPE and SentencePiece BPE (see include/llmk/tokenizer.hpp): vocabulary from GGUF
// metadata, special token partition, pre-tokenizer split, BPE merges by rank with a priority
// queue (as llama.cpp and Hugging Face's tokenizers do: lowest rank first, leftmost on ties),
// SentencePiece merges by score (llama.cpp's llm_tokenizer_spm), decode.
#include "llmk/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <queue>
#include <string>
#include <unordered_map>

#include "tokenizer/unicode.hpp"

namespace llmk {

namespace {
// GPT-2's byte <-> printable code point map: bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF map to
// themselves, the other 68 bytes to U+0100.. in byte order (so ' ' -> 'Ġ' U+0120).
struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // code points < 0x200 -> byte, -1 when not in the map
  ByteMap() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = self ? uint32_t(b) : next++;
      to_byte[to_cp[b]] = int16_t(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// tokenizer.ggml.pre names, as llama.cpp maps them to its pre-tokenizer types.
struct PreName {
  std::string_view name;
  PreTokenizer pre;
};
constexpr PreName kPreNames[] = {
    {"default", PreTokenizer::gpt2},
    {"gpt2", PreTokenizer::gpt2},
    {"gpt-2", PreTokenizer::gpt2},
    {"smollm", PreTokenizer::digits_then_gpt2},
    {"starcoder", PreTokenizer::digits_then_gpt2},
    {"refact", PreTokenizer::digits_then_gpt2},
    {"command-r", PreTokenizer::digits_then_gpt2},
    {"codeshell", PreTokenizer::digits_then_gpt2},
    {"exaone", PreTokenizer::digits_then_gpt2},
    {"minerva-7b", PreTokenizer::digits_then_gpt2},
    {"llama-bpe", PreTokenizer::llama3},
    {"llama3", PreTokenizer::llama3},
    {"llama-v3", PreTokenizer::llama3},
    {"qwen2", PreTokenizer::qwen2},
    {"deepseek-r1-qwen", PreTokenizer::qwen2},
    {"deepseek-llm", PreTokenizer::deepseek_llm},
    {"deepseek-coder", PreTokenizer::deepseek_coder},
};

PreTokenizer pre_from_name(std::string_view pre) {
  if (pre.empty()) return PreTokenizer::gpt2;
  std::string names;
  for (const PreName& p : kPreNames) {
    if (pre == p.name) return p.pre;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw gguf::FormatError("tokenizer: pre-tokenizer 'tokenizer.ggml.pre' = '" + std::string(pre) +
                          "' is not supported (supported: " + names + ")");
}

// Tokens llama.cpp finds by their text (llama_vocab::impl::load) and makes CONTROL: those it
// stops generation at, and the fill-in-the-middle markers (kFimPad, kFimRep and kFimSep stop
// generation too, when the metadata names no fim_pad / fim_rep / fim_sep id).
constexpr std::string_view kEogText[] = {"<|eot_id|>",
                                         "<|im_end|>",
                                         "<|end|>",
                                         "<|return|>",
                                         "<|call|>",
                                         "<|flush|>",
                                         "<|calls|>",
                                         "<end_of_turn>",
                                         "<|endoftext|>",
                                         "</s>",
                                         "<|eom_id|>",
                                         "<EOT>",
                                         "_<EOT>",
                                         "[EOT]",
                                         "[EOS]",
                                         "<|end_of_text|>",
                                         "<end_of_utterance>",
                                         "<eos>",
                                         "<turn|>",
                                         "<|tool_response>",
                                         "<｜end▁of▁sentence｜>",
                                         "[e~["};
constexpr std::string_view kFimOther[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",    "<｜fim▁begin｜>",
                                          "<PRE>",          "▁<PRE>",       "<|code_prefix|>", "<|prefix|>",
                                          "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",    "<｜fim▁hole｜>",
                                          "<SUF>",          "▁<SUF>",       "<|code_suffix|>", "<|suffix|>",
                                          "<|fim_middle|>", "<fim-middle>", "<fim_middle>",    "<｜fim▁end｜>",
                                          "<MID>",          "▁<MID>",       "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSep[] = {"<|file_sep|>"};

bool is_special_type(TokenType t) {
  return t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown;
}
}  // namespace

Tokenizer::Tokenizer(std::vector<std::string> tokens, const std::vector<std::string>& merges,
                     std::vector<TokenType> types, PreTokenizer pre)
    : tokens_(std::move(tokens)), types_(std::move(types)), pre_(pre), ignore_merges_(pre == PreTokenizer::llama3) {
  const char* fn = "Tokenizer";
  LLMK_CHECK_ARG(!tokens_.empty() && tokens_.size() < size_t(INT32_MAX), fn, "tokens.size()", tokens_.size(),
                 "must be 1 .. 2^31-2");
  if (types_.empty()) types_.assign(tokens_.size(), TokenType::normal);
  LLMK_CHECK_ARG(types_.size() == tokens_.size(), fn, "types.size()", types_.size(),
                 "must equal tokens.size() = " + std::to_string(tokens_.size()));
  token_id_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) token_id_.emplace(tokens_[i], int32_t(i));  // first id wins
  // The merge table, sized to a power of two at most half full.
  size_t cap = 16;
  while (cap < 2 * merges.size()) cap *= 2;
  merges_.keys.assign(cap, UINT64_MAX);
  merges_.vals.resize(cap);
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t sp = merges[r].find(' ', 1);
    LLMK_CHECK_ARG(sp != std::string::npos, fn, "merges[" + std::to_string(r) + "]", merges[r],
                   "must be two pieces separated by a space");
    const std::string_view m = merges[r];
    joined.assign(m.substr(0, sp)).append(m.substr(sp + 1));
    const int32_t l = find(m.substr(0, sp)), rr = find(m.substr(sp + 1)), res = find(joined);
    if (l >= 0 && rr >= 0 && res >= 0 && !merges_.find(l, rr)) merges_.insert(l, rr, {int32_t(r), res});
  }
  const ByteMap& bm = byte_map();
  byte_id_.resize(256);
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    unicode::append_utf8(sym, bm.to_cp[size_t(b)]);
    byte_id_[size_t(b)] = find(sym);
  }
  auto make_control = [&](std::span<const std::string_view> texts) {
    for (std::string_view t : texts)
      if (const int32_t id = find(t); id >= 0) types_[size_t(id)] = TokenType::control;
  };
  using Texts = std::span<const std::string_view>;
  for (Texts texts : {Texts(kEogText), Texts(kFimOther), Texts(kFimPad), Texts(kFimRep), Texts(kFimSep)})
    make_control(texts);
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (is_special_type(types_[i]) && !tokens_[i].empty()) special_.push_back(int32_t(i));
  std::stable_sort(special_.begin(), special_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
  for (std::string_view t : kEogText)
    if (const int32_t id = find(t); id >= 0) add_eog(id);
}

void Tokenizer::add_eog(int32_t id) {
  const auto it = std::lower_bound(eog_.begin(), eog_.end(), id);
  if (it == eog_.end() || *it != id) eog_.insert(it, id);
}

Tokenizer Tokenizer::sentencepiece(std::vector<std::string> tokens, std::vector<float> scores,
                                   std::vector<TokenType> types, bool add_space_prefix) {
  const char* fn = "Tokenizer::sentencepiece";
  LLMK_CHECK_ARG(scores.size() == tokens.size(), fn, "scores.size()", scores.size(),
                 "must equal tokens.size() = " + std::to_string(tokens.size()));
  Tokenizer t(std::move(tokens), {}, std::move(types), PreTokenizer::gpt2);
  t.kind_ = TokenizerKind::spm;
  t.scores_ = std::move(scores);
  t.add_space_prefix_ = add_space_prefix;
  return t;
}

Tokenizer Tokenizer::from_gguf(const gguf::File& f) {
  const std::string model(f.get_string("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "llama")
    throw gguf::FormatError("tokenizer: " + f.path() + ": 'tokenizer.ggml.model' = '" + model +
                            "' is not supported (llmk reads byte-level BPE, 'gpt2', and SentencePiece, 'llama')");
  const bool spm = model == "llama";
  std::vector<std::string> tokens = f.get_strings("tokenizer.ggml.tokens");
  static const std::vector<std::string> kNoMerges;
  const std::vector<std::string>& merges = spm ? kNoMerges : f.get_strings("tokenizer.ggml.merges");
  std::vector<TokenType> types;
  if (f.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> t = f.get_ints("tokenizer.ggml.token_type");
    if (t.size() != tokens.size())
      throw gguf::FormatError("tokenizer: " + f.path() + ": 'tokenizer.ggml.token_type' has " +
                              std::to_string(t.size()) + " entries for " + std::to_string(tokens.size()) + " tokens");
    for (int64_t x : t) types.push_back(x >= 0 && x <= 6 ? TokenType(x) : TokenType::undefined);
  }
  const int64_t n = int64_t(tokens.size());
  std::vector<float> scores;
  if (spm) {
    scores = f.get_f32s("tokenizer.ggml.scores");
    if (scores.size() != tokens.size())
      throw gguf::FormatError("tokenizer: " + f.path() + ": 'tokenizer.ggml.scores' has " +
                              std::to_string(scores.size()) + " entries for " + std::to_string(tokens.size()) +
                              " tokens");
  }
  const PreTokenizer pre = spm ? PreTokenizer::gpt2 : pre_from_name(f.get_string_or("tokenizer.ggml.pre", ""));
  Tokenizer tok = spm ? sentencepiece(std::move(tokens), std::move(scores), std::move(types),
                                      f.get_bool_or("tokenizer.ggml.add_space_prefix", true))
                      : Tokenizer(std::move(tokens), merges, std::move(types), pre);
  auto id_or = [&](const char* key) -> int32_t {
    if (!f.has(key)) return -1;
    const int64_t id = f.get_int(key);
    if (id < 0 || id >= n)
      throw gguf::FormatError("tokenizer: " + f.path() + ": '" + key + "' = " + std::to_string(id) +
                              " is not a token id (vocabulary of " + std::to_string(n) + ")");
    return int32_t(id);
  };
  tok.bos_ = id_or("tokenizer.ggml.bos_token_id");
  tok.eos_ = id_or("tokenizer.ggml.eos_token_id");
  // End of generation: eos, eot and eom, and the fim_pad / fim_rep / fim_sep ids (found by their
  // text when the metadata has none), besides the text list the constructor applied.
  if (tok.eos_ >= 0) tok.add_eog(tok.eos_);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const int32_t id = id_or(key); id >= 0) tok.add_eog(id);
  const std::pair<const char*, std::span<const std::string_view>> kFim[] = {
      {"tokenizer.ggml.fim_pad_token_id", kFimPad},
      {"tokenizer.ggml.fim_rep_token_id", kFimRep},
      {"tokenizer.ggml.fim_sep_token_id", kFimSep}};
  for (const auto& [key, texts] : kFim) {
    int32_t id = id_or(key);
    for (size_t i = 0; id < 0 && i < texts.size(); ++i) id = tok.find(texts[i]);
    if (id >= 0) tok.add_eog(id);
  }
  tok.add_bos_ = f.get_bool_or("tokenizer.ggml.add_bos_token", spm || pre == PreTokenizer::llama3) && tok.bos_ >= 0;
  tok.add_eos_ = f.get_bool_or("tokenizer.ggml.add_eos_token", false) && tok.eos_ >= 0;
  tok.chat_template_ = f.get_string_or("tokenizer.chat_template", "");
  return tok;
}

void Tokenizer::check_id(int32_t id, const char* fn) const {
  LLMK_CHECK_ARG(id >= 0 && id < n_vocab(), fn, "id", id, "must be in [0, " + std::to_string(n_vocab()) + ")");
}
const std::string& Tokenizer::piece(int32_t id) const {
  check_id(id, "Tokenizer::piece");
  return tokens_[size_t(id)];
}
TokenType Tokenizer::type(int32_t id) const {
  check_id(id, "Tokenizer::type");
  return types_[size_t(id)];
}
int32_t Tokenizer::find(std::string_view p) const {
  auto it = token_id_.find(p);
  return it == token_id_.end() ? -1 : it->second;
}
bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

static size_t slot_of(int32_t left, int32_t right, size_t mask) {
  const uint64_t k = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  return size_t((k * 0x9E3779B97F4A7C15ull) >> 20) & mask;  // Fibonacci hashing
}

const std::pair<int32_t, int32_t>* Tokenizer::MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t k = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  const size_t mask = keys.size() - 1;
  for (size_t i = slot_of(left, right, mask);; i = (i + 1) & mask) {
    if (keys[i] == k) return &vals[i];
    if (keys[i] == UINT64_MAX) return nullptr;
  }
}

void Tokenizer::MergeTable::insert(int32_t left, int32_t right, std::pair<int32_t, int32_t> val) {
  const size_t mask = keys.size() - 1;
  size_t i = slot_of(left, right, mask);
  while (keys[i] != UINT64_MAX) i = (i + 1) & mask;
  keys[i] = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  vals[i] = val;
}

// Reused across the words of one encode() call.
struct Tokenizer::Scratch {
  struct Sym {
    int32_t id;  // token id, -1 for a byte whose symbol is not in the vocabulary
    int prev, next;
  };
  struct Bigram {
    int32_t rank;
    int left;
    int32_t left_id, right_id;  // the pair when queued: a stale entry no longer matches
    int32_t merged;             // the token the pair becomes
    bool operator<(const Bigram& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Sym> syms;
  std::priority_queue<Bigram> queue;
  std::string word;  // a word in byte-level form
};

// BPE over one pre-tokenized word (raw UTF-8 bytes): one symbol per byte (its symbol in GPT-2's
// byte alphabet), then merges by rank, then the ids of what is left.
void Tokenizer::bpe_word(std::string_view raw, Scratch& s, std::vector<int32_t>& out) const {
  if (ignore_merges_) {  // a word that is a token is taken whole, merges or not
    const ByteMap& bm = byte_map();
    s.word.clear();
    for (char c : raw) unicode::append_utf8(s.word, bm.to_cp[uint8_t(c)]);
    if (const int32_t id = find(s.word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  auto& syms = s.syms;
  syms.clear();
  for (size_t i = 0; i < raw.size(); ++i)
    syms.push_back({byte_id_[uint8_t(raw[i])], int(i) - 1, i + 1 < raw.size() ? int(i) + 1 : -1});
  auto push_pair = [&](int l) {
    if (l < 0 || syms[size_t(l)].next < 0) return;
    const int32_t a = syms[size_t(l)].id, b = syms[size_t(syms[size_t(l)].next)].id;
    if (a < 0 || b < 0) return;
    if (const auto* m = merges_.find(a, b)) s.queue.push({m->first, l, a, b, m->second});
  };
  for (int i = 0; i + 1 < int(syms.size()); ++i) push_pair(i);
  while (!s.queue.empty()) {
    const Scratch::Bigram top = s.queue.top();
    s.queue.pop();
    Scratch::Sym& a = syms[size_t(top.left)];
    if (a.id != top.left_id || a.next < 0 || syms[size_t(a.next)].id != top.right_id) continue;  // stale
    Scratch::Sym& b = syms[size_t(a.next)];
    a.id = top.merged;
    b.id = -1;  // b is gone: its own queued pairs must read as stale
    a.next = b.next;
    if (a.next >= 0) syms[size_t(a.next)].prev = top.left;
    push_pair(a.prev);
    push_pair(top.left);
  }
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[size_t(i)].next)
    if (syms[size_t(i)].id >= 0) out.push_back(syms[size_t(i)].id);
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  const std::vector<uint32_t> cps = unicode::decode_utf8_lenient(text);
  std::vector<size_t> ends;
  unicode::pre_split(cps, pre_, ends);
  Scratch scratch;
  std::string raw;
  size_t begin = 0;
  for (size_t end : ends) {
    raw.clear();
    for (size_t i = begin; i < end; ++i) unicode::append_utf8(raw, cps[i]);
    bpe_word(raw, scratch, out);
    begin = end;
  }
}

// A byte's token: <0xNN>, else the byte itself as a token (llama.cpp's byte_to_token); -1
// when neither exists.
int32_t Tokenizer::byte_token(uint8_t b) const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
  const int32_t id = find(std::string_view(name, 6));
  return id >= 0 ? id : find(std::string_view(reinterpret_cast<const char*>(&b), 1));
}

void Tokenizer::encode_spm(std::string_view raw, bool space_prefix, std::vector<int32_t>& out) const {
  std::string text;
  if (space_prefix) text = "▁";
  for (char c : raw) {
    if (c == ' ') text += "▁";
    else text += c;
  }
  // Symbols: UTF-8 characters by their first byte's length (a stray byte is one symbol),
  // linked as a list; merged symbols grow in place.
  struct Sym {
    size_t start, n;
    int prev, next;
  };
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  std::vector<Sym> sym;
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min<size_t>(kLen[uint8_t(text[off]) >> 4], text.size() - off);
    sym.push_back({off, n, int(sym.size()) - 1, off + n == text.size() ? -1 : int(sym.size()) + 1});
    off += n;
  }
  struct Bigram {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first, then the leftmost.
  const auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;
  const std::string_view tv = text;
  const auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view s = tv.substr(sym[size_t(l)].start, sym[size_t(l)].n + sym[size_t(r)].n);
    const int32_t id = find(s);
    if (id < 0) return;
    queue.push({l, r, scores_[size_t(id)], s.size()});
    rev_merge[std::string(s)] = {l, r};
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym &l = sym[size_t(b.left)], &r = sym[size_t(b.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // a part was merged since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  const auto resegment = [&](auto&& self, const Sym& s) -> void {
    const std::string_view piece = tv.substr(s.start, s.n);
    if (const int32_t id = find(piece); id >= 0) {
      out.push_back(id);
      return;
    }
    const auto it = rev_merge.find(std::string(piece));
    if (it == rev_merge.end()) {
      for (char c : piece) {
        const int32_t id = byte_token(uint8_t(c));
        if (id < 0)
          throw InvalidArgument("Tokenizer::encode: byte " + std::to_string(uint8_t(c)) +
                                " has no token (<0xNN> or the byte) in this SentencePiece vocabulary");
        out.push_back(id);
      }
      return;
    }
    self(self, sym[size_t(it->second.first)]);
    self(self, sym[size_t(it->second.second)]);
  };
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[size_t(i)].next) resegment(resegment, sym[size_t(i)]);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special, bool add_bos, bool add_eos) const {
  std::vector<int32_t> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  // Fragments: either a special token id, or a span of text still to be tokenized.
  struct Frag {
    int32_t id;  // -1: text
    size_t start, len;
  };
  std::vector<Frag> frags;  // none for an empty text (no SPM space prefix either, as llama.cpp)
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (int32_t sid : special_) {
    if (types_[size_t(sid)] != TokenType::user_defined && !parse_special) continue;
    const std::string& s = tokens_[size_t(sid)];
    std::vector<Frag> next;
    for (const Frag& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.start;
      const size_t end = f.start + f.len;
      while (true) {
        const size_t hit = text.substr(0, end).find(s, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, pos, hit - pos});
        next.push_back({sid, hit, s.size()});
        pos = hit + s.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags = std::move(next);
  }
  bool prev_special = true;  // SPM: a run at the start or after a special token gets the space prefix
  for (const Frag& f : frags) {
    if (f.id >= 0) out.push_back(f.id);
    else if (kind_ == TokenizerKind::spm)
      encode_spm(text.substr(f.start, f.len), add_space_prefix_ && prev_special, out);
    else encode_plain(text.substr(f.start, f.len), out);
    prev_special = f.id >= 0;
  }
  if (add_eos && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::string Tokenizer::token_bytes(int32_t id, bool skip_special) const {
  check_id(id, "Tokenizer::token_bytes");
  const std::string& t = tokens_[size_t(id)];
  switch (types_[size_t(id)]) {
    case TokenType::control:
    case TokenType::unknown: return skip_special ? std::string() : t;
    case TokenType::user_defined: return t;
    default: break;
  }
  if (kind_ == TokenizerKind::spm) {  // U+2581 -> space; <0xNN> -> the byte
    if (types_[size_t(id)] == TokenType::byte && t.size() == 6 && t.compare(0, 3, "<0x") == 0)
      return std::string(1, char(std::stoi(t.substr(3, 2), nullptr, 16)));
    std::string out;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "▁") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += t[i];
      }
    }
    return out;
  }
  // Byte-level text back to bytes; a code point outside GPT-2's map passes through as UTF-8.
  const ByteMap& bm = byte_map();
  std::string out;
  for (uint32_t cp : unicode::decode_utf8(t)) {
    if (cp < bm.to_byte.size() && bm.to_byte[cp] >= 0) out += char(bm.to_byte[cp]);
    else unicode::append_utf8(out, cp);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id, skip_special);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id, skip_);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const int len = unicode::utf8_sequence_length(std::string_view(pending_).substr(i));
    if (len == 0) break;  // an incomplete character: wait for the next token
    if (len < 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for each maximal ill-formed subpart
      i += unicode::utf8_invalid_length(std::string_view(pending_).substr(i));
      continue;
    }
    out.append(pending_, i, size_t(len));
    i += size_t(len);
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = pending_.empty() ? "" : "\xEF\xBF\xBD";  // a character cut short
  pending_.clear();
  return out;
}

}  // namespace llmk
