// JSON Schema to the grammar IR (docs/structured_output.md lists the keywords). Output is compact JSON
// (whitespace only as GrammarOptions::max_whitespace allows), properties in the schema's order. A
// grammar's language may be smaller than the schema's (e.g. no properties beyond `properties`, integer
// bounds only for `number`), never larger: every text it allows validates against the schema. Any
// keyword or value outside the subset is a GrammarError naming it and its JSON pointer.
#include <cmath>
#include <cstring>
#include <optional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/builder.hpp"

namespace llmk::grammar {
namespace {

using json = nlohmann::ordered_json;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k{"$schema",  "$id",        "$comment", "title",     "description", "default",
                                       "examples", "deprecated", "readOnly", "writeOnly", "$defs",       "definitions"};
  return k;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> k{"type",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "allOf",
                                       "$ref",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "minItems",
                                       "maxItems",
                                       "pattern",
                                       "minLength",
                                       "maxLength",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum",
                                       "multipleOf",
                                       "uniqueItems"};
  return k;
}

std::string escape_pointer(const std::string& k) {
  std::string o;
  for (char c : k) o += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return o;
}

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

int digits(int64_t x) {
  int n = 1;
  while (x >= 10) x /= 10, ++n;
  return n;
}

// Digit strings of one length, x <= y: a regex for the numbers between them.
std::string same_len(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  if (x == y) return x;
  if (x[0] == y[0]) return x.substr(0, 1) + same_len(x.substr(1), y.substr(1));
  const size_t rest = x.size() - 1;
  const std::string any = rest ? "[0-9]{" + std::to_string(rest) + "}" : "";
  if (x.substr(1) == std::string(rest, '0') && y.substr(1) == std::string(rest, '9'))
    return "[" + x.substr(0, 1) + "-" + y.substr(0, 1) + "]" + any;
  std::string o = "(" + x.substr(0, 1) + same_len(x.substr(1), std::string(rest, '9'));
  if (y[0] - x[0] > 1) o += "|[" + std::string(1, char(x[0] + 1)) + "-" + std::string(1, char(y[0] - 1)) + "]" + any;
  return o + "|" + y.substr(0, 1) + same_len(std::string(rest, '0'), y.substr(1)) + ")";
}

// Naturals without leading zeros in [a, b] (b < 0: no upper bound), as a regex; "" when empty.
std::string nat_range(int64_t a, int64_t b) {
  if (b >= 0 && a > b) return "";
  std::string o;
  const int la = digits(a), lb = b < 0 ? la : digits(b);
  for (int len = la; len <= lb; ++len) {
    int64_t p = 1;
    for (int k = 1; k < len; ++k) p *= 10;
    const int64_t lo = len == la ? a : p;
    const int64_t hi = b >= 0 && len == lb ? b : p * 10 - 1;
    o += (o.empty() ? "" : "|") + same_len(std::to_string(lo), std::to_string(hi));
  }
  if (b < 0) o += "|[1-9][0-9]{" + std::to_string(la) + ",}";
  return "(" + o + ")";
}

class SchemaCompiler {
 public:
  SchemaCompiler(Builder& b, const json& root) : b_(b), root_(root) {}

  GrammarSymbol compile(const json& s, const std::string& ptr) {
    b_.check_budget();
    if (++depth_ > 256) fail(ptr, "", "nesting is deeper than 256 schemas");
    GrammarSymbol r = compile_inner(s, ptr);
    --depth_;
    return r;
  }

 private:
  Builder& b_;
  const json& root_;
  std::map<std::string, int32_t> refs_;
  int depth_ = 0;

