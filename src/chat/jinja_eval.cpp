// The evaluator: statements write to the output, expressions compute Values with Python's
// semantics; filters, tests, str/dict/list methods and globals as jinja2's builtins define
// them. Scoping as jinja2's: a for loop body gets a fresh scope each iteration, a macro its own
// scope over the one it was defined in; namespace() is the way state leaves a loop.
#include <algorithm>
#include <clocale>
#include <cmath>
#include <cwctype>
#include <optional>
#include <unordered_map>
#include <utility>

#include "chat/jinja_internal.hpp"

namespace llmk::jinja {

struct Template::Impl {
  Body body;
};

namespace {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
  const Value* lookup(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using FrameP = std::shared_ptr<Frame>;

// Unicode case mapping through the C.UTF-8 locale's tables (ASCII without it).
locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
  return loc;
}
uint32_t cp_upper(uint32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  return utf8_locale() ? uint32_t(towupper_l(wint_t(c), utf8_locale())) : c;
}
uint32_t cp_lower(uint32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  return utf8_locale() ? uint32_t(towlower_l(wint_t(c), utf8_locale())) : c;
}
bool cp_alpha(uint32_t c) {
  if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
  return utf8_locale() && iswalpha_l(wint_t(c), utf8_locale());
}
std::string map_case(std::string_view s, uint32_t (*f)(uint32_t)) {
  std::string out;
  for (uint32_t c : to_cps(s)) append_utf8(out, f(c));
  return out;
}
std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t c : to_cps(s)) {
    append_utf8(out, prev_cased ? cp_lower(c) : cp_upper(c));
    prev_cased = cp_alpha(c);
  }
  return out;
}
std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (uint32_t c : to_cps(s)) {
    append_utf8(out, first ? cp_upper(c) : cp_lower(c));
    first = false;
  }
  return out;
}

bool is_line_break(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}
std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> out;
  const auto cps = to_cps(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i)
    if (is_line_break(cps[i])) {
      out.push_back(from_cps(cps, start, i));
      if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
      start = i + 1;
    }
  if (start < cps.size()) out.push_back(from_cps(cps, start, cps.size()));
  return out;
}

struct Ctx {
  const RenderOptions* opt;
  size_t steps = 0;
  int depth = 0;
};

struct Interp;
using Method = Value (*)(Interp&, const Value& self, Args& args, int line);

struct Interp {
  Ctx& cx;
  explicit Interp(Ctx& c) : cx(c) {}

  void step(int line) {
    if (++cx.steps > cx.opt->limits.max_steps)
      fail(line, "the template ran past " + std::to_string(cx.opt->limits.max_steps) + " steps (Limits::max_steps)");
  }
  void check_size(size_t n, int line) const {
    if (n > cx.opt->limits.max_output)
      fail(line, "the output or a string grew past " + std::to_string(cx.opt->limits.max_output) +
                     " bytes (Limits::max_output)");
  }
  struct Deeper {
    Interp& in;
    Deeper(Interp& in, int line) : in(in) {
      if (++in.cx.depth > in.cx.opt->limits.max_depth)
        fail(line, "calls or expressions nested deeper than " + std::to_string(in.cx.opt->limits.max_depth) +
                       " (Limits::max_depth)");
    }
    ~Deeper() { --in.cx.depth; }
  };

  static std::string dict_key(const Value& k, int line) {
    if (k.is_str()) return k.s;
    if (k.kind == Value::Int) return int_key(k.i);
    fail(line, "dict keys other than strings and integers are not supported");
  }
  static std::string type_name(const Value& v) {
    static const char* names[] = {"Undefined", "NoneType", "bool", "int",      "float",
                                  "str",       "list",     "dict", "function", "Namespace"};
    return v.kind == Value::ListK && v.gen ? "generator" : v.kind == Value::ListK && v.tuple ? "tuple" : names[v.kind];
  }
  [[noreturn]] static void undefined_error(const Value& v, int line) {
    fail(line, v.s.empty() ? std::string("an undefined value was used") : "'" + v.s + "' is undefined");
  }

  // ---------- iteration, attributes, items
  List iterate(const Value& v, int line) {
    switch (v.kind) {
      case Value::Undefined: return {};
      case Value::ListK: {
        List l = *v.list;
        return l;
      }
      case Value::DictK: {
        List out;
        for (const auto& kv : *v.dict) out.push_back(key_value(kv.first));
        return out;
      }
      case Value::Str: {
        List out;
        for (uint32_t c : to_cps(v.s)) {
          std::string ch;
          append_utf8(ch, c);
          out.push_back(Value::str(std::move(ch), v.markup));
        }
        return out;
      }
      default: fail(line, "'" + type_name(v) + "' object is not iterable");
    }
  }

  Value bound(const Value& self, Method m) {
    Interp* in = this;
    Value s = self;
    return Value::function([in, s, m](Args& a) { return m(*in, s, a, 0); });
  }
  static Value unsafe(const std::string& name) {
    return Value::function([name](Args&) -> Value {
      fail(0, "'" + name + "' modifies an object: the immutable sandbox does not allow it");
    });
  }
  Value method(const Value& obj, const std::string& name, bool* found);

  Value getattr(const Value& obj, const std::string& name, int line) {
    if (obj.kind == Value::Undefined) undefined_error(obj, line);
    bool found = false;
    Value m = method(obj, name, &found);
    if (found) return m;
    if (const Value* v = obj.find(name)) return *v;
    return Value::undefined(name);
  }
  static int64_t norm_index(int64_t i, size_t n) { return i < 0 ? i + int64_t(n) : i; }
  Value getitem(const Value& obj, const Value& key, int line) {
    if (obj.kind == Value::Undefined) undefined_error(obj, line);
    if (key.kind == Value::Int || key.kind == Value::Bool) {
      const int64_t k = key.kind == Value::Int ? key.i : key.b;
      if (obj.kind == Value::DictK) {
        const Value* v = obj.find(int_key(k));
        return v ? *v : Value::undefined();
      }
      if (obj.kind == Value::ListK && obj.gen) fail(line, "'generator' object is not subscriptable");
      if (obj.kind == Value::ListK) {
        const int64_t i = norm_index(k, obj.list->size());
        if (i >= 0 && i < int64_t(obj.list->size())) return (*obj.list)[size_t(i)];
        return Value::undefined();
      }
      if (obj.kind == Value::Str) {
        const auto cps = to_cps(obj.s);
        const int64_t i = norm_index(k, cps.size());
        if (i >= 0 && i < int64_t(cps.size())) return Value::str(from_cps(cps, size_t(i), size_t(i) + 1), obj.markup);
        return Value::undefined();
      }
    }
    if (key.kind == Value::Str) {
      if (const Value* v = obj.find(key.s)) return *v;
      bool found = false;
      Value m = method(obj, key.s, &found);
      if (found) return m;
      return Value::undefined(key.s);
    }
    return Value::undefined();
  }
  Value slice(const Value& obj, const Value& a, const Value& b, const Value& c, int line) {
    if (obj.kind == Value::Undefined) undefined_error(obj, line);
    auto as_int = [&](const Value& v, const char* what) -> std::optional<int64_t> {
      if (v.kind == Value::Undefined || v.kind == Value::None) return std::nullopt;
      if (v.kind == Value::Int) return v.i;
      if (v.kind == Value::Bool) return int64_t(v.b);
      fail(line, std::string("slice ") + what + " must be an integer, not " + type_name(v));
    };
    const auto start = as_int(a, "start"), stop = as_int(b, "stop"), stp = as_int(c, "step");
    const int64_t step = stp.value_or(1);
    if (step == 0) fail(line, "slice step cannot be zero");
    auto indices = [&](size_t n) {
      std::vector<size_t> out;
      const int64_t len = int64_t(n);
      auto clamp = [&](std::optional<int64_t> v, int64_t dflt, bool is_start) {
        if (!v) return dflt;
        int64_t x = *v < 0 ? *v + len : *v;
        if (step > 0) return std::clamp<int64_t>(x, 0, len);
        (void)is_start;
        return std::clamp<int64_t>(x, -1, len - 1);
      };
      const int64_t s = clamp(start, step > 0 ? 0 : len - 1, true), e = clamp(stop, step > 0 ? len : -1, false);
      for (int64_t i = s; step > 0 ? i < e : i > e; i += step) out.push_back(size_t(i));
      return out;
    };
    if (obj.kind == Value::ListK) {
      List out;
      for (size_t i : indices(obj.list->size())) out.push_back((*obj.list)[i]);
      return Value::of_list(std::move(out), obj.tuple);
    }
    if (obj.kind == Value::Str) {
      const auto cps = to_cps(obj.s);
      std::string out;
      for (size_t i : indices(cps.size())) append_utf8(out, cps[i]);
      return Value::str(std::move(out), obj.markup);
    }
    fail(line, "'" + type_name(obj) + "' object is not subscriptable");
  }

