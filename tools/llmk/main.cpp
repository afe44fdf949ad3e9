// llmk: the command-line front end. `llmk <command> [options]`; `llmk help`
// lists the commands, `llmk <command> --help` (or -h) prints one command's
// usage. Each command is a cmd_*.cpp file in this folder.
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
  auto usage = [&](FILE* f) {
    std::fprintf(f, "usage: llmk <command> [options]\n\ncommands:\n");
    for (const auto& c : cmds) std::fprintf(f, "  %-12s %s\n", c.name, c.summary);
  };
  // One command's line from `llmk help`, then its options that take no value.
  auto command_usage = [](const Command& c) {
    std::printf("usage: llmk %s [options]\n\n  %-12s %s\n", c.name, c.name, c.summary);
    if (c.flags.empty()) return;
    std::printf("\noptions that take no value:");
    for (const auto& f : c.flags) std::printf(" --%s", f.c_str());
    std::printf("\n");
  };
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(stdout);
    return argc < 2 ? 1 : 0;
  }
  for (const auto& c : cmds) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    try {
      std::vector<std::string> flags = c.flags;
      flags.push_back("help");
      Args args(argc, argv, 2, flags);
      if (args.flag("help")) {  // --help or -h
        command_usage(c);
        return 0;
      }
      return c.run(args);
    } catch (const llmk::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 2;
    } catch (const std::bad_alloc&) {  // named as such, with what to shrink
      std::fprintf(stderr, "error: out of memory (a smaller --kv-tokens, -n, --ctx or model may fit)\n");
      return 3;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 3;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
