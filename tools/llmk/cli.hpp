// The llmk command line: a registry of subcommands and a small argument parser.
// A subcommand lives in tools/llmk/cmd_<name>.cpp and registers itself with
// LLMK_COMMAND; those files are linked straight into the executable, so their
// static registrars always run. Unknown options are an error that names them.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace llmk::cli {

class Args {
 public:
  // argv[first..argc) are parsed: "--key value", "--key=value", "--flag", positionals.
  // `flags` names the options that take no value. "-n N" is "--n N" (llama.cpp's
  // spelling) and "-h" is "--help"; any other word of a '-' and a letter is an error
  // (llama.cpp's "-m F" or "-p TEXT" is never prompt text), and every word after "--"
  // is positional. An option given twice is an error. A
  // "--key" followed by nothing or by another option ("--x", "-x") is recorded as
  // valueless ("--key=-x" passes such a value): reading it throws, and finish()
  // reports it as unknown if nobody reads it.
  Args(int argc, char** argv, int first, std::vector<std::string> flags = {});
  std::string get(const std::string& key, const std::string& fallback);
  // An integer option in [lo, hi]; a value outside it, or outside int64, throws naming the option.
  int64_t get_int(const std::string& key, int64_t fallback, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
  // A number option; one beyond double's range (1e400, 1e-400) throws naming the option.
  double get_double(const std::string& key, double fallback);
  bool has(const std::string& key);
  bool flag(const std::string& key);  // a value-less option; "--key=V" takes V = 1|true|0|false
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws InvalidArgument naming the first option nobody asked for (without a
  // value: the token after an unknown option may not have been meant as one).
  void finish() const;
  // Throws naming the first positional argument of command `cmd`, which takes none;
  // `hint` says what to write instead.
  void no_positionals(const char* cmd, const std::string& hint) const;

 private:
  struct Opt {
    std::optional<std::string> value;
    std::string name;  // as written: "--n" or "-n"
    bool used = false;
  };
  // The value of option `key`, which is present; throws when it has none.
  const std::string& value(const std::string& key);
  std::map<std::string, Opt> opts_;
  std::vector<std::string> positional_;
};

struct Command {
  const char* name;
  const char* summary;
  int (*run)(Args& args);
  std::vector<std::string> flags;  // value-less options of this command
};

// Throws naming option `flag` of command `cmd` when `path` is empty, a directory or cannot be opened.
void check_file(const char* cmd, const std::string& flag, const std::string& path);

// The bytes of file `path` given as option `flag` of command `cmd` ("-" is not
// special here); a missing, unreadable or directory path throws naming the option.
std::string read_text_file(const char* cmd, const std::string& flag, const std::string& path);

bool register_command(Command c);
const std::vector<Command>& commands();

}  // namespace llmk::cli

#define LLMK_CLI_CAT2(a, b) a##b
#define LLMK_CLI_CAT(a, b) LLMK_CLI_CAT2(a, b)
#define LLMK_COMMAND(...) \
  static const bool LLMK_CLI_CAT(llmk_command_, __LINE__) = ::llmk::cli::register_command({__VA_ARGS__})
