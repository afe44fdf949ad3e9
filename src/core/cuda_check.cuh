// Internal CUDA helpers: error checking for launchers and the API layer.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "llmk/error.hpp"

namespace llmk::cuda {

// Throws llmk::RuntimeError naming the call site when err != cudaSuccess.
void throw_on_error(cudaError_t err, const char* what, const char* file, int line);

}  // namespace llmk::cuda

#define LLMK_CUDA_CHECK(expr) ::llmk::cuda::throw_on_error((expr), #expr, __FILE__, __LINE__)
// For launchers that return cudaError_t: propagate the first failure.
#define LLMK_CUDA_RETURN_IF_ERROR(expr)  \
  do {                                   \
    cudaError_t _e = (expr);             \
    if (_e != cudaSuccess) return _e;    \
  } while (0)
