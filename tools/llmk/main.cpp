// llmk: the command-line front end. `llmk <command> [options]`; `llmk help`
// lists the commands. Each command is a cmd_*.cpp file in this folder.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli.hpp"
#include "llmk/error.hpp"

int main(int argc, char** argv) {
  using namespace llmk::cli;
  const auto& cmds = commands();
  auto usage = [&](FILE* f) {
    std::fprintf(f, "usage: llmk <command> [options]\n\ncommands:\n");
    for (const auto& c : cmds) std::fprintf(f, "  %-12s %s\n", c.name, c.summary);
  };
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(stdout);
    return argc < 2 ? 1 : 0;
  }
  for (const auto& c : cmds) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    try {
      Args args(argc, argv, 2, c.flags);
      return c.run(args);
    } catch (const llmk::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 3;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
