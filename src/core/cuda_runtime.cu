// Host-side CUDA queries and error formatting (compiled only with CUDA).
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda_check.cuh"
#include "llmk/cuda.hpp"

namespace llmk {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();
    return "unknown";
  }
  return p.name;
}

namespace cuda {
void throw_on_error(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw RuntimeError(std::string("llmk: CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                     ") in " + what + " at " + file + ":" + std::to_string(line));
}

cudaError_t allow_dynamic_smem(const void* kernel, size_t dynamic_bytes) {
  if (dynamic_bytes == 0) return cudaSuccess;
  int dev = 0;
  LLMK_CUDA_RETURN_IF_ERROR(cudaGetDevice(&dev));
  struct Entry {
    const void* kernel;
    int dev;
    size_t static_bytes;
  };
  static std::mutex mu;
  static std::vector<Entry> seen;  // one per (kernel, device) launched with dynamic shared memory
  const std::lock_guard<std::mutex> lock(mu);
  Entry* e = nullptr;
  for (Entry& x : seen)
    if (x.kernel == kernel && x.dev == dev) e = &x;
  if (!e) {
    cudaFuncAttributes fa{};
    LLMK_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&fa, kernel));
    seen.push_back({kernel, dev, fa.sharedSizeBytes});
    e = &seen.back();
  }
  if (e->static_bytes + dynamic_bytes <= (size_t(48) << 10)) return cudaSuccess;
  // The raised limit belongs to the context (a cudaDeviceReset drops it), so it
  // is read each time, not remembered here.
  cudaFuncAttributes fa{};
  LLMK_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&fa, kernel));
  if (size_t(fa.maxDynamicSharedSizeBytes) >= dynamic_bytes) return cudaSuccess;
  int optin = 0;
  LLMK_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - int(e->static_bytes));
}

}  // namespace cuda

}  // namespace llmk
