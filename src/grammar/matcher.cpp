// The Earley matcher over bytes, the vocabulary's token trie and the mask walk (llmk/grammar.hpp).
//
// An item is (alternative, dot, origin). Set k holds the items after k bytes; scanning byte c moves every
// item of the last set whose next symbol is a byte set holding c into a new set, which is then closed by
// prediction (with Aycock-Horspool's rule: predicting a nullable rule also steps over it) and completion.
// Sets are kept in one array with their start offsets, so undoing bytes (the trie walk's backtracking) is a
// truncation.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "grammar/builder.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk {

namespace {

struct Item {
  int32_t alt, dot, origin;
  bool operator==(const Item& o) const { return alt == o.alt && dot == o.dot && origin == o.origin; }
};

// The grammar's alternatives flattened: alternative a is rule alt_rule[a], symbols sym[alt_begin[a] ..
// alt_begin[a + 1]).
struct Flat {
  std::vector<int32_t> alt_rule, alt_begin, rule_alts_begin;
  std::vector<GrammarSymbol> sym;
  // 1: an alternative of a character of an unconstrained JSON string; 2: of the string itself.
  std::vector<uint8_t> alt_string;
  explicit Flat(const Grammar& g) {
    for (size_t r = 0; r < g.rules.size(); ++r) {
      rule_alts_begin.push_back(int32_t(alt_rule.size()));
      const std::string& name = g.names.size() == g.rules.size() ? g.names[r] : std::string();
      const uint8_t kind = name == grammar::kJsonCharRule || name == grammar::kJsonPlainCharRule ? 1
                           : name == grammar::kJsonStringRule                                    ? 2
                                                                                                 : 0;
      for (const auto& a : g.rules[r]) {
        alt_string.push_back(kind);
        alt_rule.push_back(int32_t(r));
        alt_begin.push_back(int32_t(sym.size()));
        sym.insert(sym.end(), a.begin(), a.end());
      }
    }
    rule_alts_begin.push_back(int32_t(alt_rule.size()));
    alt_begin.push_back(int32_t(sym.size()));
  }
};

}  // namespace

struct GrammarMatcher::Impl {
  const Grammar* g;
  std::shared_ptr<const Flat> flat;
  std::vector<Item> items;
  std::vector<int32_t> set_begin;    // [sets + 1]
  bool eog = false;                  // an end-of-generation token was accepted
  std::vector<uint8_t> path, instr;  // fill_mask's scratch
  // Dedup of the set being built: open addressing over item indices, a slot live when its stamp is current.
  std::vector<uint32_t> slot_stamp;
  std::vector<int32_t> slot_item;
  uint32_t stamp = 0;

