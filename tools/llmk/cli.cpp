// Argument parsing and the command registry (see cli.hpp).
#include "cli.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "llmk/error.hpp"

namespace llmk::cli {

Args::Args(int argc, char** argv, int first, std::vector<std::string> flags) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string key = a.substr(2);
      std::optional<std::string> value = "1";
      const auto eq = key.find('=');
      if (eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (std::find(flags.begin(), flags.end(), key) == flags.end()) {
        value = i + 1 < argc ? std::optional<std::string>(argv[++i]) : std::nullopt;
      }
      opts_[key] = value;
      used_[key] = false;
    } else {
      positional_.push_back(a);
    }
  }
}

const std::string& Args::value(const std::string& key) {
  used_[key] = true;
  const std::optional<std::string>& v = opts_.at(key);
  LLMK_CHECK_ARG(v.has_value(), "cli", "--" + key, "(missing)", "this option takes a value");
  return *v;
}

std::string Args::get(const std::string& key, const std::string& fallback) {
  return opts_.count(key) ? value(key) : fallback;
}

int64_t parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
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
  return parse_int("--" + key, value(key), lo, hi);
}

double Args::get_double(const std::string& key, double fallback) {
  if (!opts_.count(key)) return fallback;
  const std::string& v = value(key);
  char* end = nullptr;
  errno = 0;
  const double r = std::strtod(v.c_str(), &end);
  LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", "--" + key, v, "must be a number");
  // strtod makes 1e400 inf and 1e-400 0 (ERANGE): a value nobody passed
  LLMK_CHECK_ARG(errno != ERANGE, "cli", "--" + key, v, "is beyond the range of a double");
  return r;
}

std::string read_text_file(const char* cmd, const std::string& flag, const std::string& path) {
  std::error_code ec;
  // a directory opens as a stream that reads nothing: that was an empty text
  LLMK_CHECK_ARG(!std::filesystem::is_directory(path, ec), cmd, flag, path, "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  LLMK_CHECK_ARG(in.good(), cmd, flag, path, "cannot be opened");
  std::stringstream ss;
  ss << in.rdbuf();
  LLMK_CHECK_ARG(!in.bad(), cmd, flag, path, "cannot be read");
  return ss.str();
}

bool Args::has(const std::string& key) { return opts_.count(key) != 0; }

bool Args::flag(const std::string& key) {
  if (!opts_.count(key)) return false;
  const std::string& v = value(key);
  return v != "0" && v != "false";
}

void Args::finish() const {
  for (const auto& [k, used] : used_)
    if (!used) throw InvalidArgument("llmk::cli: argument '--" + k + "': unknown option for this command (see --help)");
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