  [[noreturn]] void fail(const std::string& ptr, const std::string& keyword, const std::string& what) const {
    b_.fail("", (keyword.empty() ? std::string("at ") : "keyword '" + keyword + "' at ") +
                    (ptr.empty() ? "#" : "#" + ptr) + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& ptr, const std::string& keyword, const json& v) const {
    fail(ptr + "/" + escape_pointer(keyword), keyword, "is not supported (value " + shown(v) + ")");
  }

  int64_t count(const json& s, const char* k, const std::string& ptr, int64_t fallback) const {
    if (!s.contains(k)) return fallback;
    const json& v = s[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail(ptr + "/" + k, k, "must be a non-negative integer, got " + shown(v));
    return v.get<int64_t>();
  }

  GrammarSymbol literal(const json& v) {
    const int32_t r = b_.rule("const");
    b_.alt(r, b_.literal(v.dump(-1, ' ', false, json::error_handler_t::strict)));
    return Builder::ref(r);
  }

  GrammarSymbol resolve(const std::string& ref, const std::string& ptr) {
    auto it = refs_.find(ref);
    if (it != refs_.end()) return Builder::ref(it->second);
    if (ref.empty() || ref[0] != '#')
      fail(ptr + "/$ref", "$ref", "only local references (#...) are supported, got \"" + ref + "\"");
    json::json_pointer jp;
    try {
      jp = json::json_pointer(ref.substr(1));
    } catch (const json::exception&) {
      fail(ptr + "/$ref", "$ref", "\"" + ref + "\" is not a JSON pointer");
    }
    if (!root_.contains(jp)) fail(ptr + "/$ref", "$ref", "\"" + ref + "\" points to nothing");
    const int32_t r = b_.rule("ref " + ref);
    refs_[ref] = r;  // before compiling the target, so recursion refers back to r
    b_.alt(r, {compile(root_.at(jp), ref.substr(1))});
    return Builder::ref(r);
  }

  GrammarSymbol compile_inner(const json& s, const std::string& ptr) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return b_.json_value();
      fail(ptr, "", "the schema false matches nothing");
    }
    if (!s.is_object()) fail(ptr, "", "a schema must be an object or a boolean, got " + shown(s));
    std::vector<std::string> structural;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (annotations().count(it.key())) continue;
      if (!supported().count(it.key())) unsupported(ptr, it.key(), it.value());
      structural.push_back(it.key());
    }
    auto alone = [&](const char* k) {
      for (const std::string& o : structural)
        if (o != k)
          fail(ptr + "/" + escape_pointer(o), o,
               std::string("next to '") + k + "' is not supported (value " + shown(s[o]) + ")");
    };
    if (s.contains("$ref")) {
      alone("$ref");
      if (!s["$ref"].is_string()) fail(ptr + "/$ref", "$ref", "must be a string, got " + shown(s["$ref"]));
      return resolve(s["$ref"].get<std::string>(), ptr);
    }
    if (s.contains("anyOf")) {
      alone("anyOf");
      const json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) fail(ptr + "/anyOf", "anyOf", "must be a non-empty array, got " + shown(a));
      const int32_t r = b_.rule("anyOf");
      for (size_t i = 0; i < a.size(); ++i) b_.alt(r, {compile(a[i], ptr + "/anyOf/" + std::to_string(i))});
      return Builder::ref(r);
    }
    if (s.contains("allOf")) {
      alone("allOf");
      const json& a = s["allOf"];
      if (!a.is_array() || a.size() != 1)
        fail(ptr + "/allOf", "allOf", "is supported with one schema only, got " + shown(a));
      return compile(a[0], ptr + "/allOf/0");
    }
    if (s.contains("const")) return literal(s["const"]);
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail(ptr + "/enum", "enum", "must be a non-empty array, got " + shown(e));
      const int32_t r = b_.rule("enum");
      for (const json& v : e) b_.alt(r, {literal(v)});
      return Builder::ref(r);
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] != false) unsupported(ptr, "uniqueItems", s["uniqueItems"]);
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array() && !t.empty())
        for (const json& x : t) {
          if (!x.is_string()) fail(ptr + "/type", "type", "must be a string or a list of strings, got " + shown(t));
          types.push_back(x.get<std::string>());
        }
      else fail(ptr + "/type", "type", "must be a string or a non-empty list of strings, got " + shown(t));
    } else {
      // No type: the keywords present say which; none at all is any JSON value.
      auto any_of = [&](std::initializer_list<const char*> ks) {
        for (const char* k : ks)
          if (s.contains(k)) return true;
        return false;
      };
      if (any_of({"properties", "required", "additionalProperties"})) types.push_back("object");
      else if (any_of({"items", "minItems", "maxItems"})) types.push_back("array");
      else if (any_of({"pattern", "minLength", "maxLength", "format"})) types.push_back("string");
      else if (any_of({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}))
        types.push_back("number");
      else return b_.json_value();
    }
    if (types.size() == 1) return of_type(s, types[0], ptr);
    const int32_t r = b_.rule("types");
    for (const std::string& t : types) b_.alt(r, {of_type(s, t, ptr)});
    return Builder::ref(r);
  }

  GrammarSymbol of_type(const json& s, const std::string& t, const std::string& ptr) {
    if (t == "null") return literal(nullptr);
    if (t == "boolean") {
      const int32_t r = b_.rule("boolean");
      b_.alt(r, b_.literal("true"));
      b_.alt(r, b_.literal("false"));
      return Builder::ref(r);
    }
    if (t == "integer" || t == "number") return number(s, t == "integer", ptr);
    if (t == "string") return string(s, ptr);
    if (t == "array") return array(s, ptr);
    if (t == "object") return object(s, ptr);
    fail(ptr + "/type", "type", "unknown type \"" + t + "\"");
  }

  // A bound as an integer; `integer_only`: a fractional bound is refused.
  std::optional<int64_t> bound(const json& s, const char* k, const std::string& ptr, bool integer_type) const {
    if (!s.contains(k)) return std::nullopt;
    const json& v = s[k];
    if (!v.is_number()) fail(ptr + "/" + k, k, "must be a number, got " + shown(v));
    const double x = v.get<double>();
    if (!(std::fabs(x) < 1e15)) fail(ptr + "/" + k, k, "must be below 1e15 in magnitude, got " + shown(v));
    if (x == std::floor(x)) return int64_t(x);
    if (!integer_type) fail(ptr + "/" + k, k, "a fractional bound on a number is not supported, got " + shown(v));
    // For an integer, a fractional bound rounds inward.
    return std::strcmp(k, "minimum") == 0 || std::strcmp(k, "exclusiveMinimum") == 0 ? int64_t(std::ceil(x))
                                                                                     : int64_t(std::floor(x));
  }

  GrammarSymbol number(const json& s, bool integer, const std::string& ptr) {
    if (s.contains("multipleOf")) {
      const json& m = s["multipleOf"];
      if (!(integer && m.is_number() && m.get<double>() == 1))
        unsupported(ptr, "multipleOf", m);  // 1 on an integer is no constraint
    }
    std::optional<int64_t> lo = bound(s, "minimum", ptr, integer), hi = bound(s, "maximum", ptr, integer);
    const std::optional<int64_t> xlo = bound(s, "exclusiveMinimum", ptr, integer),
                                 xhi = bound(s, "exclusiveMaximum", ptr, integer);
    if ((xlo || xhi) && !integer)
      unsupported(ptr, xlo ? "exclusiveMinimum" : "exclusiveMaximum", s[xlo ? "exclusiveMinimum" : "exclusiveMaximum"]);
    if (xlo) {
      const bool frac = s["exclusiveMinimum"].get<double>() != double(*xlo);
      const int64_t v = frac ? *xlo : *xlo + 1;
      lo = lo ? std::max(*lo, v) : v;
    }
    if (xhi) {
      const bool frac = s["exclusiveMaximum"].get<double>() != double(*xhi);
      const int64_t v = frac ? *xhi : *xhi - 1;
      hi = hi ? std::min(*hi, v) : v;
    }
    if (!lo && !hi) return integer ? b_.json_integer() : b_.json_number();
    if (lo && hi && *lo > *hi) fail(ptr, "minimum", "no value lies between the bounds");
    std::string re;
    auto add = [&](const std::string& part) {
      if (!part.empty()) re += (re.empty() ? "" : "|") + part;
    };
    const std::string frac = integer ? "" : "(\\.[0-9]+)?", zeros = integer ? "" : "(\\.0+)?";
    // Values >= 0: magnitude in [max(lo, 0), hi].
    if (!hi || *hi >= 0) {
      const int64_t a = lo ? std::max<int64_t>(*lo, 0) : 0;
      if (!hi) add(nat_range(a, -1) + frac);
      else {
        if (*hi - 1 >= a) add(nat_range(a, *hi - 1) + frac);
        add(std::to_string(*hi) + zeros);
      }
    }
    // Values < 0: magnitude in [max(-hi, 1 or 0), -lo].
    if (!lo || *lo < 0) {
      const int64_t a = hi && *hi < 0 ? -*hi : integer ? 1 : 0;
      if (!lo) add("-" + nat_range(a, -1) + frac);
      else {
        const int64_t m = -*lo;
        std::string neg;
        if (m - 1 >= a) neg = nat_range(a, m - 1) + frac + "|";
        if (m >= a) add("-(" + neg + std::to_string(m) + zeros + ")");
      }
    }
    return compile_regex(b_, re, false, "#" + ptr);
  }

  GrammarSymbol string(const json& s, const std::string& ptr) {
    const bool pat = s.contains("pattern"), fmt = s.contains("format");
    const bool len = s.contains("minLength") || s.contains("maxLength");
    if (pat + fmt + len > 1)
      fail(ptr, pat ? "pattern" : "format",
           std::string("combined with ") + (fmt && pat ? "'format'" : "'minLength' / 'maxLength'") +
               " is not supported");
    Seq body;
    if (pat) {
      const json& p = s["pattern"];
      if (!p.is_string()) fail(ptr + "/pattern", "pattern", "must be a string, got " + shown(p));
      body.push_back(compile_regex(b_, p.get<std::string>(), true, "keyword 'pattern' at #" + ptr + "/pattern"));
    } else if (fmt) {
      const json& f = s["format"];
      static const std::map<std::string, std::string> formats = {
          {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"},
          {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
          {"date-time",
           "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
           "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
          {"email",
           "[a-zA-Z0-9_%+-]+(\\.[a-zA-Z0-9_%+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
           "(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\\.[a-zA-Z]{2,}"},
          {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
          {"ipv4",
           "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
          {"ipv6", "([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}"},
          {"uri", "[a-zA-Z][a-zA-Z0-9+.-]*:[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]+"}};
      auto it = f.is_string() ? formats.find(f.get<std::string>()) : formats.end();
      if (it == formats.end()) unsupported(ptr, "format", f);
      body.push_back(compile_regex(b_, it->second, true, "#" + ptr + "/format"));
    } else if (len) {
      const int64_t lo = count(s, "minLength", ptr, 0), hi = count(s, "maxLength", ptr, -1);
      if (hi >= 0 && hi < lo) fail(ptr + "/maxLength", "maxLength", "is below minLength");
      body.push_back(b_.repeat({b_.json_char()}, lo, hi, "string-chars"));
    } else {
      return b_.json_string();
    }
    const int32_t r = b_.rule("string");
    Seq a{b_.byte('"')};
    a.insert(a.end(), body.begin(), body.end());
    a.push_back(b_.byte('"'));
    b_.alt(r, std::move(a));
    return Builder::ref(r);
  }

  GrammarSymbol array(const json& s, const std::string& ptr) {
    const GrammarSymbol item = s.contains("items") ? compile(s["items"], ptr + "/items") : b_.json_value();
    const int64_t lo = count(s, "minItems", ptr, 0), hi = count(s, "maxItems", ptr, -1);
    if (hi >= 0 && hi < lo) fail(ptr + "/maxItems", "maxItems", "is below minItems");
    const Seq w = b_.ws();
    Seq a{b_.byte('[')};
    a.insert(a.end(), w.begin(), w.end());
    if (hi != 0) {
      Seq more = w;
      more.push_back(b_.byte(','));
      more.insert(more.end(), w.begin(), w.end());
      more.push_back(item);
      const GrammarSymbol rest = b_.repeat(more, std::max<int64_t>(lo - 1, 0), hi < 0 ? -1 : hi - 1, "items");
      const Seq first{item, rest};
      if (lo == 0) a.push_back(b_.optional(first, "items?"));
      else a.insert(a.end(), first.begin(), first.end());
      a.insert(a.end(), w.begin(), w.end());
    }
    a.push_back(b_.byte(']'));
    const int32_t r = b_.rule("array");
    b_.alt(r, std::move(a));
    return Builder::ref(r);
  }

  GrammarSymbol object(const json& s, const std::string& ptr) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) fail(ptr + "/properties", "properties", "must be an object, got " + shown(props));
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& rq = s["required"];
      if (!rq.is_array()) fail(ptr + "/required", "required", "must be an array, got " + shown(rq));
      for (const json& k : rq) {
        if (!k.is_string()) fail(ptr + "/required", "required", "must hold strings, got " + shown(k));
        if (!props.contains(k.get<std::string>()))
          fail(ptr + "/required", "required", "names \"" + k.get<std::string>() + "\", which is not in properties");
        required.insert(k.get<std::string>());
      }
    }
    const json* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const Seq w = b_.ws();
    auto cat = [](std::initializer_list<Seq> parts) {
      Seq o;
      for (const Seq& p : parts) o.insert(o.end(), p.begin(), p.end());
      return o;
    };
    Seq open = cat({{b_.byte('{')}, w}), close = cat({w, {b_.byte('}')}});
    if (props.empty()) {
      if (ap && ap->is_boolean() && !ap->get<bool>()) {
        const int32_t r = b_.rule("empty-object");
        b_.alt(r, cat({open, close}));
        return Builder::ref(r);
      }
      if (!ap || (ap->is_boolean() && ap->get<bool>())) return b_.json_object();
      // additionalProperties: a schema for every value.
      const GrammarSymbol v = compile(*ap, ptr + "/additionalProperties");
      const int32_t member = b_.rule("member");
      b_.alt(member, cat({{b_.json_string()}, w, {b_.byte(':')}, w, {v}}));
      const GrammarSymbol more = b_.repeat(cat({w, {b_.byte(',')}, w, {Builder::ref(member)}}), 0, -1, "members");
      const int32_t r = b_.rule("map");
      b_.alt(r, cat({open, {b_.optional({Builder::ref(member), more}, "members?")}, close}));
      return Builder::ref(r);
    }
    if (ap && !(ap->is_boolean() && !ap->get<bool>()))
      fail(ptr + "/additionalProperties", "additionalProperties",
           "is supported as false (or absent) next to properties, got " + shown(*ap));
    // Properties in order; after(i): the rest once something was written, first(i): nothing written yet.
    std::vector<std::pair<Seq, bool>> members;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const GrammarSymbol v = compile(it.value(), ptr + "/properties/" + escape_pointer(it.key()));
      Seq m = b_.literal(json(it.key()).dump(-1, ' ', false, json::error_handler_t::strict));
      m = cat({m, w, {b_.byte(':')}, w, {v}});
      members.push_back({std::move(m), required.count(it.key()) > 0});
    }
    const size_t n = members.size();
    std::vector<int32_t> after(n + 1), first(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      after[i] = b_.rule("props-after");
      first[i] = b_.rule("props-first");
    }
    b_.alt(after[n], {});
    b_.alt(first[n], {});
    const Seq comma = cat({w, {b_.byte(',')}, w});
    for (size_t i = n; i-- > 0;) {
      const auto& [m, req] = members[i];
      b_.alt(after[i], cat({comma, m, {Builder::ref(after[i + 1])}}));
      if (!req) b_.alt(after[i], {Builder::ref(after[i + 1])});
      b_.alt(first[i], cat({m, {Builder::ref(after[i + 1])}}));
      if (!req) b_.alt(first[i], {Builder::ref(first[i + 1])});
    }
    const int32_t r = b_.rule("object");
    b_.alt(r, cat({open, {Builder::ref(first[0])}, close}));
    return Builder::ref(r);
  }
};

}  // namespace

GrammarSymbol compile_json_schema(Builder& b, std::string_view schema_json) {
  nlohmann::ordered_json root;
  try {
    root = nlohmann::ordered_json::parse(schema_json);
  } catch (const nlohmann::ordered_json::exception& e) {  // a syntax error, or a number out of range
    b.fail("", std::string("the schema is not valid JSON: ") + e.what());
  }
  SchemaCompiler c(b, root);
  try {
    return c.compile(root, "");
  } catch (const nlohmann::ordered_json::exception& e) {
    b.fail("", std::string("the schema cannot be read: ") + e.what());
  }
}

}  // namespace llmk::grammar

namespace llmk {

std::shared_ptr<const Grammar> grammar_from_json_schema(std::string_view schema_json, const GrammarOptions& o) {
  grammar::Builder b("json_schema", o);
  const GrammarSymbol s = grammar::compile_json_schema(b, schema_json);
  const int32_t start = b.rule("root");
  grammar::Seq a = b.ws();
  a.push_back(s);
  b.alt(start, std::move(a));
  return b.finish(start);
}

}  // namespace llmk