  int32_t sets() const { return int32_t(set_begin.size()) - 1; }
  const GrammarSymbol* next(const Item& it) const {
    const int32_t p = flat->alt_begin[size_t(it.alt)] + it.dot;
    return p < flat->alt_begin[size_t(it.alt) + 1] ? &flat->sym[size_t(p)] : nullptr;
  }
  static uint32_t hash(const Item& it) {
    return uint32_t((uint64_t(uint32_t(it.alt)) * 0x9E3779B97F4A7C15ull +
                     uint64_t(uint32_t(it.dot)) * 0x632BE59BD9B4E019ull +
                     uint64_t(uint32_t(it.origin)) * 0xC2B2AE3D27D4EB4Full) >>
                    32);
  }
  // Starts the dedup table for a set holding items [begin, end) so far.
  void dedup_begin(int32_t begin) {
    if (++stamp == 0) {
      std::fill(slot_stamp.begin(), slot_stamp.end(), 0u);
      stamp = 1;
    }
    if (slot_stamp.empty()) {
      slot_stamp.assign(1024, 0u);
      slot_item.assign(1024, 0);
    }
    for (int32_t i = begin; i < int32_t(items.size()); ++i) insert_slot(i);
  }
  // Places item i in the table; false when an equal item is there already.
  bool insert_slot(int32_t i) {
    const uint32_t mask = uint32_t(slot_stamp.size() - 1);
    for (uint32_t h = hash(items[size_t(i)]) & mask;; h = (h + 1) & mask) {
      if (slot_stamp[h] != stamp) {
        slot_stamp[h] = stamp;
        slot_item[h] = i;
        return true;
      }
      if (items[size_t(slot_item[h])] == items[size_t(i)]) return false;
    }
  }
  // Adds it to the set being built (which starts at `begin`) unless already there.
  void push(const Item& it, int32_t begin) {
    if (size_t(int32_t(items.size()) - begin + 1) * 2 > slot_stamp.size()) {  // grow, keeping the load <= 1/2
      slot_stamp.assign(slot_stamp.size() * 2, 0u);
      slot_item.assign(slot_stamp.size(), 0);
      stamp = 1;
      for (int32_t i = begin; i < int32_t(items.size()); ++i) insert_slot(i);
    }
    items.push_back(it);
    if (!insert_slot(int32_t(items.size()) - 1)) items.pop_back();
  }
  void predict_rule(int32_t r, int32_t k, int32_t begin) {
    for (int32_t a = flat->rule_alts_begin[size_t(r)]; a < flat->rule_alts_begin[size_t(r) + 1]; ++a)
      push({a, 0, k}, begin);
  }
  // Closes the set being built (set k, from `begin`).
  void close(int32_t k, int32_t begin) {
    dedup_begin(begin);
    for (int32_t i = begin; i < int32_t(items.size()); ++i) {
      const Item it = items[size_t(i)];
      const GrammarSymbol* s = next(it);
      if (s) {
        if (s->rule >= 0) {
          predict_rule(s->rule, k, begin);
          if (g->nullable[size_t(s->rule)]) push({it.alt, it.dot + 1, it.origin}, begin);
        }
        continue;
      }
      const int32_t r = flat->alt_rule[size_t(it.alt)];
      const int32_t ob = set_begin[size_t(it.origin)];
      const int32_t oe = it.origin == k ? int32_t(items.size()) : set_begin[size_t(it.origin) + 1];
      for (int32_t j = ob; j < oe; ++j) {
        const Item w = items[size_t(j)];
        const GrammarSymbol* ws = next(w);
        if (ws && ws->rule == r) push({w.alt, w.dot + 1, w.origin}, begin);
      }
    }
    set_begin.push_back(int32_t(items.size()));
  }
  void reset() {
    items.clear();
    set_begin.assign(1, 0);
    dedup_begin(0);
    predict_rule(g->start, 0, 0);
    close(0, 0);
  }
  // Scans byte c from the last set; false (nothing changed) when no item takes it.
  bool scan(uint8_t c) {
    const int32_t k = sets() - 1;
    const int32_t b = set_begin[size_t(k)], e = set_begin[size_t(k) + 1];
    for (int32_t i = b; i < e; ++i) {
      const Item it = items[size_t(i)];
      const GrammarSymbol* s = next(it);
      if (s && s->set >= 0 && grammar::has(g->sets[size_t(s->set)], c))
        items.push_back({it.alt, it.dot + 1, it.origin});
    }
    if (int32_t(items.size()) == e) return false;
    close(k + 1, e);
    return true;
  }
  void pop_to(int32_t nsets) {
    set_begin.resize(size_t(nsets) + 1);
    items.resize(size_t(set_begin.back()));
  }
  bool complete() const {
    const int32_t k = sets() - 1;
    for (int32_t i = set_begin[size_t(k)]; i < set_begin[size_t(k) + 1]; ++i) {
      const Item& it = items[size_t(i)];
      if (it.origin == 0 && flat->alt_rule[size_t(it.alt)] == g->start && !next(it)) return true;
    }
    return false;
  }
  // True when the last set is inside an unconstrained JSON string at a character boundary and nowhere
  // else: every item that can scan is a string character's alternative at its start or a string's
  // closing quote. Then any plain ASCII character (not '"' or '\\') leads to a state with the same future:
  // the mask walk steps over such bytes without the parser.
  bool in_string() const {
    const int32_t k = sets() - 1;
    bool closing = false;
    for (int32_t i = set_begin[size_t(k)]; i < set_begin[size_t(k) + 1]; ++i) {
      const Item& it = items[size_t(i)];
      const GrammarSymbol* s = next(it);
      if (!s || s->set < 0) continue;
      const uint8_t kind = flat->alt_string[size_t(it.alt)];
      if (kind == 1 && it.dot == 0) continue;
      if (kind == 2 && it.dot == 2) {
        closing = true;
        continue;
      }
      return false;
    }
    return closing;
  }
  bool can_scan() const {
    const int32_t k = sets() - 1;
    for (int32_t i = set_begin[size_t(k)]; i < set_begin[size_t(k) + 1]; ++i) {
      const GrammarSymbol* s = next(items[size_t(i)]);
      if (s && s->set >= 0) return true;
    }
    return false;
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)), p_(std::make_unique<Impl>()) {
  LLMK_CHECK_ARG(g_ != nullptr, "GrammarMatcher", "grammar", "null", "must not be null");
  LLMK_CHECK_ARG(vocab_ != nullptr, "GrammarMatcher", "vocab", "null", "must not be null");
  LLMK_CHECK_ARG(g_->nullable.size() == g_->rules.size(), "GrammarMatcher", "grammar", g_->rules.size(),
                 "must be finalized");
  p_->g = g_.get();
  p_->flat = std::make_shared<const Flat>(*g_);
  p_->reset();
}
GrammarMatcher::GrammarMatcher(const GrammarMatcher& o)
    : g_(o.g_), vocab_(o.vocab_), p_(std::make_unique<Impl>(*o.p_)) {}
GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& o) {
  g_ = o.g_;
  vocab_ = o.vocab_;
  p_ = std::make_unique<Impl>(*o.p_);
  return *this;
}
GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (p_->eog) return bytes.empty();
  const int32_t n = p_->sets();
  for (char c : bytes)
    if (!p_->scan(uint8_t(c))) {
      p_->pop_to(n);
      return false;
    }
  return true;
}

bool GrammarMatcher::accept_token(int32_t t) {
  LLMK_CHECK_ARG(t >= 0 && t < vocab_->size(), "GrammarMatcher::accept_token", "t", t, "must be in [0, vocab size)");
  if (std::binary_search(vocab_->eog_.begin(), vocab_->eog_.end(), t)) {
    if (p_->eog || !p_->complete()) return false;
    p_->eog = true;
    return true;
  }
  const std::string& b = vocab_->bytes_[size_t(t)];
  return !b.empty() && accept_bytes(b);
}

bool GrammarMatcher::complete() const { return p_->eog || p_->complete(); }
bool GrammarMatcher::done() const { return p_->eog || (p_->complete() && !p_->can_scan()); }

void GrammarMatcher::fill_mask_slow(uint32_t* mask) const {
  const int32_t n = vocab_->size();
  std::memset(mask, 0, size_t((n + 31) / 32) * sizeof(uint32_t));
  // One copy, each token tried from the same state and undone: no trie, no sharing between tokens.
  GrammarMatcher m(*this);
  const int32_t base = m.p_->sets();
  for (int32_t t = 0; t < n; ++t) {
    const bool eog = std::binary_search(vocab_->eog_.begin(), vocab_->eog_.end(), t);
    bool ok = eog ? !p_->eog && p_->complete() : !p_->eog && !vocab_->bytes_[size_t(t)].empty();
    for (size_t i = 0; ok && !eog && i < vocab_->bytes_[size_t(t)].size(); ++i)
      ok = m.p_->scan(uint8_t(vocab_->bytes_[size_t(t)][i]));
    m.p_->pop_to(base);
    if (ok) mask[t >> 5] |= uint32_t(1) << (t & 31);
  }
}

void GrammarMatcher::fill_mask(uint32_t* mask) {
  const TokenVocab& v = *vocab_;
  std::memset(mask, 0, size_t((v.n_ + 31) / 32) * sizeof(uint32_t));
  if (p_->eog) return;
  if (p_->complete())
    for (int32_t t : v.eog_) mask[t >> 5] |= uint32_t(1) << (t & 31);
  // The last set's byte sets, merged: a trie node whose byte is outside them is skipped without a scan.
  ByteSet first{};
  {
    const int32_t k = p_->sets() - 1;
    for (int32_t i = p_->set_begin[size_t(k)]; i < p_->set_begin[size_t(k) + 1]; ++i) {
      const GrammarSymbol* s = p_->next(p_->items[size_t(i)]);
      if (s && s->set >= 0)
        for (int w = 0; w < 4; ++w) first[size_t(w)] |= g_->sets[size_t(s->set)][size_t(w)];
    }
  }
  // The walk: the parser holds the state after the bytes of the current node's first m ancestors; deeper
  // ones, plain characters inside an unconstrained JSON string (in_string), are stepped over without it
  // (their bytes kept in `path`) and scanned only when a later byte needs the parser.
  const int32_t base = p_->sets();
  const int32_t nodes = int32_t(v.byte_.size());
  std::vector<uint8_t>& path = p_->path;
  std::vector<uint8_t>& instr = p_->instr;  // [materialized depth]: the state there is in_string()
  if (path.size() < 2) path.assign(64, 0), instr.assign(64, 0);
  instr[0] = p_->in_string();
  int32_t m = 0;
  auto plain = [](uint8_t c) { return c >= 0x20 && c <= 0x7F && c != '"' && c != '\\'; };
  for (int32_t i = 0; i < nodes;) {
    const int32_t d = v.depth_[size_t(i)];
    const uint8_t c = v.byte_[size_t(i)];
    if (d == 1 && !grammar::has(first, c)) {
      i = v.skip_[size_t(i)];
      continue;
    }
    if (size_t(d) >= path.size()) path.resize(size_t(d) * 2), instr.resize(size_t(d) * 2);
    if (m > d - 1) {
      p_->pop_to(base + d - 1);
      m = d - 1;
    }
    if ((m < d - 1 || instr[size_t(m)]) && plain(c)) {  // the state before c is inside a string
      path[size_t(d)] = c;
    } else {
      for (; m < d - 1; ++m) {  // materialize the stepped-over bytes
        p_->scan(path[size_t(m) + 1]);
        instr[size_t(m) + 1] = p_->in_string();
      }
      if (!p_->scan(c)) {
        i = v.skip_[size_t(i)];
        continue;
      }
      m = d;
      path[size_t(d)] = c;
      instr[size_t(d)] = p_->in_string();
    }
    for (int32_t j = v.tok_begin_[size_t(i)]; j < v.tok_begin_[size_t(i) + 1]; ++j) {
      const int32_t t = v.toks_[size_t(j)];
      mask[t >> 5] |= uint32_t(1) << (t & 31);
    }
    ++i;
  }
  p_->pop_to(base);
}

