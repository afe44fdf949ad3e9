// llmk: the command-line front end. `llmk <command> [options]`; `llmk help`
// lists the commands, `llmk <command> --help` (or -h) prints one command's
// options, each with its range and default. Each command is a cmd_*.cpp file in this folder.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli.hpp"
#include "llmk/error.hpp"

int main(int argc, char** argv) {
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
