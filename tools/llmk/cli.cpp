// Option tables, the argument parser and the command registry (see cli.hpp).
#include "cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "llmk/error.hpp"

namespace llmk::cli {

namespace {

Option make(std::string name, Kind kind, std::string metavar, std::string help) {
  Option o;
  o.name = std::move(name);
  o.kind = kind;
  o.metavar = std::move(metavar);
  o.help = std::move(help);
  return o;
}

std::string num_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

// "--x" or a '-' and a letter ("-m"): an option, never a value or a text ("-5", "-" are).
bool option_like(const std::string& a) {
  return a.size() >= 2 && a[0] == '-' && (a[1] == '-' || std::isalpha(static_cast<unsigned char>(a[1])));
}

std::string spelling(const std::string& name) { return name == "n" ? "-n" : "--" + name; }

// "in [1, 1024]", ">= 0": an integer option's bounds; "" when it has none.
std::string int_bounds(const Option& o) {
  if (o.lo == INT64_MIN && o.hi == INT64_MAX) return "";
  if (o.hi == INT64_MAX) return ">= " + std::to_string(o.lo);
  if (o.lo == INT64_MIN) return "<= " + std::to_string(o.hi);
  return "in [" + std::to_string(o.lo) + ", " + std::to_string(o.hi) + "]";
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The error for a value outside option `o`'s range, as "must be ...".
std::string out_of_range(const Option& o) {
  if (!o.requirement.empty()) return o.requirement;
  return "must be " + o.range_text();
}

// Checks value `v` of option `o` (written `spelled`) against its kind and range; returns the
// parsed number in `i` or `d`, or the choice as declared in `s`.
void check_value(const Option& o, const std::string& spelled, const std::string& v, int64_t& i, double& d,
                 std::string& s) {
  s = v;
  switch (o.kind) {
    case Kind::flag:
      LLMK_CHECK_ARG(v == "1" || v == "true" || v == "0" || v == "false", "cli", spelled, v,
                     "must be 1, true, 0 or false (or give --" + o.name + " alone)");
      i = v == "1" || v == "true";
      return;
    case Kind::integer: {
      char* end = nullptr;
      errno = 0;
      const long long r = std::strtoll(v.c_str(), &end, 10);
      LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", spelled, v, "must be an integer");
      // strtoll saturates out-of-range values (99999999999999999999 read as 2^63 - 1)
      const std::string bounds = int_bounds(o);
      LLMK_CHECK_ARG(errno != ERANGE, "cli", spelled, v,
                     "must be a 64-bit integer" + (bounds.empty() ? "" : " " + bounds));
      LLMK_CHECK_ARG(r >= o.lo && r <= o.hi, "cli", spelled, v, out_of_range(o));
      i = r;
      return;
    }
    case Kind::number: {
      char* end = nullptr;
      errno = 0;
      const double r = std::strtod(v.c_str(), &end);
      LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", spelled, v, "must be a number");
      // strtod makes 1e400 inf and 1e-400 0 (ERANGE): a value nobody passed
      LLMK_CHECK_ARG(errno != ERANGE, "cli", spelled, v, "is beyond the range of a double");
      const bool in = std::isfinite(r) && (o.nlo_open ? r > o.nlo : r >= o.nlo) &&
                      (o.nhi_open ? r < o.nhi : r <= o.nhi);
      LLMK_CHECK_ARG(in, "cli", spelled, v, out_of_range(o));
      d = r;
      return;
    }
    case Kind::path:
      LLMK_CHECK_ARG(!v.empty(), "cli", spelled, "\"\"", o.requirement.empty() ? "needs a file name" : o.requirement);
      return;
    case Kind::choice: {
      const std::vector<std::string> cs = o.choices();
      const auto it = std::find_if(cs.begin(), cs.end(), [&](const std::string& c) { return lower(c) == lower(v); });
      LLMK_CHECK_ARG(it != cs.end(), "cli", spelled, v, "must be " + o.range_text());
      s = *it;
      return;
    }
    case Kind::text: return;
  }
}

}  // namespace

Option flag(std::string name, std::string help) { return make(std::move(name), Kind::flag, "", std::move(help)); }
Option integer(std::string name, std::string metavar, std::string help) {
  return make(std::move(name), Kind::integer, std::move(metavar), std::move(help));
}
Option number(std::string name, std::string metavar, std::string help) {
  return make(std::move(name), Kind::number, std::move(metavar), std::move(help));
}
Option text(std::string name, std::string metavar, std::string help) {
  return make(std::move(name), Kind::text, std::move(metavar), std::move(help));
}
Option path(std::string name, std::string metavar, std::string help) {
  return make(std::move(name), Kind::path, std::move(metavar), std::move(help));
}
Option choice(std::string name, std::vector<std::string> (*choices)(), std::string help) {
  Option o = make(std::move(name), Kind::choice, "NAME", std::move(help));
  o.choices = choices;
  return o;
}

std::string Option::range_text() const {
  switch (kind) {
    case Kind::integer: return lo == INT64_MIN && hi == INT64_MAX ? "" : "an integer " + int_bounds(*this);
    case Kind::number: {
      const bool l = std::isfinite(nlo), h = std::isfinite(nhi);
      if (l && h)
        return std::string("in ") + (nlo_open ? "(" : "[") + num_text(nlo) + ", " + num_text(nhi) +
               (nhi_open ? ")" : "]");
      if (l) return std::string("finite and ") + (nlo_open ? "> " : ">= ") + num_text(nlo);
      if (h) return std::string("finite and ") + (nhi_open ? "< " : "<= ") + num_text(nhi);
      return "finite";
    }
    case Kind::choice: {
      std::string s;
      for (const std::string& c : choices()) s += (s.empty() ? "one of " : ", ") + c;
      return s;
    }
    default: return "";
  }
}

std::string Option::default_text() const {
  if (!shown.empty()) return shown;
  if (kind == Kind::flag) return "off";
  if (!value) return "none";
  return value->empty() ? "\"\"" : *value;
}

Args::Args(int argc, char** argv, int first, const std::vector<Option>& options) {
  for (const Option& o : options) decl_[o.name] = o;
  std::vector<std::string> order;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      positional_.insert(positional_.end(), argv + i + 1, argv + argc);
      break;
    }
    if (!option_like(a)) {
      positional_.push_back(a);
      continue;
    }
    if (a.rfind("--", 0) != 0 && a != "-n" && a != "-h")
      throw InvalidArgument("llmk::cli: argument '" + a +
                            "': unknown option (options are spelled --name, -n and -h "
                            "aside; a value that starts with '-' is given as --name=VALUE, a text after \"--\")");
    std::string key = a == "-n" ? "n" : a == "-h" ? "help" : a.substr(2), spelled = a;
    std::optional<std::string> value = "1";
    const auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      spelled = "--" + key;
    }
    const auto d = decl_.find(key);
    // an unknown option is named without the word after it, which it may or may not take
    if (key != "help" && d == decl_.end())
      throw InvalidArgument("llmk::cli: argument '" + spelled + "': unknown option for this command (see --help)");
    if (eq == std::string::npos && key != "help" && d->second.kind != Kind::flag)
      value = i + 1 < argc && !option_like(argv[i + 1]) ? std::optional<std::string>(argv[++i]) : std::nullopt;
    if (const auto it = given_.find(key); it != given_.end())
      throw_invalid_argument("cli", spelled, value.value_or("(missing)"),
                             "is given twice (first as " + it->second.spelled + " " +
                                 it->second.value.value_or("(missing)") + ")");
    given_[key] = {value, spelled};
    order.push_back(key);
  }
  if (given_.count("help")) {
    Given& h = given_["help"];
    std::string s;
    check_value(::llmk::cli::flag("help", ""), h.spelled, *h.value, h.i, h.d, s);
    help_ = h.i != 0;
    h.used = true;
    if (help_) return;  // --help prints the table, whatever else is given
  }
  for (const std::string& key : order) {
    if (key == "help") continue;
    const Option& o = decl_.at(key);
    Given& g = given_.at(key);
    LLMK_CHECK_ARG(g.value.has_value(), "cli", g.spelled, "(missing)",
                   "this option takes a value (--" + key + "=VALUE for one that starts with '-')");
    std::string s;
    check_value(o, g.spelled, *g.value, g.i, g.d, s);
    g.value = s;
  }
}

