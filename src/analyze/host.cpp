// This machine as a Device: memory from /proc/meminfo, the CPU's name from
// /proc/cpuinfo, and the f32 FMA peak measured on the widest SIMD path allowed.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "analyze/peak_flops.hpp"
#include "llmk/analyze.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/error.hpp"

namespace llmk::analyze {

namespace {
// The value after "key:" on the first matching line of a /proc file, or "".
std::string proc_field(const char* path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}
}  // namespace

Device host_device(double bandwidth_gbps, double peak_tflops) {
  LLMK_CHECK_ARG(bandwidth_gbps > 0, "analyze::host_device", "bandwidth_gbps", bandwidth_gbps, "must be > 0");
  LLMK_CHECK_ARG(peak_tflops > 0, "analyze::host_device", "peak_tflops", peak_tflops, "must be > 0");
  const std::string mem = proc_field("/proc/meminfo", "MemTotal");  // "24576000 kB"
  const int64_t kib = mem.empty() ? 0 : std::stoll(mem);
  if (kib <= 0) throw RuntimeError("llmk::analyze::host_device: cannot read MemTotal from /proc/meminfo");
  std::string cpu = proc_field("/proc/cpuinfo", "model name");
  if (cpu.empty()) cpu = "unknown CPU";
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  Device d;
  d.key = "cpu";
  d.name = "this machine: " + cpu + ", " + std::to_string(cores) + " cores";
  d.memory_bytes = kib * 1024;
  d.bandwidth_gbps = bandwidth_gbps;
  d.peak_tflops = peak_tflops;
  d.fp32_tflops = peak_tflops;  // a CPU has no separate matrix unit that llmk uses
  d.source = "/proc/meminfo MemTotal; bandwidth and f32 FMA peak measured or given";
  return d;
}

double measure_peak_tflops(int threads) {
  LLMK_CHECK_ARG(threads >= 1, "analyze::measure_peak_tflops", "threads", threads, "must be >= 1");
  const SimdLevel level = simd_level();
  const int width = level >= SimdLevel::avx512 ? 16 : level == SimdLevel::avx2 ? 8 : 1;
  const int64_t iters = 40'000'000 / width;  // 480M FMA lanes per thread: ~10-20 ms on AVX2
  double best = 0;
  float sink = 0;
  for (int rep = 0; rep < 10; ++rep) {  // best of 10: other processes only slow it down
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      if (level >= SimdLevel::avx512) sink += detail::fma_chains_avx512(iters);
      else if (level == SimdLevel::avx2) sink += detail::fma_chains_avx2(iters);
      else sink += detail::fma_chains<detail::ScalarIsa>(iters);
    }
    const double s = omp_get_wtime() - t0;
    best = std::max(best, 2.0 * double(iters) * detail::kFmaChains * width * threads / s);
  }
  if (!(sink == sink)) throw RuntimeError("llmk::analyze::measure_peak_tflops: NaN in the FMA loop");
  return best / 1e12;
}

}  // namespace llmk::analyze