  // ---------- operators
  static double as_double(const Value& v) {
    return v.kind == Value::Float ? v.f : v.kind == Value::Int ? double(v.i) : double(v.b);
  }
  static int64_t as_int64(const Value& v) { return v.kind == Value::Int ? v.i : int64_t(v.b); }
  Value binop(const std::string& op, const Value& x, const Value& y, int line) {
    if (op == "~") {
      if (x.kind == Value::Func || y.kind == Value::Func) fail(line, "cannot concatenate a function");
      std::string s = to_str(x) + to_str(y);
      check_size(s.size(), line);
      return Value::str(std::move(s));
    }
    if (x.kind == Value::Undefined) undefined_error(x, line);
    if (y.kind == Value::Undefined) undefined_error(y, line);
    const bool nums = x.is_number() && y.is_number();
    const bool ints = nums && x.kind != Value::Float && y.kind != Value::Float;
    if (op == "+") {
      if (ints) {
        int64_t r;
        if (__builtin_add_overflow(as_int64(x), as_int64(y), &r)) fail(line, "integer overflow");
        return Value::integer(r);
      }
      if (nums) return Value::real(as_double(x) + as_double(y));
      if (x.is_str() && y.is_str()) {
        std::string s;
        const bool markup = x.markup || y.markup;
        s = (markup && !x.markup ? html_escape(x.s) : x.s) + (markup && !y.markup ? html_escape(y.s) : y.s);
        check_size(s.size(), line);
        return Value::str(std::move(s), markup);
      }
      if (x.kind == Value::ListK && y.kind == Value::ListK && x.tuple == y.tuple && !x.gen && !y.gen) {
        List l = *x.list;
        l.insert(l.end(), y.list->begin(), y.list->end());
        check_size(l.size(), line);
        return Value::of_list(std::move(l), x.tuple);
      }
    } else if (op == "-") {
      if (ints) {
        int64_t r;
        if (__builtin_sub_overflow(as_int64(x), as_int64(y), &r)) fail(line, "integer overflow");
        return Value::integer(r);
      }
      if (nums) return Value::real(as_double(x) - as_double(y));
    } else if (op == "*") {
      if (ints) {
        int64_t r;
        if (__builtin_mul_overflow(as_int64(x), as_int64(y), &r)) fail(line, "integer overflow");
        return Value::integer(r);
      }
      if (nums) return Value::real(as_double(x) * as_double(y));
      const Value* seq = x.is_number() ? &y : &x;
      const Value* n = x.is_number() ? &x : &y;
      if (n->kind != Value::Float && n->is_number() && (seq->is_str() || seq->kind == Value::ListK)) {
        const int64_t times = std::max<int64_t>(0, as_int64(*n));
        const size_t unit = seq->is_str() ? seq->s.size() : seq->list->size();
        if (unit && uint64_t(times) > cx.opt->limits.max_output / unit) check_size(cx.opt->limits.max_output + 1, line);
        if (seq->is_str()) {
          std::string s;
          for (int64_t k = 0; k < times; ++k) s += seq->s;
          return Value::str(std::move(s), seq->markup);
        }
        List l;
        for (int64_t k = 0; k < times; ++k) l.insert(l.end(), seq->list->begin(), seq->list->end());
        return Value::of_list(std::move(l), seq->tuple);
      }
    } else if (op == "/") {
      if (nums) {
        if (as_double(y) == 0) fail(line, "division by zero");
        return Value::real(as_double(x) / as_double(y));
      }
    } else if (op == "//" || op == "%") {
      if (ints) {
        const int64_t a = as_int64(x), b = as_int64(y);
        if (b == 0) fail(line, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) fail(line, "integer overflow");
        int64_t q = a / b, r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) {
          --q;
          r += b;
        }
        return Value::integer(op == "//" ? q : r);
      }
      if (nums) {
        const double a = as_double(x), b = as_double(y);
        if (b == 0) fail(line, "float division or modulo by zero");
        const double q = std::floor(a / b);
        if (op == "//") return Value::real(q);
        double r = std::fmod(a, b);
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return Value::real(r);
      }
      if (op == "%" && x.is_str()) fail(line, "printf-style '%' formatting of strings is not supported");
    } else if (op == "**") {
      if (ints && as_int64(y) >= 0) {
        int64_t r = 1, base = as_int64(x);
        for (int64_t k = 0; k < as_int64(y); ++k)
          if (__builtin_mul_overflow(r, base, &r)) fail(line, "integer overflow");
        return Value::integer(r);
      }
      if (nums) return Value::real(std::pow(as_double(x), as_double(y)));
    }
    fail(line, "unsupported operand type(s) for " + op + ": '" + type_name(x) + "' and '" + type_name(y) + "'");
  }
  int order(const Value& x, const Value& y, const std::string& op, int line) {  // <0, 0, >0
    if (x.is_number() && y.is_number()) {
      if (x.kind == Value::Float || y.kind == Value::Float) {
        const double a = as_double(x), b = as_double(y);
        return a < b ? -1 : a > b ? 1 : 0;
      }
      const int64_t a = as_int64(x), b = as_int64(y);
      return a < b ? -1 : a > b ? 1 : 0;
    }
    if (x.is_str() && y.is_str()) return x.s < y.s ? -1 : x.s > y.s ? 1 : 0;
    if (x.kind == Value::ListK && y.kind == Value::ListK) {
      for (size_t k = 0; k < std::min(x.list->size(), y.list->size()); ++k) {
        const Value &a = (*x.list)[k], &b = (*y.list)[k];
        if (!py_equal(a, b)) return order(a, b, op, line);
      }
      return x.list->size() < y.list->size() ? -1 : x.list->size() > y.list->size() ? 1 : 0;
    }
    if (x.kind == Value::Undefined) undefined_error(x, line);
    if (y.kind == Value::Undefined) undefined_error(y, line);
    fail(line, "'" + op + "' not supported between instances of '" + type_name(x) + "' and '" + type_name(y) + "'");
  }
  bool contains(const Value& container, const Value& item, int line) {
    switch (container.kind) {
      case Value::Str:
        if (!item.is_str()) fail(line, "'in <string>' requires string as left operand, not " + type_name(item));
        return container.s.find(item.s) != std::string::npos;
      case Value::ListK:
        for (const Value& v : *container.list)
          if (py_equal(v, item)) return true;
        return false;
      case Value::DictK:
        return (item.is_str() && container.find(item.s)) ||
               (item.kind == Value::Int && container.find(int_key(item.i)));
      case Value::Undefined: return false;
      default: fail(line, "argument of type '" + type_name(container) + "' is not iterable");
    }
  }
  bool compare(const std::string& op, const Value& x, const Value& y, int line) {
    if (op == "==") return py_equal(x, y);
    if (op == "!=") return !py_equal(x, y);
    if (op == "in") return contains(y, x, line);
    if (op == "notin") return !contains(y, x, line);
    const int o = order(x, y, op, line);
    if (op == "<") return o < 0;
    if (op == ">") return o > 0;
    if (op == "<=") return o <= 0;
    return o >= 0;
  }

  // ---------- calls
  Value call(const Value& f, Args& args, int line) {
    if (f.kind == Value::Undefined) undefined_error(f, line);
    if (f.kind != Value::Func) fail(line, "'" + type_name(f) + "' object is not callable");
    Deeper d(*this, line);
    try {
      return (*f.fn)(args);
    } catch (const InvalidArgument& e) {
      const std::string msg = e.what();
      if (msg.rfind("llmk::jinja: line 0: ", 0) == 0)  // from a builtin: give it this line
        throw InvalidArgument("llmk::jinja: line " + std::to_string(line) + ": " + msg.substr(21));
      throw;
    }
  }
  Args eval_args(const Node& n, size_t first, Frame& fr) {
    Args a;
    for (size_t k = first; k < n.a.size(); ++k) {
      Value v = eval(*n.a[k], fr);
      if (n.names[k].empty()) a.pos.push_back(std::move(v));
      else a.kw.emplace_back(n.names[k], std::move(v));
    }
    return a;
  }
  Value filter(const std::string& name, const Value& v, Args& a, int line);
  Value filter_impl(const std::string& name, const Value& v, Args& a, int line);
  static Value generator(List l) {
    Value g = Value::of_list(std::move(l));
    g.gen = true;
    return g;
  }
  bool test(const std::string& name, const Value& v, Args& a, int line);

  Value make_macro(const Node& n, const FrameP& defined_in, bool is_caller);

  // ---------- expressions
  Value eval(const Node& n, Frame& fr) {
    step(n.line);
    Deeper d(*this, n.line);
    switch (n.kind) {
      case Node::Lit: return n.value;
      case Node::Name: {
        const Value* v = fr.lookup(n.name);
        return v ? *v : Value::undefined(n.name);
      }
      case Node::Attr: return getattr(eval(*n.a[0], fr), n.name, n.line);
      case Node::Item: return getitem(eval(*n.a[0], fr), eval(*n.a[1], fr), n.line);
      case Node::Slice: {
        const Value obj = eval(*n.a[0], fr);
        auto part = [&](size_t k) { return n.a[k] ? eval(*n.a[k], fr) : Value::none(); };
        return slice(obj, part(1), part(2), part(3), n.line);
      }
      case Node::Call: {
        const Value f = eval(*n.a[0], fr);
        Args a = eval_args(n, 1, fr);
        return call(f, a, n.line);
      }
      case Node::Filter: {
        if (n.flag) fail(n.line, "no filter named '" + n.name + "'");
        const Value v = eval(*n.a[0], fr);
        Args a = eval_args(n, 1, fr);
        return filter(n.name, v, a, n.line);
      }
      case Node::Test: {
        if (n.flag) fail(n.line, "no test named '" + n.name + "'");
        const Value v = eval(*n.a[0], fr);
        Args a = eval_args(n, 1, fr);
        return Value::boolean(test(n.name, v, a, n.line) != n.negated);
      }
      case Node::Neg:
      case Node::Pos: {
        const Value v = eval(*n.a[0], fr);
        if (v.kind == Value::Float) return Value::real(n.kind == Node::Neg ? -v.f : v.f);
        if (v.kind == Value::Int || v.kind == Value::Bool) {
          if (n.kind == Node::Neg && as_int64(v) == INT64_MIN) fail(n.line, "integer overflow");
          return Value::integer(n.kind == Node::Neg ? -as_int64(v) : as_int64(v));
        }
        if (v.kind == Value::Undefined) undefined_error(v, n.line);
        fail(n.line,
             "bad operand type for unary " + std::string(n.kind == Node::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
      }
      case Node::Not: return Value::boolean(!truthy(eval(*n.a[0], fr)));
      case Node::And: {
        Value l = eval(*n.a[0], fr);
        return truthy(l) ? eval(*n.a[1], fr) : l;
      }
      case Node::Or: {
        Value l = eval(*n.a[0], fr);
        return truthy(l) ? l : eval(*n.a[1], fr);
      }
      case Node::Bin: {
        const Value x = eval(*n.a[0], fr);
        const Value y = eval(*n.a[1], fr);
        return binop(n.name, x, y, n.line);
      }
      case Node::Compare: {
        Value x = eval(*n.a[0], fr);
        for (size_t k = 0; k < n.names.size(); ++k) {
          Value y = eval(*n.a[k + 1], fr);
          if (!compare(n.names[k], x, y, n.line)) return Value::boolean(false);
          x = std::move(y);
        }
        return Value::boolean(true);
      }
      case Node::Cond:
        if (truthy(eval(*n.a[1], fr))) return eval(*n.a[0], fr);
        return n.a[2] ? eval(*n.a[2], fr) : Value::undefined();
      case Node::ListLit:
      case Node::TupleLit: {
        List l;
        for (const auto& e : n.a) l.push_back(eval(*e, fr));
        return Value::of_list(std::move(l), n.kind == Node::TupleLit);
      }
      case Node::DictLit: {
        Dict d;
        for (size_t k = 0; k < n.a.size(); k += 2) {
          const Value key = eval(*n.a[k], fr);
          const std::string ks = dict_key(key, n.line);
          Value v = eval(*n.a[k + 1], fr);
          auto it = std::find_if(d.begin(), d.end(), [&](auto& kv) { return kv.first == ks; });
          if (it != d.end()) it->second = std::move(v);
          else d.emplace_back(ks, std::move(v));
        }
        return Value::of_dict(std::move(d));
      }
      default: fail(n.line, "not an expression");
    }
  }

  // ---------- statements
  static bool holds_ns(const Value& v, const Dict* ns) {
    if (v.kind == Value::NS) {
      if (v.ns.get() == ns) return true;
      for (const auto& kv : *v.ns)
        if (holds_ns(kv.second, ns)) return true;
    } else if (v.kind == Value::ListK) {
      for (const Value& x : *v.list)
        if (holds_ns(x, ns)) return true;
    } else if (v.kind == Value::DictK) {
      for (const auto& kv : *v.dict)
        if (holds_ns(kv.second, ns)) return true;
    }
    return false;
  }
  void emit(std::string& out, std::string_view s, int line) {
    out += s;
    check_size(out.size(), line);
  }
  void assign(Frame& fr, const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      fr.vars[targets[0]] = v;
      return;
    }
    const List items = iterate(v, line);
    if (items.size() != targets.size())
      fail(line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) +
                     " names");
    for (size_t k = 0; k < targets.size(); ++k) fr.vars[targets[k]] = items[k];
  }
  int loop_ctl = 0;  // 1: a break, 2: a continue is unwinding to its loop
  void exec(const Body& body, const FrameP& fr, std::string& out) {
    for (const NodeP& np : body) {
      exec_one(*np, fr, out);
      if (loop_ctl) return;
    }
  }
  void exec_one(const Node& n, const FrameP& fr, std::string& out) {
    step(n.line);
    switch (n.kind) {
      case Node::Text: emit(out, n.name, n.line); return;
      case Node::Print: {
        const Value v = eval(*n.a[0], *fr);
        if (v.kind == Value::Func) fail(n.line, "printing a function is not supported");
        emit(out, to_str(v), n.line);
        return;
      }
      case Node::If:
        for (size_t k = 0; k < n.a.size(); ++k)
          if (truthy(eval(*n.a[k], *fr))) return exec(n.bodies[k], fr, out);
        return exec(n.else_body, fr, out);
      case Node::For: return exec_for(n, fr, out);
      case Node::Set: assign(*fr, n.names, eval(*n.a[0], *fr), n.line); return;
      case Node::SetNs: {
        const Value* ns = fr->lookup(n.name);
        if (!ns || ns->kind != Value::NS)
          fail(n.line, "cannot assign attribute on non-namespace object '" + n.name + "'");
        Value v = eval(*n.a[0], *fr);
        if (holds_ns(v, ns->ns.get())) fail(n.line, "a namespace cannot hold itself");
        for (auto& kv : *ns->ns)
          if (kv.first == n.names[0]) {
            kv.second = std::move(v);
            return;
          }
        ns->ns->emplace_back(n.names[0], std::move(v));
        return;
      }
      case Node::SetBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = fr;
        std::string text;
        exec(n.bodies[0], inner, text);
        Value v = Value::str(std::move(text));
        for (const auto& f : n.a) {
          Args a = eval_args(*f, 1, *fr);
          v = filter(f->name, v, a, f->line);
        }
        fr->vars[n.name] = std::move(v);
        return;
      }
      case Node::Macro: fr->vars[n.name] = make_macro(n, fr, false); return;
      case Node::Break: loop_ctl = 1; return;
      case Node::Continue: loop_ctl = 2; return;
      case Node::CallBlock: {
        const Node& c = *n.a[0];
        const Value f = eval(*c.a[0], *fr);
        Args a = eval_args(c, 1, *fr);
        a.kw.emplace_back("caller", make_macro(n, fr, true));
        emit(out, to_str(call(f, a, n.line)), n.line);
        return;
      }
      case Node::FilterBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = fr;
        std::string text;
        exec(n.bodies[0], inner, text);
        Value v = Value::str(std::move(text));
        for (const auto& f : n.a) {
          if (f->flag) fail(f->line, "no filter named '" + f->name + "'");
          Args a = eval_args(*f, 1, *fr);
          v = filter(f->name, v, a, f->line);
        }
        emit(out, to_str(v), n.line);
        return;
      }
      default: fail(n.line, "not a statement");
    }
  }
  void exec_for(const Node& n, const FrameP& fr, std::string& out) {
    const List all = iterate(eval(*n.a[0], *fr), n.line);
    List items;
    if (n.a[1]) {
      for (const Value& v : all) {
        step(n.line);
        Frame probe;
        probe.parent = fr;
        assign(probe, n.names, v, n.line);
        if (truthy(eval(*n.a[1], probe))) items.push_back(v);
      }
    } else {
      items = all;
    }
    if (items.empty()) return exec(n.else_body, fr, out);
    const size_t len = items.size();
    for (size_t i = 0; i < len; ++i) {
      step(n.line);
      auto it = std::make_shared<Frame>();
      it->parent = fr;
      assign(*it, n.names, items[i], n.line);
      if (!n.negated) {
        exec(n.bodies[0], it, out);
        if (std::exchange(loop_ctl, 0) == 1) break;
        continue;
      }
      Dict loop;
      loop.emplace_back("index", Value::integer(int64_t(i) + 1));
      loop.emplace_back("index0", Value::integer(int64_t(i)));
      loop.emplace_back("revindex", Value::integer(int64_t(len - i)));
      loop.emplace_back("revindex0", Value::integer(int64_t(len - i - 1)));
      loop.emplace_back("first", Value::boolean(i == 0));
      loop.emplace_back("last", Value::boolean(i + 1 == len));
      loop.emplace_back("length", Value::integer(int64_t(len)));
      loop.emplace_back("depth", Value::integer(1));
      loop.emplace_back("depth0", Value::integer(0));
      loop.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("previtem"));
      loop.emplace_back("nextitem", i + 1 < len ? items[i + 1] : Value::undefined("nextitem"));
      loop.emplace_back("cycle", Value::function([i](Args& a) -> Value {
                          if (a.pos.empty()) fail(0, "loop.cycle() needs at least one argument");
                          return a.pos[i % a.pos.size()];
                        }));
      it->vars["loop"] = Value::of_dict(std::move(loop));
      exec(n.bodies[0], it, out);
      const int ctl = std::exchange(loop_ctl, 0);
      if (ctl == 1) break;
    }
  }
};