const Option& Args::declared(const std::string& key, Kind kind) const {
  const auto it = decl_.find(key);
  if (it == decl_.end()) throw std::logic_error("llmk::cli: option --" + key + " is read but not declared");
  const Kind k = it->second.kind;
  const bool textual = kind == Kind::text && (k == Kind::text || k == Kind::path || k == Kind::choice);
  if (k != kind && !textual) throw std::logic_error("llmk::cli: option --" + key + " is read as another kind");
  return it->second;
}

std::string Args::get(const std::string& key, const std::string& fallback) {
  const Option& o = declared(key, Kind::text);
  if (const auto it = given_.find(key); it != given_.end()) {
    it->second.used = true;
    return *it->second.value;
  }
  return o.value.value_or(fallback);
}

int64_t Args::get_int(const std::string& key, std::optional<int64_t> fallback) {
  const Option& o = declared(key, Kind::integer);
  if (const auto it = given_.find(key); it != given_.end()) {
    it->second.used = true;
    return it->second.i;
  }
  if (o.value) return std::stoll(*o.value);  // checked against the range by register_command
  if (!fallback) throw std::logic_error("llmk::cli: option --" + key + " has no default");
  return *fallback;
}

double Args::get_double(const std::string& key, std::optional<double> fallback) {
  const Option& o = declared(key, Kind::number);
  if (const auto it = given_.find(key); it != given_.end()) {
    it->second.used = true;
    return it->second.d;
  }
  if (o.value) return std::stod(*o.value);
  if (!fallback) throw std::logic_error("llmk::cli: option --" + key + " has no default");
  return *fallback;
}

