// The grammar IR and its builder (builder.hpp): byte sets, repetition, UTF-8 ranges, JSON lexical rules;
// the `choice` and `json_object` front ends.
#include <algorithm>
#include <cstdio>

#include "grammar/builder.hpp"

namespace llmk {

void Grammar::finalize() {
  const int32_t nr = int32_t(rules.size()), ns = int32_t(sets.size());
  if (start < 0 || start >= nr) throw GrammarError("grammar: start rule " + std::to_string(start) + " out of range");
  for (int32_t r = 0; r < nr; ++r)
    for (const auto& a : rules[size_t(r)])
      for (const GrammarSymbol& s : a)
        if ((s.rule >= 0) == (s.set >= 0) || s.rule >= nr || s.set >= ns)
          throw GrammarError("grammar: rule " + std::to_string(r) + " has a bad symbol (rule " +
                             std::to_string(s.rule) + ", set " + std::to_string(s.set) + ")");
  nullable.assign(size_t(nr), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < nr; ++r) {
      if (nullable[size_t(r)]) continue;
      for (const auto& a : rules[size_t(r)]) {
        bool all = true;
        for (const GrammarSymbol& s : a) all = all && s.rule >= 0 && nullable[size_t(s.rule)];
        if (all) {
          nullable[size_t(r)] = 1;
          changed = true;
          break;
        }
      }
    }
  }
}

int64_t Grammar::size() const {
  int64_t n = 0;
  for (const auto& r : rules)
    for (const auto& a : r) n += int64_t(a.size()) + 1;
  return n;
}

namespace grammar {

Builder::Builder(const char* front_end, const GrammarOptions& o)
    : front_(front_end), o_(o), t0_(std::chrono::steady_clock::now()) {
  if (o.max_whitespace < 0 || o.max_whitespace > 64)
    fail("options", "max_whitespace = " + std::to_string(o.max_whitespace) + ": must be in [0, 64]");
}

void Builder::fail(const std::string& where, const std::string& what) const {
  throw GrammarError(std::string(front_) + ": " + (where.empty() ? "" : where + ": ") + what);
}

void Builder::check_budget() {
  if (symbols_ > o_.max_symbols)
    fail("", "the grammar grows past " + std::to_string(o_.max_symbols) + " symbols (GrammarOptions::max_symbols)");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  if (s > o_.max_compile_seconds)
    fail("", "compiling took over " + std::to_string(o_.max_compile_seconds) + " s with " + std::to_string(symbols_) +
                 " symbols so far (GrammarOptions::max_compile_seconds)");
}

int32_t Builder::rule(const std::string& name) {
  g.rules.emplace_back();
  g.names.push_back(name);
  return int32_t(g.rules.size() - 1);
}

void Builder::alt(int32_t r, Seq s) {
  symbols_ += int64_t(s.size()) + 1;
  if ((symbols_ & 1023) < int64_t(s.size()) + 1) check_budget();
  g.rules[size_t(r)].push_back(std::move(s));
}

GrammarSymbol Builder::set(const ByteSet& s) {
  auto [it, fresh] = set_ids_.emplace(s, int32_t(g.sets.size()));
  if (fresh) g.sets.push_back(s);
  return {-1, it->second};
}

GrammarSymbol Builder::byte(uint8_t b) {
  ByteSet s{};
  add(s, b);
  return set(s);
}

Seq Builder::literal(std::string_view bytes) {
  Seq s;
  for (char c : bytes) s.push_back(byte(uint8_t(c)));
  return s;
}

GrammarSymbol Builder::repeat(const Seq& s, int64_t lo, int64_t hi, const std::string& name) {
  if (lo < 0 || (hi >= 0 && hi < lo))
    fail(name, "bad repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "}");
  if (lo > o_.max_symbols || hi > o_.max_symbols)
    fail(name, "repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} is too large");
  // s{lo,hi} = s^lo tail, tail = (s tail')? nested hi - lo deep, or star = star s | empty when unbounded
  // (left recursion: an Earley set stays the same size however long the run).
  int32_t tail = -1;
  if (hi < 0) {
    tail = rule(name + "*");
    Seq a{ref(tail)};
    a.insert(a.end(), s.begin(), s.end());
    alt(tail, std::move(a));
    alt(tail, {});
  } else {
    for (int64_t i = lo; i < hi; ++i) {
      const int32_t t = rule(name + "?");
      Seq a = s;
      if (tail >= 0) a.push_back(ref(tail));
      alt(t, std::move(a));
      alt(t, {});
      tail = t;
    }
  }
  const int32_t r = rule(name);
  Seq body;
  for (int64_t i = 0; i < lo; ++i) {
    body.insert(body.end(), s.begin(), s.end());
    if ((i & 1023) == 0) check_budget();
  }
  if (tail >= 0) body.push_back(ref(tail));
  alt(r, std::move(body));
  return ref(r);
}

CpRanges normalize(CpRanges r) {
  std::sort(r.begin(), r.end());
  CpRanges out;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.push_back({lo, hi});
  }
  return out;
}

