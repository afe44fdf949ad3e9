// `llmk info`: what this build and machine offer (SIMD level, threads, CUDA).
#include <cstdio>

#include "cli.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/cuda.hpp"
#include "llmk/parallel.hpp"

namespace {
int run_info(llmk::cli::Args& args) {
  args.finish();
  args.no_positionals("info", "info takes no arguments");
  std::printf("simd: %s (cpu %s%s)\n", llmk::simd_name(llmk::simd_level()), llmk::simd_name(llmk::cpu_simd_level()),
              llmk::detected_simd_level() < llmk::cpu_simd_level() ? ", capped by LLMK_SIMD" : "");
  std::printf("threads: %d\n", llmk::num_threads());
  const int n = llmk::cuda_device_count();
  std::printf("cuda: %s, %d device(s)%s%s\n", llmk::cuda_compiled() ? "compiled" : "not compiled", n,
              n ? ", device 0: " : "", n ? llmk::cuda_device_name(0).c_str() : "");
  return 0;
}
}  // namespace
LLMK_COMMAND("info", "print the build's SIMD level, threads and CUDA devices", run_info);
