// Host-side CUDA queries when the kernels are not compiled in. The real ones
// live in cuda_runtime.cu.
#include "llmk/cuda.hpp"

#ifndef LLMK_HAVE_CUDA
namespace llmk {
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return "none"; }
}  // namespace llmk
#endif