CpRanges complement(CpRanges r) {
  r = normalize(std::move(r));
  CpRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

namespace {

int utf8_len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

void utf8_encode(uint32_t c, uint8_t* o) {
  const int n = utf8_len(c);
  if (n == 1) {
    o[0] = uint8_t(c);
    return;
  }
  for (int i = n - 1; i > 0; --i, c >>= 6) o[i] = uint8_t(0x80 | (c & 0x3F));
  o[0] = uint8_t((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | c);
}

// [lo, hi] of one encoded length as byte-range sequences (the split of Go's utf8 range compiler).
void utf8_split(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static constexpr uint32_t kMaxOfLen[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (int n = 0; n < 3; ++n)
    if (lo <= kMaxOfLen[n] && hi > kMaxOfLen[n]) {
      utf8_split(lo, kMaxOfLen[n], out);
      utf8_split(kMaxOfLen[n] + 1, hi, out);
      return;
    }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_split(lo, lo | m, out);
        utf8_split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_split(lo, (hi & ~m) - 1, out);
        utf8_split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  utf8_encode(lo, a);
  utf8_encode(hi, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < utf8_len(lo); ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

GrammarSymbol Builder::codepoints(CpRanges ranges, const std::string& name) {
  ranges = normalize(std::move(ranges));
  // Surrogates are not characters: cut them out.
  CpRanges cut;
  for (auto [lo, hi] : ranges) {
    if (hi > kMaxCodePoint) hi = kMaxCodePoint;
    if (lo > hi) continue;
    if (hi < 0xD800 || lo > 0xDFFF) cut.push_back({lo, hi});
    else {
      if (lo < 0xD800) cut.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) cut.push_back({0xE000, hi});
    }
  }
  if (cut.empty()) fail(name, "matches no character");
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [lo, hi] : cut) utf8_split(lo, hi, seqs);
  // Single bytes merge into one set.
  ByteSet single{};
  bool any_single = false;
  const int32_t r = rule(name);
  for (const auto& s : seqs) {
    if (s.size() == 1) {
      add_range(single, s[0].first, s[0].second);
      any_single = true;
      continue;
    }
    Seq a;
    for (auto [x, y] : s) {
      ByteSet bs{};
      add_range(bs, x, y);
      a.push_back(set(bs));
    }
    alt(r, std::move(a));
  }
  if (any_single) {
    if (g.rules[size_t(r)].empty()) {  // one set: no rule needed
      g.rules.pop_back();
      g.names.pop_back();
      return set(single);
    }
    alt(r, {set(single)});
  }
  return ref(r);
}

Seq Builder::ws() {
  if (o_.max_whitespace == 0) return {};
  if (ws_ < 0) {
    ByteSet s{};
    add(s, ' ');
    add(s, '\t');
    add(s, '\n');
    add(s, '\r');
    ws_ = repeat({set(s)}, 0, o_.max_whitespace, "ws").rule;
  }
  return {ref(ws_)};
}

GrammarSymbol Builder::json_char() {
  if (json_char_ >= 0) return ref(json_char_);
  json_char_ = rule(kJsonCharRule);
  // Unescaped: any character but '"', '\' and U+0000..U+001F.
  const GrammarSymbol plain = codepoints({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}}, kJsonPlainCharRule);
  alt(json_char_, {plain});
  ByteSet esc{};
  for (char c : std::string("\"\\/bfnrt")) add(esc, uint8_t(c));
  alt(json_char_, {byte('\\'), set(esc)});
  ByteSet hex{};
  add_range(hex, '0', '9');
  add_range(hex, 'a', 'f');
  add_range(hex, 'A', 'F');
  const GrammarSymbol h = set(hex);
  alt(json_char_, {byte('\\'), byte('u'), h, h, h, h});
  return ref(json_char_);
}

GrammarSymbol Builder::json_string() {
  if (json_string_ >= 0) return ref(json_string_);
  const GrammarSymbol chars = repeat({json_char()}, 0, -1, "json-chars");
  json_string_ = rule(kJsonStringRule);
  alt(json_string_, {byte('"'), chars, byte('"')});
  return ref(json_string_);
}

GrammarSymbol Builder::json_integer() {
  if (json_integer_ >= 0) return ref(json_integer_);
  ByteSet d{}, d19{};
  add_range(d, '0', '9');
  add_range(d19, '1', '9');
  const GrammarSymbol digits = repeat({set(d)}, 0, -1, "digits");
  const int32_t nat = rule("json-natural");
  alt(nat, {byte('0')});
  alt(nat, {set(d19), digits});
  json_integer_ = rule("json-integer");
  alt(json_integer_, {optional({byte('-')}, "minus"), ref(nat)});
  return ref(json_integer_);
}

GrammarSymbol Builder::json_number() {
  if (json_number_ >= 0) return ref(json_number_);
  ByteSet d{}, e{}, pm{};
  add_range(d, '0', '9');
  add(e, 'e');
  add(e, 'E');
  add(pm, '+');
  add(pm, '-');
  const GrammarSymbol digits1 = repeat({set(d)}, 1, -1, "digits1");
  const GrammarSymbol frac = optional({byte('.'), digits1}, "fraction");
  const GrammarSymbol exp = optional({set(e), optional({set(pm)}, "exp-sign"), digits1}, "exponent");
  json_number_ = rule("json-number");
  alt(json_number_, {json_integer(), frac, exp});
  return ref(json_number_);
}

GrammarSymbol Builder::json_value() {
  if (json_value_ >= 0) return ref(json_value_);
  json_value_ = rule("json-value");
  const Seq w = ws();
  auto cat = [](std::initializer_list<Seq> parts) {
    Seq s;
    for (const Seq& p : parts) s.insert(s.end(), p.begin(), p.end());
    return s;
  };
  // object: { ws (member (ws , ws member)*)? ws }
  const int32_t member = rule("json-member");
  alt(member, cat({{json_string()}, w, {byte(':')}, w, {ref(json_value_)}}));
  const GrammarSymbol more = repeat(cat({w, {byte(',')}, w, {ref(member)}}), 0, -1, "json-members");
  const GrammarSymbol members = optional({ref(member), more}, "json-members?");
  json_object_ = rule("json-object");
  alt(json_object_, cat({{byte('{')}, w, {members}, w, {byte('}')}}));
  const GrammarSymbol items_more = repeat(cat({w, {byte(',')}, w, {ref(json_value_)}}), 0, -1, "json-items");
  const GrammarSymbol items = optional({ref(json_value_), items_more}, "json-items?");
  const int32_t array = rule("json-array");
  alt(array, cat({{byte('[')}, w, {items}, w, {byte(']')}}));
  alt(json_value_, {ref(json_object_)});
  alt(json_value_, {ref(array)});
  alt(json_value_, {json_string()});
  alt(json_value_, {json_number()});
  alt(json_value_, literal("true"));
  alt(json_value_, literal("false"));
  alt(json_value_, literal("null"));
  return ref(json_value_);
}

GrammarSymbol Builder::json_object() {
  json_value();
  return ref(json_object_);
}

std::shared_ptr<const Grammar> Builder::finish(int32_t start) {
  g.start = start;
  check_budget();
  g.finalize();
  return std::make_shared<const Grammar>(std::move(g));
}

}  // namespace grammar

std::shared_ptr<const Grammar> grammar_json_object(const GrammarOptions& o) {
  grammar::Builder b("json_object", o);
  const int32_t root = b.rule("root");
  grammar::Seq s = b.ws();
  s.push_back(b.json_object());
  b.alt(root, std::move(s));
  return b.finish(root);
}

std::shared_ptr<const Grammar> grammar_from_choice(const std::vector<std::string>& choices, const GrammarOptions& o) {
  grammar::Builder b("choice", o);
  if (choices.empty()) b.fail("choices", "the list is empty: give at least one string");
  const int32_t root = b.rule("root");
  for (const std::string& c : choices) b.alt(root, b.literal(c));
  return b.finish(root);
}

}  // namespace llmk
