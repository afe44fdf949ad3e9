// Host-side view of the CUDA backend, usable without the CUDA headers.
// Launchers take a Stream (a cudaStream_t; nullptr is the legacy default
// stream), validate nothing (the API layer did) and return after checking the
// launch; errors surface as llmk::RuntimeError from the API layer.
#pragma once
#include <string>

struct CUstream_st;

// A function both host and device code call: __host__ __device__ under a CUDA
// compiler, a plain function elsewhere.
#if defined(__CUDACC__)
#define LLMK_HD __host__ __device__
#else
#define LLMK_HD
#endif

namespace llmk {

using Stream = CUstream_st*;

bool cuda_compiled();     // built with the CUDA kernels
int cuda_device_count();  // 0 when not compiled or no device / driver
std::string cuda_device_name(int device = 0);

}  // namespace llmk