Value Interp::make_macro(const Node& n, const FrameP& defined_in, bool is_caller) {
  Interp* in = this;
  const Node* node = &n;
  const size_t first_default = is_caller ? 1 : 0;  // a call block's a[0] is the call
  std::weak_ptr<Frame> scope = defined_in;         // a strong one would be a cycle: the scope holds the macro
  return Value::function([in, node, scope, first_default](Args& args) -> Value {
    auto fr = std::make_shared<Frame>();
    fr->parent = scope.lock();
    if (!fr->parent) fail(0, "macro '" + node->name + "' called after its scope ended");
    const auto& params = node->names;
    if (args.pos.size() > params.size())
      fail(0, "macro '" + node->name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    for (size_t k = 0; k < params.size(); ++k) {
      Value v = Value::undefined(params[k]);
      bool have = false;
      if (k < args.pos.size()) {
        v = args.pos[k];
        have = true;
      }
      for (size_t j = 0; j < args.kw.size(); ++j)
        if (args.kw[j].first == params[k]) {
          if (have) fail(0, "macro '" + node->name + "' got multiple values for argument '" + params[k] + "'");
          v = std::move(args.kw[j].second);
          args.kw.erase(args.kw.begin() + long(j));
          have = true;
          break;
        }
      if (!have && node->a[first_default + k]) v = in->eval(*node->a[first_default + k], *fr);
      fr->vars[params[k]] = std::move(v);
    }
    for (auto& [k, v] : args.kw) {
      if (k == "caller") {
        fr->vars["caller"] = v;
        continue;
      }
      fail(0, "macro '" + node->name + "' takes no keyword argument '" + k + "'");
    }
    std::string out;
    in->exec(node->bodies[0], fr, out);
    return Value::str(std::move(out));
  });
}

// ---------- str / dict / list methods

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  if (chars.kind == Value::None || chars.kind == Value::Undefined) {
    size_t a = left ? py_lstrip_pos(s, 0) : 0;
    size_t b = right ? py_rstrip_pos(s, a) : s.size();
    return s.substr(a, b - a);
  }
  if (!chars.is_str()) fail(0, "strip arg must be None or str");
  const auto cps = to_cps(s), set = to_cps(chars.s);
  auto in = [&](uint32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t a = 0, b = cps.size();
  if (left)
    while (a < b && in(cps[a])) ++a;
  if (right)
    while (b > a && in(cps[b - 1])) --b;
  return from_cps(cps, a, b);
}

std::vector<std::string> py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep.kind == Value::None || sep.kind == Value::Undefined) {
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < s.size()) {
      i = py_lstrip_pos(s, i);
      if (i >= s.size()) break;
      size_t j = i;
      while (j < s.size() && !py_space_len(s, j)) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit < 0 || size_t(maxsplit) >= words.size()) {
      for (auto [a, b] : words) out.push_back(s.substr(a, b - a));
      return out;
    }
    if (!from_right) {
      for (size_t k = 0; k < size_t(maxsplit); ++k)
        out.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      const size_t rest = words[size_t(maxsplit)].first;
      out.push_back(s.substr(rest, py_rstrip_pos(s, rest) - rest));
    } else {
      const size_t keep = words.size() - size_t(maxsplit);
      const size_t a = py_lstrip_pos(s, 0);
      out.push_back(s.substr(a, words[keep - 1].second - a));
      for (size_t k = keep; k < words.size(); ++k)
        out.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return out;
  }
  if (!sep.is_str()) fail(0, "split: the separator must be a str or None");
  if (sep.s.empty()) fail(0, "split: empty separator");
  const std::string& d = sep.s;
  if (!from_right) {
    size_t start = 0;
    for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
      const size_t at = s.find(d, start);
      if (at == std::string::npos) break;
      out.push_back(s.substr(start, at - start));
      start = at + d.size();
    }
    out.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    rev.push_back(s.substr(0, end));
    out.assign(rev.rbegin(), rev.rend());
  }
  return out;
}

