// Python's value semantics as jinja2 renders them: str() and repr() of values, equality,
// truthiness, json.dumps(sort_keys=True) with jinja2's HTML-safe escapes, float repr.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "chat/jinja_internal.hpp"

namespace llmk::jinja {

std::vector<uint32_t> to_cps(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n && i + size_t(k) < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + size_t(k)]) & 0x3f);
    out.push_back(cp);
    i += size_t(n);
  }
  return out;
}

std::string from_cps(const std::vector<uint32_t>& cps, size_t a, size_t b) {
  std::string out;
  for (size_t i = a; i < b; ++i) append_utf8(out, cps[i]);
  return out;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Undefined:
    case Value::None: return false;
    case Value::Bool: return v.b;
    case Value::Int: return v.i != 0;
    case Value::Float: return v.f != 0;
    case Value::Str: return !v.s.empty();
    case Value::ListK: return v.gen || !v.list->empty();
    case Value::DictK: return !v.dict->empty();
    default: return true;
  }
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // d.ddde[+-]XX, shortest round-trip digits
  const size_t e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string mant = sci.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -5 && exp < 16) {  // Python's repr: fixed notation for 1e-5 < |d| < 1e16
    if (exp >= 0) {
      if (digits.size() <= size_t(exp) + 1) {
        out += digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
      }
    } else {
      out += "0." + std::string(size_t(-exp - 1), '0') + digits;
    }
    if (exp == -5) {  // Python switches to exponent notation below 1e-4
      out = neg ? "-" : "";
      out += digits.substr(0, 1);
      if (digits.size() > 1) out += "." + digits.substr(1);
      out += "e-05";
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char eb[16];
  std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + eb;
}

namespace {

bool py_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
      (cp >= 0x205f && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff ||
      (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0xe000 && cp <= 0xf8ff) || (cp >= 0x600 && cp <= 0x605) || cp == 0x61c ||
      cp == 0x6dd || cp == 0x70f || cp >= 0xf0000 || (cp >= 0xe0000 && cp <= 0xe007f))
    return false;
  return true;
}

std::string str_repr(std::string_view s) {
  const bool has_sq = s.find('\'') != std::string_view::npos, has_dq = s.find('"') != std::string_view::npos;
  const char q = has_sq && !has_dq ? '"' : '\'';
  std::string out(1, q);
  for (uint32_t cp : to_cps(s)) {
    char buf[16];
    if (cp == uint32_t(q) || cp == '\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (!py_printable(cp)) {
      std::snprintf(buf, sizeof buf, cp <= 0xff ? "\\x%02x" : cp <= 0xffff ? "\\u%04x" : "\\U%08x", cp);
      out += buf;
    } else {
      append_utf8(out, cp);
    }
  }
  return out + q;
}

}  // namespace

std::string py_repr(const Value& v) {
  switch (v.kind) {
    case Value::Str: return str_repr(v.s);
    case Value::ListK: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + py_repr((*v.list)[k]);
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Value::DictK: {
      std::string out = "{";
      for (size_t k = 0; k < v.dict->size(); ++k)
        out += (k ? ", " : "") + py_repr(key_value((*v.dict)[k].first)) + ": " + py_repr((*v.dict)[k].second);
      return out + "}";
    }
    case Value::Undefined: return "Undefined";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Undefined: return "";
    case Value::None: return "None";
    case Value::Bool: return v.b ? "True" : "False";
    case Value::Int: return std::to_string(v.i);
    case Value::Float: return format_float(v.f);
    case Value::Str: return v.s;
    case Value::ListK:
      if (v.gen) fail(0, "printing a generator object is not supported");
      return py_repr(v);
    case Value::DictK: return py_repr(v);
    case Value::Func: return "<function>";
    case Value::NS: {
      std::string out = "<Namespace {";
      for (size_t k = 0; k < v.ns->size(); ++k)
        out += (k ? ", " : "") + str_repr((*v.ns)[k].first) + ": " + py_repr((*v.ns)[k].second);
      return out + "}>";
    }
  }
  return "";
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Float || b.kind == Value::Float) {
      const double x = a.kind == Value::Float ? a.f : a.kind == Value::Int ? double(a.i) : double(a.b);
      const double y = b.kind == Value::Float ? b.f : b.kind == Value::Int ? double(b.i) : double(b.b);
      return x == y;
    }
    const int64_t x = a.kind == Value::Int ? a.i : a.b, y = b.kind == Value::Int ? b.i : b.b;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Undefined:
    case Value::None: return true;
    case Value::Str: return a.s == b.s;
    case Value::ListK:
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!py_equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::DictK:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* o = b.find(k);
        if (!o || !py_equal(v, *o)) return false;
      }
      return true;
    case Value::Func: return a.fn == b.fn;
    case Value::NS: return a.ns == b.ns;
    default: return false;
  }
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

