// Argument parsing and the command registry (see cli.hpp).
#include "cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "llmk/error.hpp"

namespace llmk::cli {

// "--x" or a '-' and a letter ("-m"): an option, never a value or a text ("-5", "-" are).
static bool option_like(const std::string& a) {
  return a.size() >= 2 && a[0] == '-' && (a[1] == '-' || std::isalpha(static_cast<unsigned char>(a[1])));
}

Args::Args(int argc, char** argv, int first, std::vector<std::string> flags) {
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
      throw InvalidArgument("llmk::cli: argument '" + a + "': unknown option (options are spelled --name, -n and -h "
                            "aside; a value that starts with '-' is given as --name=VALUE, a text after \"--\")");
    std::string key = a == "-n" ? "n" : a == "-h" ? "help" : a.substr(2), name = a;
    std::optional<std::string> value = "1";
    const auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      name = "--" + key;
    } else if (std::find(flags.begin(), flags.end(), key) == flags.end()) {
      value = i + 1 < argc && !option_like(argv[i + 1]) ? std::optional<std::string>(argv[++i]) : std::nullopt;
    }
    if (const auto it = opts_.find(key); it != opts_.end())
      throw_invalid_argument("cli", name, value.value_or("(missing)"),
                             "is given twice (first as " + it->second.name + " " +
                                 it->second.value.value_or("(missing)") + ")");
    opts_[key] = {value, name, false};
  }
}

const std::string& Args::value(const std::string& key) {
  Opt& o = opts_.at(key);
  o.used = true;
  LLMK_CHECK_ARG(o.value.has_value(), "cli", o.name, "(missing)",
                 "this option takes a value (--" + key + "=VALUE for one that starts with '-')");
  return *o.value;
}

std::string Args::get(const std::string& key, const std::string& fallback) {
  return opts_.count(key) ? value(key) : fallback;
}

static int64_t parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long r = std::strtoll(v.c_str(), &end, 10);
  LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", flag, v, "must be an integer");
  // strtoll saturates out-of-range values (99999999999999999999 read as 2^63 - 1)
  const std::string range =
      lo == INT64_MIN && hi == INT64_MAX ? "a 64-bit integer"
      : hi == INT64_MAX                  ? "an integer >= " + std::to_string(lo)
                                         : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  LLMK_CHECK_ARG(errno != ERANGE && r >= lo && r <= hi, "cli", flag, v, "must be " + range);
  return r;
}

int64_t Args::get_int(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
  if (!opts_.count(key)) return fallback;
  const std::string& v = value(key);
  return parse_int(opts_.at(key).name, v, lo, hi);
}

double Args::get_double(const std::string& key, double fallback) {
  if (!opts_.count(key)) return fallback;
  const std::string& v = value(key);
  const std::string& name = opts_.at(key).name;
  char* end = nullptr;
  errno = 0;
  const double r = std::strtod(v.c_str(), &end);
  LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", name, v, "must be a number");
  // strtod makes 1e400 inf and 1e-400 0 (ERANGE): a value nobody passed
  LLMK_CHECK_ARG(errno != ERANGE, "cli", name, v, "is beyond the range of a double");
  return r;
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

bool Args::has(const std::string& key) { return opts_.count(key) != 0; }

bool Args::flag(const std::string& key) {
  if (!opts_.count(key)) return false;
  const std::string& v = value(key);
  LLMK_CHECK_ARG(v == "1" || v == "true" || v == "0" || v == "false", "cli", opts_.at(key).name, v,
                 "must be 1, true, 0 or false (or give --" + key + " alone)");
  return v == "1" || v == "true";
}

void Args::finish() const {
  for (const auto& [k, o] : opts_)
    if (!o.used)
      throw InvalidArgument("llmk::cli: argument '" + o.name + "': unknown option for this command (see --help)");
}

void Args::no_positionals(const char* cmd, const std::string& hint) const {
  if (!positional_.empty()) throw_invalid_argument(cmd, "positional", positional_[0], "unexpected (" + hint + ")");
}

static std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

bool register_command(Command c) {
  registry().push_back(std::move(c));
  return true;
}

const std::vector<Command>& commands() {
  auto& r = registry();
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return std::string(a.name) < b.name; });
  return r;
}

}  // namespace llmk::cli
