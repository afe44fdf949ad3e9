// `llmk bench [NAME...] [--json] [--quick] [--threads N]`: runs the registered
// benches (bench/<component>/bench_*.cpp). With no name it lists them.
#include <cstdio>
#include <string>

#include "bench/common/bench.hpp"
#include "cli.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"

namespace {
int run_bench(llmk::cli::Args& args) {
  using namespace llmk::bench;
  Options opt;
  opt.json = args.flag("json");
  opt.quick = args.flag("quick");
  opt.threads = static_cast<int>(args.get_int("threads", 0, 0, llmk::kMaxThreads));  // 0: all
  const std::string only = args.get("only", "");
  for (size_t a = 0, b; a < only.size(); a = b + 1) {
    b = only.find(',', a);
    if (b == std::string::npos) b = only.size();
    opt.only.push_back(only.substr(a, b - a));
  }
  args.finish();
  if (opt.threads > 0) llmk::set_num_threads(opt.threads);
  const auto& names = args.positional();
  if (names.empty()) {
    std::printf("usage: llmk bench NAME... [--json] [--quick] [--threads N] [--only a,b]\n\nbenches:\n");
    for (const auto& b : benches()) std::printf("  %-14s %s\n", b.name, b.summary);
    return 0;
  }
  int rc = 0;
  for (const auto& n : names) {
    bool found = false;
    for (const auto& b : benches()) {
      if (n != b.name && n != "all") continue;
      found = true;
      rc |= b.run(opt);
    }
    LLMK_CHECK_ARG(found, "bench", "NAME", n, "no such bench (run `llmk bench` for the list)");
  }
  return rc;
}
}  // namespace

LLMK_COMMAND("bench", "run benchmarks side by side with peers (llmk bench for the list)", run_bench, {"json", "quick"});
