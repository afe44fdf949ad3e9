// `llmk bench [NAME...]`: runs the registered benches (bench/<component>/bench_*.cpp). With
// no name it lists them.
#include <algorithm>
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
  opt.threads = static_cast<int>(args.get_int("threads"));  // 0: all
  const std::string only = args.get("only");
  for (size_t a = 0, b; a <= only.size() && args.has("only"); a = b + 1) {
    b = std::min(only.find(',', a), only.size());
    // an empty item would match every shape
    LLMK_CHECK_ARG(b > a, "bench", "--only", only, "holds an empty item (give a,b)");
    opt.only.push_back(only.substr(a, b - a));
  }
  opt.model = args.get("model");
  opt.weights = args.get("weights");
  opt.replicas = static_cast<int>(args.get_int("replicas"));
  opt.router = args.get("router");
  opt.fault = args.flag("fault");
  args.finish();
  if (opt.threads > 0) llmk::set_num_threads(opt.threads);
  const auto& names = args.positional();
  // Every name is checked before any bench runs, so a bad name runs nothing.
  // The benches that read --only; the others refuse it.
  const std::vector<std::string> takes_only = {"softmax-topk", "attention", "generate"};
  for (const auto& n : names) {
    const bool known = n == "all" ||
                       std::any_of(benches().begin(), benches().end(), [&](const auto& b) { return n == b.name; });
    LLMK_CHECK_ARG(known, "bench", "NAME", n, "no such bench (run `llmk bench` for the list)");
    LLMK_CHECK_ARG(opt.only.empty() || std::find(takes_only.begin(), takes_only.end(), n) != takes_only.end(), "bench",
                   "--only", only, "bench " + n + " takes no --only (softmax-topk, attention and generate do)");
  }
  LLMK_CHECK_ARG(opt.only.empty() || !names.empty(), "bench", "--only", only, "needs a bench NAME");
  for (const auto& n : names) {
    LLMK_CHECK_ARG(opt.model.empty() || n == "generate" || n == "speculative", "bench", "--model", opt.model,
                   "is read by bench generate and speculative only (not " + n + ")");
    LLMK_CHECK_ARG(opt.weights.empty() || n == "generate", "bench", "--weights", opt.weights,
                   "is read by bench generate only (not " + n + ")");
    LLMK_CHECK_ARG(opt.replicas == 0 || n == "serve", "bench", "--replicas", opt.replicas,
                   "is read by bench serve only (not " + n + ")");
  }
  LLMK_CHECK_ARG(opt.replicas > 0 || (!args.has("router") && !opt.fault), "bench", "--router/--fault", opt.router,
                 "need --replicas N");
  if (names.empty()) {
    std::printf("usage: llmk bench NAME... [options] (llmk bench --help lists them)\n\nbenches:\n");
    for (const auto& b : benches()) std::printf("  %-14s %s\n", b.name, b.summary);
    return 0;
  }
  int rc = 0;
  for (const auto& n : names)
    for (const auto& b : benches())
      if (n == b.name || n == "all") rc |= b.run(opt);
  return rc;
}
}  // namespace

LLMK_COMMAND(
    "bench", "run benchmarks side by side with peers (llmk bench for the list)", run_bench,
    {llmk::cli::flag("json", "print JSON lines"), llmk::cli::flag("quick", "a short run, in seconds"),
     llmk::cli::integer("threads", "N", "CPU threads (0: all cores)").range(0, llmk::kMaxThreads).def("0"),
     llmk::cli::text("only", "A,B", "the shapes to run, for softmax-topk and attention; generate: its optional rows"),
     llmk::cli::path("model", "NAME|PATH", "the model of bench generate and speculative")
         .shown_default("the default model")
         .must("needs a model name or path"),
     llmk::cli::text("weights", "MIX", "bench generate --model SHAPE: q4_k_m, q4_0 or q8_0").shown_default("q4_k_m"),
     llmk::cli::integer("replicas", "N", "bench serve: N llmk serve replicas behind --router").range(0, 16).def("0"),
     llmk::cli::choice(
         "router",
         [] {
           return std::vector<std::string>{"vllm-router", "haproxy"};
         },
         "bench serve --replicas: the router in front")
         .def("vllm-router"),
     llmk::cli::flag("fault", "bench serve --replicas: kill / SIGTERM replicas under load, count outcomes")},
    "NAME...\tthe benches to run (all: every one); none: list them");
