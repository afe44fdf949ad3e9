// Host-side CUDA queries and error formatting (compiled only with CUDA).
#include <string>

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
}  // namespace cuda

}  // namespace llmk
