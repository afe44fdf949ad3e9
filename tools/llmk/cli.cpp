// Argument parsing and the command registry (see cli.hpp).
#include "cli.hpp"

#include <algorithm>
#include <cstdlib>

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

int64_t Args::get_int(const std::string& key, int64_t fallback) {
  if (!opts_.count(key)) return fallback;
  const std::string& v = value(key);
  char* end = nullptr;
  const long long r = std::strtoll(v.c_str(), &end, 10);
  LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", "--" + key, v, "must be an integer");
  return r;
}

double Args::get_double(const std::string& key, double fallback) {
  if (!opts_.count(key)) return fallback;
  const std::string& v = value(key);
  char* end = nullptr;
  const double r = std::strtod(v.c_str(), &end);
  LLMK_CHECK_ARG(end && *end == '\0' && !v.empty(), "cli", "--" + key, v, "must be a number");
  return r;
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
