// The values a Jinja template computes with: Python's None/bool/int/float/str/list/tuple/dict,
// jinja's Undefined, callables and namespaces. Lists and dicts are immutable once built (the
// immutable sandbox allows no mutation), so copies share them; a namespace is the one mutable
// object. Dicts keep insertion order and have string keys.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llmk::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
struct Args;
using Function = std::function<Value(Args&)>;

struct Value {
  enum Kind : uint8_t { Undefined, None, Bool, Int, Float, Str, ListK, DictK, Func, NS };
  Kind kind = Undefined;
  bool markup = false;  // a str from tojson / safe: '+' HTML-escapes the other operand (markupsafe.Markup)
  bool tuple = false;   // a list that prints as a tuple
  bool gen = false;     // a list standing for a Python generator (map, select...): no len(), no index, no JSON
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // Str; Undefined: the name, for error messages
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Dict> ns;
  std::shared_ptr<const Function> fn;

  static Value make(Kind k) {
    Value r;
    r.kind = k;
    return r;
  }
  static Value none() { return make(None); }
  static Value boolean(bool v) {
    Value r = make(Bool);
    r.b = v;
    return r;
  }
  static Value integer(int64_t v) {
    Value r = make(Int);
    r.i = v;
    return r;
  }
  static Value real(double v) {
    Value r = make(Float);
    r.f = v;
    return r;
  }
  static Value str(std::string v, bool markup = false) {
    Value r = make(Str);
    r.markup = markup;
    r.s = std::move(v);
    return r;
  }
  static Value undefined(std::string name = "") {
    Value r;
    r.s = std::move(name);
    return r;
  }
  static Value of_list(List v, bool tuple = false) {
    Value r = make(ListK);
    r.tuple = tuple;
    r.list = std::make_shared<const List>(std::move(v));
    return r;
  }
  static Value of_dict(Dict v) {
    Value r = make(DictK);
    r.dict = std::make_shared<const Dict>(std::move(v));
    return r;
  }
  static Value function(Function f) {
    Value r = make(Func);
    r.fn = std::make_shared<const Function>(std::move(f));
    return r;
  }

  bool is_undefined() const { return kind == Undefined; }
  bool is_str() const { return kind == Str; }
  bool is_number() const { return kind == Int || kind == Float || kind == Bool; }
  const Value* find(std::string_view key) const {
    const Dict* d = kind == DictK ? dict.get() : kind == NS ? ns.get() : nullptr;
    if (d)
      for (const auto& [k, v] : *d)
        if (k == key) return &v;
    return nullptr;
  }
};

// Dict keys are strings; an integer key k is stored as kIntKey + decimal k.
inline constexpr std::string_view kIntKey = "\x01\x02";
inline std::string int_key(int64_t k) { return std::string(kIntKey) + std::to_string(k); }
inline bool is_int_key(std::string_view k) { return k.substr(0, kIntKey.size()) == kIntKey; }
inline Value key_value(const std::string& k) {
  return is_int_key(k) ? Value::integer(std::stoll(k.substr(kIntKey.size()))) : Value::str(k);
}

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional i, else keyword name, else fallback; consumed keywords are removed.
  Value get(size_t i, std::string_view name, Value fallback = Value::undefined()) {
    for (size_t k = 0; k < kw.size(); ++k)
      if (kw[k].first == name) {
        Value v = std::move(kw[k].second);
        kw.erase(kw.begin() + long(k));
        return v;
      }
    return i < pos.size() ? pos[i] : fallback;
  }
};

}  // namespace llmk::jinja