Value str_list(const std::vector<std::string>& parts, bool markup) {
  List l;
  for (const auto& p : parts) l.push_back(Value::str(p, markup));
  return Value::of_list(std::move(l));
}

int64_t int_arg(const Value& v, int64_t dflt, const char* what) {
  if (v.kind == Value::Undefined || v.kind == Value::None) return dflt;
  if (v.kind == Value::Int) return v.i;
  if (v.kind == Value::Bool) return v.b;
  fail(0, std::string(what) + " must be an integer");
}

std::string py_format(Interp& in, const std::string& fmt, Args& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t end = fmt.find('}', i);
      if (end == std::string::npos) fail(0, "format: single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, end - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        fail(0, "format: conversions and format specs are not supported: {" + field + "}");
      Value v;
      if (field.empty()) {
        if (auto_index >= a.pos.size()) fail(0, "format: replacement index out of range");
        v = a.pos[auto_index++];
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        const size_t k = std::stoul(field);
        if (k >= a.pos.size()) fail(0, "format: replacement index out of range");
        v = a.pos[k];
      } else {
        bool found = false;
        for (auto& kv : a.kw)
          if (kv.first == field) {
            v = kv.second;
            found = true;
          }
        if (!found) fail(0, "format: no argument '" + field + "'");
      }
      out += to_str(v);
      in.check_size(out.size(), 0);
      i = end;
    } else if (c == '}') {
      fail(0, "format: single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

Value Interp::method(const Value& obj, const std::string& name, bool* found) {
  *found = true;
  if (obj.kind == Value::Str) {
    static const std::unordered_map<std::string, Method> m = {
        {"strip",
         [](Interp&, const Value& s, Args& a, int) {
           return Value::str(strip_chars(s.s, a.get(0, "chars", Value::none()), true, true), s.markup);
         }},
        {"lstrip",
         [](Interp&, const Value& s, Args& a, int) {
           return Value::str(strip_chars(s.s, a.get(0, "chars", Value::none()), true, false), s.markup);
         }},
        {"rstrip",
         [](Interp&, const Value& s, Args& a, int) {
           return Value::str(strip_chars(s.s, a.get(0, "chars", Value::none()), false, true), s.markup);
         }},
        {"split",
         [](Interp&, const Value& s, Args& a, int) {
           const Value sep = a.get(0, "sep", Value::none());
           return str_list(py_split(s.s, sep, int_arg(a.get(1, "maxsplit"), -1, "maxsplit"), false), s.markup);
         }},
        {"rsplit",
         [](Interp&, const Value& s, Args& a, int) {
           const Value sep = a.get(0, "sep", Value::none());
           return str_list(py_split(s.s, sep, int_arg(a.get(1, "maxsplit"), -1, "maxsplit"), true), s.markup);
         }},
        {"splitlines", [](Interp&, const Value& s, Args&, int) { return str_list(py_splitlines(s.s), s.markup); }},
        {"upper", [](Interp&, const Value& s, Args&, int) { return Value::str(map_case(s.s, cp_upper), s.markup); }},
        {"lower", [](Interp&, const Value& s, Args&, int) { return Value::str(map_case(s.s, cp_lower), s.markup); }},
        {"title", [](Interp&, const Value& s, Args&, int) { return Value::str(py_title(s.s), s.markup); }},
        {"capitalize", [](Interp&, const Value& s, Args&, int) { return Value::str(py_capitalize(s.s), s.markup); }},
        {"startswith",
         [](Interp&, const Value& s, Args& a, int) {
           const Value p = a.get(0, "prefix");
           auto one = [&](const Value& x) {
             if (!x.is_str()) fail(0, "startswith first arg must be str or a tuple of str");
             return s.s.compare(0, x.s.size(), x.s) == 0;
           };
           if (p.kind == Value::ListK && p.tuple) {
             for (const Value& x : *p.list)
               if (one(x)) return Value::boolean(true);
             return Value::boolean(false);
           }
           return Value::boolean(one(p));
         }},
        {"endswith",
         [](Interp&, const Value& s, Args& a, int) {
           const Value p = a.get(0, "suffix");
           auto one = [&](const Value& x) {
             if (!x.is_str()) fail(0, "endswith first arg must be str or a tuple of str");
             return s.s.size() >= x.s.size() && s.s.compare(s.s.size() - x.s.size(), x.s.size(), x.s) == 0;
           };
           if (p.kind == Value::ListK && p.tuple) {
             for (const Value& x : *p.list)
               if (one(x)) return Value::boolean(true);
             return Value::boolean(false);
           }
           return Value::boolean(one(p));
         }},
        {"replace",
         [](Interp& in, const Value& s, Args& a, int) {
           const Value o = a.get(0, "old"), nw = a.get(1, "new");
           if (!o.is_str() || !nw.is_str()) fail(0, "replace: arguments must be str");
           int64_t count = int_arg(a.get(2, "count"), -1, "count");
           std::string out;
           if (o.s.empty()) {
             const auto cps = to_cps(s.s);
             for (size_t k = 0; k <= cps.size(); ++k) {
               if (count < 0 || int64_t(k) < count) out += nw.s;
               if (k < cps.size()) append_utf8(out, cps[k]);
               in.check_size(out.size(), 0);
             }
             return Value::str(std::move(out), s.markup);
           }
           size_t start = 0;
           for (int64_t n = 0; count < 0 || n < count; ++n) {
             const size_t at = s.s.find(o.s, start);
             if (at == std::string::npos) break;
             out += s.s.substr(start, at - start) + nw.s;
             in.check_size(out.size(), 0);
             start = at + o.s.size();
           }
           out += s.s.substr(start);
           return Value::str(std::move(out), s.markup);
         }},
        {"find",
         [](Interp&, const Value& s, Args& a, int) {
           const Value x = a.get(0, "sub");
           if (!x.is_str()) fail(0, "find: argument must be str");
           const size_t at = s.s.find(x.s);
           return Value::integer(at == std::string::npos ? -1 : int64_t(to_cps(s.s.substr(0, at)).size()));
         }},
        {"rfind",
         [](Interp&, const Value& s, Args& a, int) {
           const Value x = a.get(0, "sub");
           if (!x.is_str()) fail(0, "rfind: argument must be str");
           const size_t at = s.s.rfind(x.s);
           return Value::integer(at == std::string::npos ? -1 : int64_t(to_cps(s.s.substr(0, at)).size()));
         }},
        {"count",
         [](Interp&, const Value& s, Args& a, int) {
           const Value x = a.get(0, "sub");
           if (!x.is_str()) fail(0, "count: argument must be str");
           if (x.s.empty()) return Value::integer(int64_t(to_cps(s.s).size()) + 1);
           int64_t n = 0;
           for (size_t at = s.s.find(x.s); at != std::string::npos; at = s.s.find(x.s, at + x.s.size())) ++n;
           return Value::integer(n);
         }},
        {"join",
         [](Interp& in, const Value& s, Args& a, int) {
           std::string out;
           bool first = true;
           for (const Value& v : in.iterate(a.get(0, "iterable"), 0)) {
             if (!v.is_str()) fail(0, "join: sequence item: expected str instance, " + type_name(v) + " found");
             if (!first) out += s.s;
             out += v.s;
             first = false;
             in.check_size(out.size(), 0);
           }
           return Value::str(std::move(out), s.markup);
         }},
        {"format", [](Interp& in, const Value& s, Args& a, int) { return Value::str(py_format(in, s.s, a)); }},
        {"removeprefix",
         [](Interp&, const Value& s, Args& a, int) {
           const Value p = a.get(0, "prefix");
           if (!p.is_str()) fail(0, "removeprefix: argument must be str");
           return Value::str(s.s.compare(0, p.s.size(), p.s) == 0 ? s.s.substr(p.s.size()) : s.s, s.markup);
         }},
        {"removesuffix",
         [](Interp&, const Value& s, Args& a, int) {
           const Value p = a.get(0, "suffix");
           if (!p.is_str()) fail(0, "removesuffix: argument must be str");
           const bool ends = !p.s.empty() && s.s.size() >= p.s.size() &&
                             s.s.compare(s.s.size() - p.s.size(), p.s.size(), p.s) == 0;
           return Value::str(ends ? s.s.substr(0, s.s.size() - p.s.size()) : s.s, s.markup);
         }},
        {"isdigit",
         [](Interp&, const Value& s, Args&, int) {
           return Value::boolean(!s.s.empty() &&
                                 std::all_of(s.s.begin(), s.s.end(), [](char c) { return c >= '0' && c <= '9'; }));
         }},
        {"isspace", [](Interp&, const Value& s, Args&,
                       int) { return Value::boolean(!s.s.empty() && py_lstrip_pos(s.s, 0) == s.s.size()); }},
    };
    auto it = m.find(name);
    if (it != m.end()) return bound(obj, it->second);
  } else if (obj.kind == Value::DictK) {
    static const std::unordered_map<std::string, Method> m = {
        {"get",
         [](Interp&, const Value& d, Args& a, int) {
           const Value k = a.get(0, "key");
           const Value dflt = a.get(1, "default", Value::none());
           if (k.is_str())
             if (const Value* v = d.find(k.s)) return *v;
           return dflt;
         }},
        {"items",
         [](Interp&, const Value& d, Args&, int) {
           List l;
           for (const auto& [k, v] : *d.dict) l.push_back(Value::of_list({key_value(k), v}, true));
           return Value::of_list(std::move(l));
         }},
        {"keys",
         [](Interp&, const Value& d, Args&, int) {
           List l;
           for (const auto& kv : *d.dict) l.push_back(key_value(kv.first));
           return Value::of_list(std::move(l));
         }},
        {"values",
         [](Interp&, const Value& d, Args&, int) {
           List l;
           for (const auto& kv : *d.dict) l.push_back(kv.second);
           return Value::of_list(std::move(l));
         }},
    };
    auto it = m.find(name);
    if (it != m.end()) return bound(obj, it->second);
    if (name == "pop" || name == "update" || name == "clear" || name == "setdefault" || name == "popitem")
      return unsafe(name);
  } else if (obj.kind == Value::ListK) {
    if (name == "append" || name == "pop" || name == "insert" || name == "extend" || name == "remove" ||
        name == "sort" || name == "reverse" || name == "clear")
      return unsafe(name);
    if (name == "index" || name == "count") {
      const bool idx = name == "index";
      return bound(obj, idx ? Method([](Interp&, const Value& l, Args& a, int) {
                     const Value x = a.get(0, "value");
                     for (size_t k = 0; k < l.list->size(); ++k)
                       if (py_equal((*l.list)[k], x)) return Value::integer(int64_t(k));
                     fail(0, "list.index(x): x not in list");
                   })
                            : Method([](Interp&, const Value& l, Args& a, int) {
                                const Value x = a.get(0, "value");
                                int64_t n = 0;
                                for (const Value& v : *l.list) n += py_equal(v, x);
                                return Value::integer(n);
                              }));
    }
  }
  *found = false;
  return Value::undefined(name);
}

// ---------- filters and tests

Value attr_path(Interp& in, const Value& item, const std::string& path, int line) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Value key = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos
                    ? Value::integer(std::stoll(part))
                    : Value::str(part);
    if (v.kind == Value::Undefined) return v;
    v = in.getitem(v, key, line);
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value Interp::filter(const std::string& name, const Value& v, Args& a, int line) {
  Value r = filter_impl(name, v, a, line);
  if (!a.kw.empty()) fail(line, "filter '" + name + "' got an unexpected keyword argument '" + a.kw[0].first + "'");
  return r;
}

Value Interp::filter_impl(const std::string& name, const Value& v, Args& a, int line) {
  step(line);
  auto need_str = [&](const Value& x) { return to_str(x); };
  if (name == "tojson") {
    // tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    if (a.pos.size() > 4) fail(line, "tojson() takes from 1 to 5 positional arguments");
    JsonOpts o;
    o.ensure_ascii = truthy(a.get(0, "ensure_ascii", Value::boolean(false)));
    const Value ind = a.get(1, "indent", Value::none());
    const Value seps = a.get(2, "separators", Value::none());
    o.sort_keys = truthy(a.get(3, "sort_keys", Value::boolean(false)));
    if (ind.kind != Value::None) {
      o.indent = true;
      if (ind.is_str()) o.indent_str = ind.s;
      else if (ind.kind == Value::Int || ind.kind == Value::Bool)
        o.indent_str = std::string(size_t(std::clamp<int64_t>(as_int64(ind), 0, 64)), ' ');
      else fail(line, "tojson: indent must be an integer or a string");
      o.item_sep = ",";
    }
    if (seps.kind != Value::None) {
      if (seps.kind != Value::ListK || seps.list->size() != 2 || !(*seps.list)[0].is_str() || !(*seps.list)[1].is_str())
        fail(line, "tojson: separators must be a pair of strings");
      o.item_sep = (*seps.list)[0].s;
      o.key_sep = (*seps.list)[1].s;
    }
    std::string s = to_json(v, o, line);
    check_size(s.size(), line);
    return Value::str(std::move(s));
  }
  if (name == "length" || name == "count") {
    switch (v.kind) {
      case Value::Str: return Value::integer(int64_t(to_cps(v.s).size()));
      case Value::ListK:
        if (v.gen) fail(line, "object of type 'generator' has no len()");
        return Value::integer(int64_t(v.list->size()));
      case Value::DictK: return Value::integer(int64_t(v.dict->size()));
      case Value::Undefined: return Value::integer(0);
      default: fail(line, "object of type '" + type_name(v) + "' has no len()");
    }
  }
  if (name == "string") return v.is_str() ? v : Value::str(to_str(v));
  if (name == "trim")
    return Value::str(strip_chars(need_str(v), a.get(0, "chars", Value::none()), true, true), v.markup);
  if (name == "default" || name == "d") {
    const Value dflt = a.get(0, "default_value", Value::str(""));
    const bool boolean = truthy(a.get(1, "boolean", Value::boolean(false)));
    if (v.kind == Value::Undefined || (boolean && !truthy(v))) return dflt;
    return v;
  }
  if (name == "upper") return Value::str(map_case(to_str(v), cp_upper), v.markup);
  if (name == "lower") return Value::str(map_case(to_str(v), cp_lower), v.markup);
  if (name == "capitalize") return Value::str(py_capitalize(to_str(v)), v.markup);
  if (name == "title") return Value::str(py_title(to_str(v)), v.markup);
  if (name == "safe") return Value::str(to_str(v), true);
  if (name == "escape" || name == "e" || name == "forceescape")
    return v.markup && name != "forceescape" ? v : Value::str(html_escape(to_str(v)), true);
  if (name == "list") return Value::of_list(iterate(v, line));
  if (name == "first" || name == "last") {
    if (name == "last" && v.gen) fail(line, "last: 'generator' object is not reversible");
    const List l = iterate(v, line);
    if (l.empty()) return Value::undefined(name);
    return name == "first" ? l.front() : l.back();
  }
  if (name == "reverse") {
    if (v.is_str()) {
      auto cps = to_cps(v.s);
      std::reverse(cps.begin(), cps.end());
      return Value::str(from_cps(cps, 0, cps.size()), v.markup);
    }
    if (v.gen) fail(line, "reverse: 'generator' object is not reversible");
    List l = iterate(v, line);
    std::reverse(l.begin(), l.end());
    return generator(std::move(l));
  }
  if (name == "join") {
    const Value sep = a.get(0, "d", Value::str(""));
    const Value attr = a.get(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (Value x : iterate(v, line)) {
      if (attr.is_str()) x = attr_path(*this, x, attr.s, line);
      if (!first) out += to_str(sep);
      out += to_str(x);
      first = false;
      check_size(out.size(), line);
    }
    return Value::str(std::move(out));
  }
  if (name == "replace") {
    Args m;
    m.pos = {a.get(0, "old"), a.get(1, "new"), a.get(2, "count", Value::none())};
    bool found;
    return call(method(Value::str(to_str(v)), "replace", &found), m, line);
  }
  if (name == "items") {
    if (v.kind == Value::Undefined) return generator({});
    if (v.kind != Value::DictK) fail(line, "items: can only get item pairs from a mapping, not " + type_name(v));
    bool found;
    Args none;
    Value r = call(method(v, "items", &found), none, line);
    r.gen = true;
    return r;
  }
  if (name == "dictsort") {
    if (v.kind != Value::DictK) fail(line, "dictsort: a mapping is required, not " + type_name(v));
    const bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
    const Value by = a.get(1, "by", Value::str("key"));
    const bool rev = truthy(a.get(2, "reverse", Value::boolean(false)));
    List l;
    for (const auto& [k, x] : *v.dict) l.push_back(Value::of_list({key_value(k), x}, true));
    const size_t pos = by.is_str() && by.s == "value" ? 1 : 0;
    auto key = [&](const Value& p) {
      Value x = (*p.list)[pos];
      if (!cs && x.is_str()) x = Value::str(map_case(x.s, cp_lower));
      return x;
    };
    std::stable_sort(l.begin(), l.end(),
                     [&](const Value& p, const Value& q) { return order(key(p), key(q), "<", line) < 0; });
    if (rev) std::reverse(l.begin(), l.end());
    return Value::of_list(std::move(l));
  }
  if (name == "indent") {
    const Value w = a.get(0, "width", Value::integer(4));
    const bool first = truthy(a.get(1, "first", Value::boolean(false)));
    const bool blank = truthy(a.get(2, "blank", Value::boolean(false)));
    const std::string ind = w.is_str() ? w.s
                                       : std::string(size_t(std::clamp<int64_t>(int_arg(w, 4, "width"), 0, 1024)), ' ');
    const std::vector<std::string> lines = py_splitlines(to_str(v) + "\n");
    std::string rv;
    if (blank) {
      for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind) + lines[k];
    }
    if (first) rv = ind + rv;
    check_size(rv.size(), line);
    return Value::str(std::move(rv), v.markup);
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name.ends_with("attr"), keep = name.starts_with("select");
    std::string attr;
    if (by_attr) {
      const Value at = a.pos.empty() ? Value::undefined() : a.pos[0];
      if (!at.is_str()) fail(line, name + ": the attribute must be a string");
      attr = at.s;
    }
    const size_t t0 = by_attr ? 1 : 0;
    std::string tname;
    Args targs;
    if (a.pos.size() > t0) {
      if (!a.pos[t0].is_str()) fail(line, name + ": the test must be a name");
      tname = a.pos[t0].s;
      targs.pos.assign(a.pos.begin() + long(t0) + 1, a.pos.end());
    }
    List out;
    for (const Value& x : truthy(v) ? iterate(v, line) : List{}) {
      const Value probe = by_attr ? attr_path(*this, x, attr, line) : x;
      Args ta = targs;
      const bool ok = tname.empty() ? truthy(probe) : test(tname, probe, ta, line);
      if (ok == keep) out.push_back(x);
    }
    return generator(std::move(out));
  }
  if (name == "map") {
    const Value attr = a.get(99, "attribute");
    List out;
    if (attr.is_str()) {
      const Value dflt = a.get(99, "default");
      for (const Value& x : truthy(v) ? iterate(v, line) : List{}) {
        Value r = attr_path(*this, x, attr.s, line);
        out.push_back(r.kind == Value::Undefined && dflt.kind != Value::Undefined ? dflt : r);
      }
      return generator(std::move(out));
    }
    if (a.pos.empty() || !a.pos[0].is_str()) fail(line, "map: a filter name or attribute= is required");
    const std::string f = a.pos[0].s;
    for (const Value& x : truthy(v) ? iterate(v, line) : List{}) {
      Args fa;
      fa.pos.assign(a.pos.begin() + 1, a.pos.end());
      fa.kw = a.kw;
      out.push_back(filter(f, x, fa, line));
    }
    a.kw.clear();
    return generator(std::move(out));
  }
  if (name == "unique") {
    List out;
    for (const Value& x : iterate(v, line)) {
      bool dup = false;
      for (const Value& y : out)
        dup = dup || py_equal(x.is_str() ? Value::str(map_case(x.s, cp_lower)) : x,
                              y.is_str() ? Value::str(map_case(y.s, cp_lower)) : y);
      if (!dup) out.push_back(x);
    }
    return generator(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max") {
    const bool sort = name == "sort";
    const bool rev = sort && truthy(a.get(0, "reverse", Value::boolean(false)));
    const bool cs = truthy(a.get(sort ? 1 : 0, "case_sensitive", Value::boolean(false)));
    const Value attr = a.get(sort ? 2 : 1, "attribute", Value::none());
    List l = iterate(v, line);
    auto key = [&](const Value& x) {
      Value k = attr.is_str() ? attr_path(*this, x, attr.s, line) : x;
      if (!cs && k.is_str()) k = Value::str(map_case(k.s, cp_lower));
      return k;
    };
    auto less = [&](const Value& p, const Value& q) { return order(key(p), key(q), "<", line) < 0; };
    if (!sort) {
      if (l.empty()) return Value::undefined(name);
      return name == "min" ? *std::min_element(l.begin(), l.end(), less) : *std::max_element(l.begin(), l.end(), less);
    }
    if (rev) std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) { return less(q, p); });
    else std::stable_sort(l.begin(), l.end(), less);
    return Value::of_list(std::move(l));
  }
  if (name == "sum") {
    const Value attr = a.get(0, "attribute", Value::none());
    Value total = a.get(1, "start", Value::integer(0));
    for (const Value& x : iterate(v, line))
      total = binop("+", total, attr.is_str() ? attr_path(*this, x, attr.s, line) : x, line);
    return total;
  }
  if (name == "int") {
    const Value dflt = a.get(0, "default", Value::integer(0));
    if (v.kind == Value::Int) return v;
    if (v.kind == Value::Bool) return Value::integer(v.b);
    if (v.kind == Value::Float)
      return std::isfinite(v.f) && std::fabs(v.f) < 9.2e18 ? Value::integer(int64_t(v.f)) : dflt;
    if (v.is_str()) {
      const std::string t = strip_chars(v.s, Value::none(), true, true);
      char* end = nullptr;
      errno = 0;
      const long long r = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == 0 && errno == 0) return Value::integer(r);
      const double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value::integer(int64_t(d));
    }
    return dflt;
  }
  if (name == "float") {
    const Value dflt = a.get(0, "default", Value::real(0));
    if (v.kind == Value::Float) return v;
    if (v.kind == Value::Int || v.kind == Value::Bool) return Value::real(as_double(v));
    if (v.is_str()) {
      const std::string t = strip_chars(v.s, Value::none(), true, true);
      char* end = nullptr;
      const double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == 0) return Value::real(d);
    }
    return dflt;
  }
  if (name == "abs") {
    if (v.kind == Value::Float) return Value::real(std::fabs(v.f));
    if (v.kind == Value::Int || v.kind == Value::Bool) return Value::integer(std::llabs(as_int64(v)));
    fail(line, "bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "wordcount") return Value::integer(int64_t(py_split(to_str(v), Value::none(), -1, false).size()));
  fail(line, "the filter '" + name + "' is not supported");
}

bool Interp::test(const std::string& name, const Value& v, Args& a, int line) {
  step(line);
  const Value arg = a.pos.empty() ? Value::undefined() : a.pos[0];
  if (name == "defined") return v.kind != Value::Undefined;
  if (name == "undefined") return v.kind == Value::Undefined;
  if (name == "none") return v.kind == Value::None;
  if (name == "boolean") return v.kind == Value::Bool;
  if (name == "true") return v.kind == Value::Bool && v.b;
  if (name == "false") return v.kind == Value::Bool && !v.b;
  if (name == "integer") return v.kind == Value::Int;
  if (name == "float") return v.kind == Value::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_str();
  if (name == "mapping") return v.kind == Value::DictK;
  if (name == "iterable")
    return v.kind == Value::Undefined || v.is_str() || v.kind == Value::ListK || v.kind == Value::DictK;
  if (name == "sequence")
    return v.kind == Value::Undefined || v.is_str() || v.kind == Value::ListK || v.kind == Value::DictK;
  if (name == "callable") return v.kind == Value::Func || v.kind == Value::Undefined;
  if (name == "escaped") return v.markup;
  if (name == "sameas") {
    if (v.kind != arg.kind) return false;
    if (v.kind == Value::None || v.kind == Value::Undefined) return v.kind == Value::None;
    if (v.kind == Value::Bool) return v.b == arg.b;
    return py_equal(v, arg) && (v.kind == Value::Int ? v.i >= -5 && v.i <= 256
                                                     : v.kind != Value::Float && v.list == arg.list &&
                                                           v.dict == arg.dict && v.fn == arg.fn && v.ns == arg.ns);
  }
  if (name == "lower" || name == "upper") {
    const std::string s = to_str(v);
    bool cased = false;
    for (uint32_t c : to_cps(s)) {
      if (cp_upper(c) != cp_lower(c)) {
        cased = true;
        if ((name == "lower") != (cp_lower(c) == c)) return false;
      }
    }
    return cased;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind != Value::Int && v.kind != Value::Bool)
      fail(line, "the test '" + name + "' needs an integer, not " + type_name(v));
    if (name == "divisibleby") {
      const int64_t d = int_arg(arg, 0, "num");
      if (d == 0) fail(line, "integer division or modulo by zero");
      return as_int64(v) % d == 0;
    }
    return (as_int64(v) % 2 != 0) == (name == "odd");
  }
  if (name == "in") return contains(arg, v, line);
  if (name == "eq" || name == "equalto" || name == "==") return py_equal(v, arg);
  if (name == "ne" || name == "!=") return !py_equal(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return order(v, arg, "<", line) < 0;
  if (name == "le" || name == "<=") return order(v, arg, "<=", line) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return order(v, arg, ">", line) > 0;
  if (name == "ge" || name == ">=") return order(v, arg, ">=", line) >= 0;
  fail(line, "the test '" + name + "' is not supported");
}

Value make_globals_range() {
  return Value::function([](Args& a) -> Value {
    if (a.pos.empty() || a.pos.size() > 3) fail(0, "range expected 1 to 3 integer arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = int_arg(a.pos[0], 0, "range stop");
    } else {
      start = int_arg(a.pos[0], 0, "range start");
      stop = int_arg(a.pos[1], 0, "range stop");
      if (a.pos.size() == 3) step = int_arg(a.pos[2], 1, "range step");
    }
    if (step == 0) fail(0, "range() arg 3 must not be zero");
    List l;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (l.size() >= 100000) fail(0, "range too big: the sandbox's limit is 100000 items");
      l.push_back(Value::integer(i));
    }
    return Value::of_list(std::move(l));
  });
}

}  // namespace

