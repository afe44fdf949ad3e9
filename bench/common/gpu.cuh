// GPU bench helpers, header-only, for bench/<component>/bench_*_gpu.cu:
//  - gpu_median_ms(): CUDA-event timing of a launch, median over reps, with
//    the L2 flushed before every rep (cold-L2 numbers, as the issues ask);
//  - device_copy_gbps(): the device's own copy bandwidth (cudaMemcpy D2D of
//    1 GiB, counting read + write = 2 bytes per byte copied), the yardstick;
//  - open_gpu_bench(): the opening every GPU bench shares.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "bench/common/bench.hpp"
#include "core/cuda_check.cuh"
#include "llmk/cuda.hpp"

namespace llmk::bench {

class L2Flusher {
 public:
  L2Flusher() {
    int dev = 0, l2 = 0;
    LLMK_CUDA_CHECK(cudaGetDevice(&dev));
    LLMK_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    bytes_ = size_t(std::max(l2, 1 << 20)) * 2;
    LLMK_CUDA_CHECK(cudaMalloc(&buf_, bytes_));
  }
  ~L2Flusher() { cudaFree(buf_); }
  void flush(cudaStream_t s) { LLMK_CUDA_CHECK(cudaMemsetAsync(buf_, 0, bytes_, s)); }

 private:
  void* buf_ = nullptr;
  size_t bytes_ = 0;
};

// Median milliseconds of fn(stream) over `reps` runs, each after an L2 flush
// when cold_l2 is set. fn must only enqueue work on the stream.
inline double gpu_median_ms(const std::function<void(cudaStream_t)>& fn, int reps = 20, bool cold_l2 = true) {
  cudaStream_t s;
  LLMK_CUDA_CHECK(cudaStreamCreate(&s));
  L2Flusher flusher;
  cudaEvent_t a, b;
  LLMK_CUDA_CHECK(cudaEventCreate(&a));
  LLMK_CUDA_CHECK(cudaEventCreate(&b));
  fn(s);  // warm-up (module load, first-touch)
  LLMK_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    if (cold_l2) flusher.flush(s);
    LLMK_CUDA_CHECK(cudaEventRecord(a, s));
    fn(s);
    LLMK_CUDA_CHECK(cudaEventRecord(b, s));
    LLMK_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    LLMK_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  LLMK_CUDA_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Device-to-device copy bandwidth in GB/s (read + write counted).
inline double device_copy_gbps(size_t bytes = size_t(1) << 30) {
  void *src = nullptr, *dst = nullptr;
  LLMK_CUDA_CHECK(cudaMalloc(&src, bytes));
  LLMK_CUDA_CHECK(cudaMalloc(&dst, bytes));
  LLMK_CUDA_CHECK(cudaMemset(src, 1, bytes));
  const double ms = gpu_median_ms(
      [&](cudaStream_t s) { LLMK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); }, 10,
      false);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * double(bytes) / (ms * 1e6);
}

// Without a device: notes "skipped: no CUDA device" and returns 0 (the bench
// then returns). Otherwise adds the device copy row (kernel, "copy",
// "d2d_copy"; 256 MiB with --quick, else 1 GiB; the device's name in `device`)
// and returns its GB/s.
inline double open_gpu_bench(Reporter& rep, const Options& opt, const std::string& kernel) {
  if (cuda_device_count() == 0) {
    rep.note("skipped: no CUDA device");
    return 0;
  }
  const size_t bytes = opt.quick ? (size_t(256) << 20) : (size_t(1) << 30);
  const double copy = device_copy_gbps(bytes);
  rep.add(Row{kernel,
              "copy",
              "d2d_copy",
              std::to_string(bytes >> 20) + "MiB",
              "u8",
              2.0 * double(bytes) / (copy * 1e6),
              copy,
              {{"device", cuda_device_name()}}});
  return copy;
}

}  // namespace llmk::bench
