// Thread count (see llmk/parallel.hpp).
#include "llmk/parallel.hpp"

#include <omp.h>

#include <cstdlib>

#include "llmk/error.hpp"

namespace llmk {
namespace {
int& threads() {
  static int n = [] {
    const char* env = std::getenv("LLMK_THREADS");
    if (env && *env) {
      const int v = std::atoi(env);
      LLMK_CHECK_ARG(v >= 1, "num_threads", "LLMK_THREADS", env, "must be an integer >= 1");
      return v;
    }
    return omp_get_max_threads();
  }();
  return n;
}
}  // namespace

int num_threads() { return threads(); }

void set_num_threads(int n) {
  LLMK_CHECK_ARG(n >= 1, "set_num_threads", "n", n, "must be >= 1");
  threads() = n;
}

}  // namespace llmk
