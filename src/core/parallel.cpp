// Thread count (see llmk/parallel.hpp).
#include "llmk/parallel.hpp"

#include <omp.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "llmk/error.hpp"

namespace llmk {
namespace {
int& threads() {
  static int n = [] {
    const char* env = std::getenv("LLMK_THREADS");
    if (env && *env) {
      char* end = nullptr;
      errno = 0;
      const long v = std::strtol(env, &end, 10);
      LLMK_CHECK_ARG(*end == '\0' && errno == 0 && v >= 1 && v <= kMaxThreads, "num_threads", "LLMK_THREADS",
                     std::string(env), "must be an integer in [1, " + std::to_string(kMaxThreads) + "]");
      return int(v);
    }
    return omp_get_max_threads();
  }();
  return n;
}
}  // namespace

int num_threads() { return threads(); }

void set_num_threads(int n) {
  // OpenMP crashes (SIGSEGV in libgomp) when it cannot start a team that large.
  LLMK_CHECK_ARG(n >= 1 && n <= kMaxThreads, "set_num_threads", "n", n,
                 "must be in [1, " + std::to_string(kMaxThreads) + "]");
  threads() = n;
}

}  // namespace llmk
