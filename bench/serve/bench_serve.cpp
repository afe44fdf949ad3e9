// `llmk bench serve`: the serving load generator, bench/serve/bench_serve.py, run against this
// llmk binary and the peers it finds (its header says what it runs and how it counts); with
// --replicas N, bench/serve/bench_replicas.py (N replicas behind --router; --fault: the fault test).
// --quick, --json and --threads are passed on; the scripts' other flags are for running them directly.
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/common/bench.hpp"
#include "llmk/parallel.hpp"

namespace {
int run_serve_bench(const llmk::bench::Options& opt) {
  using namespace llmk::bench;
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    std::fprintf(stderr, "bench serve: cannot read /proc/self/exe\n");
    return 1;
  }
  std::string dir(exe, size_t(n));
  dir.resize(dir.rfind('/'));
  const std::string script = opt.replicas > 0 ? "bench_replicas.py" : "bench_serve.py";
  std::string cmd = "LLMK_BUILD_DIR='" + dir + "' '" + python_executable() + "' '" + source_dir() + "/bench/serve/" +
                    script + "' --threads " + std::to_string(opt.threads > 0 ? opt.threads : llmk::num_threads());
  if (opt.replicas > 0) cmd += " --replicas " + std::to_string(opt.replicas) + " --router '" + opt.router + "'";
  if (opt.fault) cmd += " --fault";
  if (opt.quick) cmd += " --quick";
  if (opt.json) cmd += " --json";
  std::fflush(stdout);
  const int rc = std::system(cmd.c_str());
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    std::fprintf(stderr, "bench serve: %s failed (status %d)\n", cmd.c_str(), rc);
    return 1;
  }
  return 0;
}
}  // namespace

LLMK_BENCH("serve", "llmk serve vs llama-cpp-python's server and llama-server: tok/s, TTFT, ITL, prefix cache",
           run_serve_bench);
