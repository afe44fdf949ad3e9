// Internal CUDA helpers: error checking for launchers and the API layer, and
// the stream-ordered scratch buffer of the launchers.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "llmk/error.hpp"

namespace llmk::cuda {

// Throws llmk::RuntimeError naming the call site when err != cudaSuccess.
void throw_on_error(cudaError_t err, const char* what, const char* file, int line);

// Lets `kernel` be launched with `dynamic_bytes` of dynamic shared memory on
// the current device. Without an opt-in, static + dynamic shared memory of a
// block may not exceed 48 KiB, so a kernel with S bytes of static shared
// memory fails to launch (cudaErrorInvalidValue) from 48 KiB - S + 1 dynamic
// bytes on, not only above 48 KiB. Once static + dynamic passes 48 KiB and the
// kernel's current limit is below the request, the limit is raised to the
// most it can use (the device's opt-in maximum minus S): always the same
// value, so launches from several host threads with different sizes never
// lower it under one another. The limit is read each time: it belongs to the
// context (after a cudaDeviceReset it is the default again). A size above
// that maximum is left to the launch, which fails.
cudaError_t allow_dynamic_smem(const void* kernel, size_t dynamic_bytes);
template <class K>
cudaError_t allow_dynamic_smem(K* kernel, size_t dynamic_bytes) {
  return allow_dynamic_smem(reinterpret_cast<const void*>(kernel), dynamic_bytes);
}

}  // namespace llmk::cuda

// A kernel launch and a kernel's dynamic shared memory, written so that the
// .cu files also compile as C++ for the CPU emulator (LLMK_CUDA=EMU,
// core/cuda_emu.hpp, which is in front of every .cu file there):
// LLMK_LAUNCH(grid, block, smem, stream, kernel)(args...) is
// kernel<<<grid, block, smem, stream>>>(args...), and LLMK_DYNAMIC_SMEM(T,
// name) declares `extern __shared__ __align__(16) T name[]`.
#ifdef LLMK_CUDA_EMU
#define LLMK_LAUNCH(grid, block, smem, stream, ...) \
  ::llmk::emu::Launcher(__VA_ARGS__, dim3(grid), dim3(block), size_t(smem), cudaStream_t(stream), #__VA_ARGS__)
#define LLMK_DYNAMIC_SMEM(T, name) T* const name = static_cast<T*>(::llmk::emu::dynamic_smem())
#else
#define LLMK_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define LLMK_DYNAMIC_SMEM(T, name) extern __shared__ __align__(16) T name[]
#endif

#define LLMK_CUDA_CHECK(expr) ::llmk::cuda::throw_on_error((expr), #expr, __FILE__, __LINE__)
// For launchers that return cudaError_t: propagate the first failure.
#define LLMK_CUDA_RETURN_IF_ERROR(expr) \
  do {                                  \
    cudaError_t _e = (expr);            \
    if (_e != cudaSuccess) return _e;   \
  } while (0)

namespace llmk::cuda {

// Scratch memory of one launch: one cudaMallocAsync on the launch's stream,
// freed on that stream (cudaFreeAsync) when it goes out of scope, after the
// kernels queued before, also when an error is thrown in between; release()
// frees it early and reports a failure. Stream-ordered, so concurrent calls on
// several streams or devices, from several host threads, and calls captured
// into a CUDA graph each get their own memory (no process-wide buffer).
class StreamBuffer {
 public:
  StreamBuffer(size_t bytes, cudaStream_t s) : s_(s) {
    if (bytes > 0) LLMK_CUDA_CHECK(cudaMallocAsync(&p_, bytes, s));
  }
  ~StreamBuffer() {
    if (p_) cudaFreeAsync(p_, s_);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  template <class T>
  T* at(int64_t byte_offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(p_) + byte_offset);
  }
  void release() {
    void* p = p_;
    p_ = nullptr;
    if (p) LLMK_CUDA_CHECK(cudaFreeAsync(p, s_));
  }

 private:
  void* p_ = nullptr;
  cudaStream_t s_;
};

}  // namespace llmk::cuda