void json_str(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (uint32_t cp : to_cps(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7f && cp < 0x10000)) {
          std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          out += buf;
        } else if (ensure_ascii && cp >= 0x10000) {
          const uint32_t v = cp - 0x10000;
          std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          out += buf;
        } else {
          append_utf8(out, cp);
        }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOpts& o, int level, int line) {
  if (level > 512) fail(line, "tojson: nesting too deep");
  const auto newline = [&](int lv) {
    out += '\n';
    for (int k = 0; k < lv; ++k) out += o.indent_str;
  };
  switch (v.kind) {
    case Value::None: out += "null"; return;
    case Value::Bool: out += v.b ? "true" : "false"; return;
    case Value::Int: out += std::to_string(v.i); return;
    case Value::Float:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity") : format_float(v.f);
      return;
    case Value::Str: json_str(out, v.s, o.ensure_ascii); return;
    case Value::ListK: {
      if (v.gen) fail(line, "tojson: Object of type generator is not JSON serializable");
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += o.item_sep;
        if (o.indent) newline(level + 1);
        json_value(out, (*v.list)[k], o, level + 1, line);
      }
      if (o.indent) newline(level);
      out += ']';
      return;
    }
    case Value::DictK: {
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (o.sort_keys) {
        bool ints = false, strs = false;
        for (auto* kv : items) (is_int_key(kv->first) ? ints : strs) = true;
        if (ints && strs) fail(line, "tojson: '<' not supported between instances of 'int' and 'str' (sort_keys)");
        std::stable_sort(items.begin(), items.end(), [&](auto* a, auto* b) {
          if (ints) return key_value(a->first).i < key_value(b->first).i;
          return a->first < b->first;
        });
      }
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += o.item_sep;
        if (o.indent) newline(level + 1);
        const std::string& key = items[k]->first;
        json_str(out, is_int_key(key) ? key.substr(kIntKey.size()) : key, o.ensure_ascii);
        out += o.key_sep;
        json_value(out, items[k]->second, o, level + 1, line);
      }
      if (o.indent) newline(level);
      out += '}';
      return;
    }
    case Value::Undefined: fail(line, "tojson: Object of type Undefined is not JSON serializable");
    case Value::Func: fail(line, "tojson: a function is not JSON serializable");
    case Value::NS: fail(line, "tojson: Object of type Namespace is not JSON serializable");
  }
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? Value::real(double(u)) : Value::integer(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(from_json(e));
      return Value::of_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) {
        bool found = false;
        for (auto& kv : d)
          if (kv.first == k) {  // a repeated key: the last one wins, in the first one's place
            kv.second = from_json(e);
            found = true;
          }
        if (!found) d.emplace_back(k, from_json(e));
      }
      return Value::of_dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOpts& o, int line) {
  std::string out;
  json_value(out, v, o, 0, line);
  return out;
}

Value from_json_text(std::string_view json) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("llmk::jinja::Template::render: argument 'context_json' is not JSON: ") +
                          e.what());
  }
  if (!j.is_object())
    throw InvalidArgument("llmk::jinja::Template::render: argument 'context_json' must be a JSON object");
  return from_json(j);
}

}  // namespace llmk::jinja
