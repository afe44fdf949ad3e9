// llmk: the command-line front end. `llmk <command> [options]`; `llmk help`
// lists the commands, `llmk <command> --help` (or -h) prints one command's
// options, each with its range and default. Each command is a cmd_*.cpp file in this folder.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli.hpp"
#include "llmk/error.hpp"

namespace {
// How long an OpenMP thread spins at a barrier before it sleeps (GOMP_SPINCOUNT, in spins of
// a pause). libgomp's default (300000 spins) makes every barrier wait out a time
// slice when another process holds a core, and a forward has hundreds of barriers; this
// bound keeps decode near its share of the cores then and costs a futex wake only on gaps
// longer than the spin. libgomp reads the variable once, when it is loaded, so the CLI sets
// it and re-executes itself, unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT.
constexpr const char* kSpinCount = "1000";
void exec_with_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("GOMP_SPINCOUNT", kSpinCount, 0);
  setenv("LLMK_SET_GOMP_SPINCOUNT", "1", 1);  // so child processes (bench peers) can get the default back
  execv("/proc/self/exe", argv);              // returns only on failure: then run on with libgomp's default
}
}  // namespace

int main(int argc, char** argv) {
  exec_with_openmp_wait(argv);
  using namespace llmk::cli;
  const auto& cmds = commands();
  auto list = [&](FILE* f) {
    std::fprintf(f, "usage: llmk <command> [options]\n\ncommands:\n");
    for (const auto& c : cmds) std::fprintf(f, "  %-12s %s\n", c.name, c.summary);
  };
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    list(stdout);
    return argc < 2 ? 1 : 0;
  }
  for (const auto& c : cmds) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    try {
      Args args(argc, argv, 2, c.options);
      if (args.help()) {  // --help or -h
        std::fputs(usage(c).c_str(), stdout);
        return 0;
      }
      return c.run(args);
    } catch (const llmk::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 2;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "error: out of memory (a smaller --kv-tokens, -n, --ctx or model may fit)\n");
      return 3;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 3;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  list(stderr);
  return 2;
}