bool Args::flag(const std::string& key) {
  declared(key, Kind::flag);
  const auto it = given_.find(key);
  if (it == given_.end()) return false;
  it->second.used = true;
  return it->second.i != 0;
}

bool Args::has(const std::string& key) {
  if (key != "help" && !decl_.count(key))
    throw std::logic_error("llmk::cli: option --" + key + " is read but not declared");
  return given_.count(key) != 0;
}

void Args::finish() const {
  for (const auto& [k, g] : given_)
    if (!g.used)
      throw_invalid_argument("cli", g.spelled, g.value.value_or("(missing)"),
                             "is not used with the other arguments given (see --help)");
}

void Args::no_positionals(const char* cmd, const std::string& hint) const {
  if (!positional_.empty()) throw_invalid_argument(cmd, "positional", positional_[0], "unexpected (" + hint + ")");
}

std::string usage(const Command& c) {
  std::string s = "usage: llmk " + std::string(c.name) + " [options]\n\n";
  char line[1024];
  std::snprintf(line, sizeof line, "  %-12s %s\n", c.name, c.summary);
  s += line;
  if (c.arguments) {
    const std::string a = c.arguments;
    const size_t tab = a.find('\t');
    std::snprintf(line, sizeof line, "\narguments:\n  %-24s %s\n", a.substr(0, tab).c_str(),
                  tab == std::string::npos ? "" : a.c_str() + tab + 1);
    s += line;
  }
  s += "\noptions:\n";
  std::string flags;
  for (const Option& o : c.options) {
    const std::string left = spelling(o.name) + (o.metavar.empty() ? "" : " " + o.metavar);
    const std::string range = o.requirement.rfind("must be ", 0) == 0 ? o.requirement.substr(8) : o.range_text();
    std::snprintf(line, sizeof line, "  %-24s %s; %s%sdefault: %s\n", left.c_str(), o.help.c_str(), range.c_str(),
                  range.empty() ? "" : "; ", o.default_text().c_str());
    s += line;
    if (o.kind == Kind::flag) flags += " --" + o.name;
  }
  std::snprintf(line, sizeof line, "  %-24s %s\n", "-h, --help", "print this help");
  s += line;
  if (!flags.empty()) s += "\noptions that take no value:" + flags + "\n";
  return s;
}

void check_file(const char* cmd, const std::string& flag, const std::string& path) {
  LLMK_CHECK_ARG(!path.empty(), cmd, flag, "\"\"", "needs a file name");
  std::error_code ec;
  // a directory opens as a stream that reads nothing: refused, never read as an empty text
  LLMK_CHECK_ARG(!std::filesystem::is_directory(path, ec), cmd, flag, path, "is a directory, not a file");
  LLMK_CHECK_ARG(std::ifstream(path, std::ios::binary).good(), cmd, flag, path, "cannot be opened");
}

std::string read_text_file(const char* cmd, const std::string& flag, const std::string& path) {
  check_file(cmd, flag, path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  LLMK_CHECK_ARG(!in.bad(), cmd, flag, path, "cannot be read");
  return ss.str();
}

static std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

bool register_command(Command c) {
  std::vector<std::string> names = {"help"};
  for (const Option& o : c.options) {
    std::string why;
    if (std::find(names.begin(), names.end(), o.name) != names.end()) why = "is declared twice";
    names.push_back(o.name);
    try {
      int64_t i;
      double d;
      std::string s;
      if (o.value) check_value(o, spelling(o.name), *o.value, i, d, s);
    } catch (const std::exception& e) {
      why = std::string("has a default its declaration refuses: ") + e.what();
    }
    if (!why.empty()) {
      std::fprintf(stderr, "llmk: command %s: option --%s %s\n", c.name, o.name.c_str(), why.c_str());
      std::abort();
    }
  }
  registry().push_back(std::move(c));
  return true;
}

const std::vector<Command>& commands() {
  auto& r = registry();
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return std::string(a.name) < b.name; });
  return r;
}

}  // namespace llmk::cli
