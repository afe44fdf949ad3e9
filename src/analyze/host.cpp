// This machine as a Device: memory from /proc/meminfo, the CPU's name from
// /proc/cpuinfo, the f32 FMA peak measured on the widest SIMD path allowed, and
// the STREAM triad bandwidth (which the benches also use as their yardstick).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "analyze/peak_flops.hpp"
#include "core/dispatch.hpp"
#include "llmk/analyze.hpp"
#include "llmk/error.hpp"
#include "llmk/tensor.hpp"

namespace llmk::analyze {

namespace {
// The FMA loop of one SIMD level and its f32 lanes a vector.
struct PeakPath {
  float (*fma_chains)(int64_t iters);
  int width;
};
constexpr simd::Paths<PeakPath> kPeak{.scalar = {detail::fma_chains<simd::Scalar>, 1},
                                      .avx2 = PeakPath{detail::fma_chains_avx2, 8},
                                      .avx512 = PeakPath{detail::fma_chains_avx512, 16}};

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
  const PeakPath path = kPeak.pick();
  const int width = path.width;
  const int64_t iters = 40'000'000 / width;  // 480M FMA lanes per thread: ~10-20 ms on AVX2
  double best = 0;
  float sink = 0;
  for (int rep = 0; rep < 10; ++rep) {  // best of 10: other processes only slow it down
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += path.fma_chains(iters);
    const double s = omp_get_wtime() - t0;
    best = std::max(best, 2.0 * double(iters) * detail::kFmaChains * width * threads / s);
  }
  if (!(sink == sink)) throw RuntimeError("llmk::analyze::measure_peak_tflops: NaN in the FMA loop");
  return best / 1e12;
}

double measure_triad_gbps(int threads, size_t total_bytes) {
  const char* fn = "analyze::measure_triad_gbps";
  LLMK_CHECK_ARG(threads >= 1, fn, "threads", threads, "must be >= 1");
  LLMK_CHECK_ARG(total_bytes >= 3 * sizeof(double), fn, "total_bytes", total_bytes, "must be >= 24");
  const size_t n = total_bytes / (3 * sizeof(double));
  Buffer A(n * 8), B(n * 8), C(n * 8);
  double *a = A.as<double>(), *b = B.as<double>(), *c = C.as<double>();
  // First touch by the same static schedule as the triad, so pages are local.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  const double s = 3.0;
  auto triad = [&] {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
  };
  using clk = std::chrono::steady_clock;
  triad();  // warm-up
  std::vector<double> ms;
  const auto start = clk::now();
  while (ms.size() < 20) {
    const auto t0 = clk::now();
    triad();
    const auto t1 = clk::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (ms.size() >= 5 && std::chrono::duration<double>(t1 - start).count() >= 0.5) break;
  }
  if (a[n / 2] != 7.0) throw RuntimeError("llmk::analyze::measure_triad_gbps: wrong triad result");
  std::sort(ms.begin(), ms.end());
  const size_t k = ms.size();
  const double median = k % 2 ? ms[k / 2] : 0.5 * (ms[k / 2 - 1] + ms[k / 2]);
  return 3.0 * 8.0 * double(n) / (median * 1e6);
}

}  // namespace llmk::analyze
