// The JSON reader of json.hpp on nlohmann-json's SAX parser (strict RFC 8259):
// the handler builds Values bottom-up, keeping each number's source text and
// an object's members in file order, and adds what nlohmann accepts but a
// config file must not hold: duplicate keys and nesting deeper than 64 levels.
#include "analyze/json.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "llmk/error.hpp"

namespace llmk::analyze::json {

namespace {

using nl = nlohmann::json;

[[noreturn]] void fail(std::string_view text, std::string_view source, size_t at, const std::string& what) {
  int64_t line = 1, col = 1;
  for (size_t k = 0; k < at && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  throw_invalid_argument("analyze::parse_model_config", std::string(source),
                         "line " + std::to_string(line) + " column " + std::to_string(col), what);
}

class Builder : public nlohmann::json_sax<nl> {
 public:
  Builder(std::string_view text, std::string_view source) : text_(text), source_(source) {}
  Value root;

  bool null() override { return add(Value{}); }
  bool boolean(bool b) override {
    Value v;
    v.kind = Value::Kind::boolean;
    v.b = b;
    return add(std::move(v));
  }
  bool number_integer(nl::number_integer_t x) override { return number(std::to_string(x)); }
  bool number_unsigned(nl::number_unsigned_t x) override { return number(std::to_string(x)); }
  bool number_float(nl::number_float_t, const std::string& s) override { return number(s); }
  bool string(std::string& s) override {
    Value v;
    v.kind = Value::Kind::string;
    v.text = std::move(s);
    return add(std::move(v));
  }
  bool binary(nl::binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(Value::Kind::object); }
  bool key(std::string& k) override {
    for (const Member& m : stack_.back().v.members)
      if (m.key == k)
        throw_invalid_argument("analyze::parse_model_config", std::string(source_), "key '" + k + "'",
                               "duplicate key '" + k + "'");
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Value::Kind::array); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    // position: bytes read, the offending one included
    const std::string what = ex.what();
    std::string phrase = "invalid JSON";
    if (what.find("object key") != std::string::npos) phrase = "expected a string key";
    else if (what.find("end of input; expected") == std::string::npos &&
             what.find("expected end of input") != std::string::npos)
      phrase = "unexpected text after the JSON value";
    fail(text_, source_, position > 0 ? position - 1 : 0, phrase + " (" + what + ")");
  }

 private:
  struct Open {
    Value v;
    std::string key;  // an object's pending key
  };
  bool number(std::string text) {
    Value v;
    v.kind = Value::Kind::number;
    v.text = std::move(text);
    return add(std::move(v));
  }
  bool add(Value v) {
    if (stack_.empty()) {
      root = std::move(v);
    } else if (stack_.back().v.kind == Value::Kind::array) {
      stack_.back().v.items.push_back(std::move(v));
    } else {
      stack_.back().v.members.push_back(Member{std::move(stack_.back().key), std::move(v)});
    }
    return true;
  }
  bool open(Value::Kind k) {
    if (stack_.size() >= 64)
      throw_invalid_argument("analyze::parse_model_config", std::string(source_), "nesting", "deeper than 64 levels");
    stack_.push_back(Open{});
    stack_.back().v.kind = k;
    return true;
  }
  bool close() {
    Value v = std::move(stack_.back().v);
    stack_.pop_back();
    return add(std::move(v));
  }
  std::string_view text_, source_;
  std::vector<Open> stack_;
};

}  // namespace

std::string Value::repr() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::boolean: return b ? "true" : "false";
    case Kind::number: return text;
    case Kind::string: return "\"" + text + "\"";
    case Kind::array: return "[...]";
    case Kind::object: return "{...}";
  }
  return "?";
}

Value parse(std::string_view text, std::string_view source) {
  Builder b(text, source);
  nl::sax_parse(text.begin(), text.end(), &b, nlohmann::detail::input_format_t::json, true);
  return std::move(b.root);
}

}  // namespace llmk::analyze::json