Template Template::parse(std::string_view source) {
  auto impl = std::make_shared<Impl>();
  impl->body = llmk::jinja::parse(scan(source));
  return Template(std::move(impl));
}

std::string Template::render(std::string_view context_json, const RenderOptions& options) const {
  const Value ctx = from_json_text(context_json);
  auto root = std::make_shared<Frame>();
  root->vars["range"] = make_globals_range();
  root->vars["dict"] = Value::function([](Args& a) -> Value {
    Dict d;
    for (auto& kv : a.kw) d.emplace_back(kv.first, kv.second);
    return Value::of_dict(std::move(d));
  });
  root->vars["namespace"] = Value::function([](Args& a) -> Value {
    Value ns = Value::make(Value::NS);
    ns.ns = std::make_shared<Dict>();
    if (!a.pos.empty() && a.pos[0].kind == Value::DictK) *ns.ns = *a.pos[0].dict;
    for (auto& kv : a.kw) {
      auto it = std::find_if(ns.ns->begin(), ns.ns->end(), [&](auto& e) { return e.first == kv.first; });
      if (it != ns.ns->end()) it->second = kv.second;
      else ns.ns->emplace_back(kv.first, kv.second);
    }
    return ns;
  });
  root->vars["raise_exception"] = Value::function(
      [](Args& a) -> Value { fail(0, "raise_exception: " + (a.pos.empty() ? std::string() : to_str(a.pos[0]))); });
  const std::time_t now = options.now ? options.now : std::time(nullptr);
  root->vars["strftime_now"] = Value::function([now](Args& a) -> Value {
    const Value f = a.get(0, "format");
    if (!f.is_str()) fail(0, "strftime_now: the format must be a string");
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[512];
    const size_t n = f.s.size() < 200 ? std::strftime(buf, sizeof buf, f.s.c_str(), &tm) : 0;
    if (n == 0 && !f.s.empty()) fail(0, "strftime_now: cannot format '" + f.s + "'");
    return Value::str(std::string(buf, n));
  });
  for (const auto& [k, v] : *ctx.dict) root->vars[k] = v;
  Ctx cx{&options};
  Interp in(cx);
  std::string out;
  in.exec(impl_->body, root, out);
  // The frames hold macros that hold frames: break the cycles.
  root->vars.clear();
  return out;
}

}  // namespace llmk::jinja