TokenVocab::TokenVocab(const std::vector<std::string>& token_bytes, std::vector<int32_t> eog)
    : n_(int32_t(token_bytes.size())), bytes_(token_bytes), eog_(std::move(eog)) {
  LLMK_CHECK_ARG(token_bytes.size() < size_t(INT32_MAX), "TokenVocab", "token_bytes", token_bytes.size(),
                 "must hold fewer than 2^31 tokens");
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
  for (int32_t t : eog_) LLMK_CHECK_ARG(t >= 0 && t < n_, "TokenVocab", "eog", t, "must be in [0, size)");
  // An eog token produces no bytes under a grammar.
  for (int32_t t : eog_) bytes_[size_t(t)].clear();
  // Tokens sorted by bytes give the trie in depth-first order: each token adds the nodes past its common
  // prefix with the previous one.
  std::vector<int32_t> order;
  for (int32_t t = 0; t < n_; ++t)
    if (!bytes_[size_t(t)].empty()) order.push_back(t);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] != bytes_[size_t(b)] ? bytes_[size_t(a)] < bytes_[size_t(b)] : a < b;
  });
  std::vector<int32_t> path;  // node index at each depth of the previous token
  std::vector<std::vector<int32_t>> node_toks;
  const std::string* prev = nullptr;
  for (int32_t t : order) {
    const std::string& s = bytes_[size_t(t)];
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(int32_t(byte_.size()));
      byte_.push_back(uint8_t(s[d]));
      depth_.push_back(int32_t(d + 1));
      node_toks.emplace_back();
    }
    node_toks[size_t(path.back())].push_back(t);
    prev = &s;
  }
  const int32_t nn = int32_t(byte_.size());
  skip_.assign(size_t(nn), nn);
  // A node's subtree ends at the next node of depth <= its own.
  std::vector<int32_t> open;
  for (int32_t i = 0; i < nn; ++i) {
    while (!open.empty() && depth_[size_t(open.back())] >= depth_[size_t(i)]) {
      skip_[size_t(open.back())] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  tok_begin_.push_back(0);
  for (int32_t i = 0; i < nn; ++i) {
    toks_.insert(toks_.end(), node_toks[size_t(i)].begin(), node_toks[size_t(i)].end());
    tok_begin_.push_back(int32_t(toks_.size()));
  }
}

std::shared_ptr<const TokenVocab> TokenVocab::of(const Tokenizer& tok) {
  std::vector<std::string> b(size_t(tok.n_vocab()));
  for (int32_t t = 0; t < tok.n_vocab(); ++t)
    if (tok.type(t) != TokenType::control) b[size_t(t)] = tok.token_bytes(t);
  return std::make_shared<const TokenVocab>(b, tok.eog_ids());
}

namespace {

class GrammarState : public ConstraintState {
 public:
  GrammarState(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> v)
      : m_(std::move(g), std::move(v)), mask_(size_t((m_.vocab_size() + 31) / 32)) {}
  void mask(float* logits, int64_t v) override {
    m_.fill_mask(mask_.data());
    const int64_t n = std::min<int64_t>(v, m_.vocab_size());
    bool any = false;
    for (int64_t t = 0; t < n; ++t) {
      const bool ok = (mask_[size_t(t >> 5)] >> (t & 31)) & 1;
      any = any || ok;
      if (!ok) logits[t] = -INFINITY;
    }
    for (int64_t t = n; t < v; ++t) logits[t] = -INFINITY;
    if (!any)
      throw InvalidArgument(
          "GrammarConstraint: no token of the vocabulary can continue the text here (the grammar "
          "needs bytes no token spells, or the vocabulary has no end-of-generation token)");
  }
  void accept(int32_t t) override {
    LLMK_CHECK_ARG(m_.accept_token(t), "GrammarConstraint::accept", "token", t, "is not allowed by the grammar here");
  }
  bool done() const override { return m_.done(); }

 private:
  GrammarMatcher m_;
  std::vector<uint32_t> mask_;
};

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)) {
  LLMK_CHECK_ARG(g_ && vocab_, "GrammarConstraint", "grammar / vocab", "null", "must not be null");
}

std::unique_ptr<ConstraintState> GrammarConstraint::start() const { return std::make_unique<GrammarState>(g_, vocab_); }

}  // namespace llmk
