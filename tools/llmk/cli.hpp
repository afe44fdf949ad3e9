// The llmk command line: a registry of subcommands, each with a declared table of
// options, and the parser that checks a command line against that table. A subcommand
// lives in tools/llmk/cmd_<name>.cpp and registers itself with LLMK_COMMAND; those files
// are linked straight into the executable, so their static registrars always run.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace llmk::cli {

enum class Kind {
  flag,     // no value; "--x=V" takes V = 1|true|0|false
  integer,  // an int64 in [lo, hi]
  number,   // a finite double in lo..hi (each end open or closed)
  text,     // any string, "" included
  path,     // a file name: never ""
  choice,   // one of choices(), matched without regard to ASCII case
};

// One option of a command: its name (spelled --name; "n" is also -n), the kind of its
// value, the range, the default and one line of help. The builders below make one, the
// setters refine it: integer("threads", "N", "CPU threads").range(1, kMaxThreads).
struct Option {
  std::string name;
  Kind kind = Kind::text;
  std::string metavar;  // the value's placeholder in --help ("N", "FILE")
  std::string help;
  std::optional<std::string> value;  // the default, read as a given value would be; none: absent unless given
  std::string shown;                 // the default as --help shows it when it is not a fixed value
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  double nlo = -std::numeric_limits<double>::infinity(), nhi = std::numeric_limits<double>::infinity();
  bool nlo_open = false, nhi_open = false;
  std::vector<std::string> (*choices)() = nullptr;
  std::string requirement;  // replaces the generated "must be ..." of a range (or an empty path) error

  Option def(std::string v) && {
    value = std::move(v);
    return std::move(*this);
  }
  Option shown_default(std::string s) && {
    shown = std::move(s);
    return std::move(*this);
  }
  template <class A, class B>
  requires std::is_integral_v<A> && std::is_integral_v<B> Option range(A l, B h) && {
    lo = int64_t(l), hi = int64_t(h);
    return std::move(*this);
  }
  Option range(double l, double h, bool l_open = false, bool h_open = false) && {
    nlo = l, nhi = h, nlo_open = l_open, nhi_open = h_open;
    return std::move(*this);
  }
  Option must(std::string r) && {
    requirement = std::move(r);
    return std::move(*this);
  }
  // What the range allows: "an integer in [1, 1024]", "finite and > 0", "in (0, 1]", "one of
  // a, b"; "" for an unbounded integer, a flag, a text or a path.
  std::string range_text() const;
  std::string default_text() const;  // "128", "off", "none", or shown_default's text
};

Option flag(std::string name, std::string help);
Option integer(std::string name, std::string metavar, std::string help);
Option number(std::string name, std::string metavar, std::string help);
Option text(std::string name, std::string metavar, std::string help);
Option path(std::string name, std::string metavar, std::string help);
Option choice(std::string name, std::vector<std::string> (*choices)(), std::string help);

// Joins options and lists of options into one list: options(model_option(), kv_options("f16"), ...).
inline void append_options(std::vector<Option>& to, Option o) { to.push_back(std::move(o)); }
inline void append_options(std::vector<Option>& to, std::vector<Option> os) {
  for (Option& o : os) to.push_back(std::move(o));
}
template <class... T>
std::vector<Option> options(T&&... parts) {
  std::vector<Option> r;
  (append_options(r, std::forward<T>(parts)), ...);
  return r;
}

class Args {
 public:
  // Parses argv[first..argc) against `options` (plus --help / -h): "--key value",
  // "--key=value", "--flag", positionals; every word after "--" is positional. Throws
  // InvalidArgument naming the option and its value for an unknown name, a word of a '-'
  // and a letter other than -n and -h (llama.cpp's "-m F" or "-p TEXT" is never prompt
  // text), an option given twice, and, unless --help is given, a value option without a
  // value ("--key" before another option or at the end: "--key=-x" passes such a value),
  // a value of the wrong kind or outside its range.
  Args(int argc, char** argv, int first, const std::vector<Option>& options);
  bool help() const { return help_; }

  // The value given, else the declared default, else `fallback` (for a default that
  // depends on other options). Reading an option the command did not declare, or as
  // another kind, throws std::logic_error.
  std::string get(const std::string& key, const std::string& fallback = "");
  int64_t get_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt);
  double get_double(const std::string& key, std::optional<double> fallback = std::nullopt);
  bool flag(const std::string& key);
  bool has(const std::string& key);  // given on the command line
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws InvalidArgument naming the first option that was given but not read: one the
  // command ignores with the other options given (analyze --list --json).
  void finish() const;
  // Throws naming the first positional argument of command `cmd`, which takes none;
  // `hint` says what to write instead.
  void no_positionals(const char* cmd, const std::string& hint) const;

 private:
  struct Given {
    std::optional<std::string> value;  // none: written without one
    std::string spelled;               // as written: "--n" or "-n"
    bool used = false;
    int64_t i = 0;
    double d = 0;
  };
  const Option& declared(const std::string& key, Kind kind) const;
  std::map<std::string, Option> decl_;
  std::map<std::string, Given> given_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

struct Command {
  const char* name;
  const char* summary;
  int (*run)(Args& args);
  std::vector<Option> options;
  const char* arguments = nullptr;  // the positional arguments and their help for --help ("TEXT...\tthe prompt")
};

// `llmk <cmd> --help`: the summary, the arguments and every option with its range and default.
std::string usage(const Command& c);

// Throws naming option `flag` of command `cmd` when `path` is empty, a directory or cannot be opened.
void check_file(const char* cmd, const std::string& flag, const std::string& path);

// The bytes of file `path` given as option `flag` of command `cmd` ("-" is not
// special here); a missing, unreadable or directory path throws naming the option.
std::string read_text_file(const char* cmd, const std::string& flag, const std::string& path);

// Registers a command; a declaration whose default its own table refuses, or a name
// declared twice, aborts at start-up with a message.
bool register_command(Command c);
const std::vector<Command>& commands();

}  // namespace llmk::cli

#define LLMK_CLI_CAT2(a, b) a##b
#define LLMK_CLI_CAT(a, b) LLMK_CLI_CAT2(a, b)
#define LLMK_COMMAND(...) \
  static const bool LLMK_CLI_CAT(llmk_command_, __LINE__) = ::llmk::cli::register_command({__VA_ARGS__})
