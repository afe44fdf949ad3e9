// The CUDA kernels on the CPU (LLMK_CUDA=EMU): every .cu file of the library
// and of the tests is compiled as C++ with this header in front of it, and the
// CUDA runtime calls they make are answered by core/cuda_emu.cpp. It exists
// because no GPU is at hand where llmk is mostly built: the kernels' logic
// (indexing, tails, merges, ties, special values, launch configurations)
// runs under the same tests as on a device, and under ASan + UBSan.
//
// Model: a launch runs its blocks one after another; in a block, every CUDA
// thread is a fiber with its own stack, run (in thread order; in odd blocks
// from the last thread to the first) until it reaches __syncthreads or
// a warp operation (__shfl*_sync, __ballot_sync, __any_sync, __all_sync,
// __match_any_sync, __syncwarp). A block barrier releases when every live thread of the block
// has reached it; a warp operation when every lane in its mask has reached a
// warp operation with the same mask and kind (then every lane's result is
// computed at once). What the GPU leaves undefined is reported as an error
// (the process aborts with a message): a mask naming a lane that exited or
// does not exist, lanes of one mask at different operations, a shuffle from
// a lane outside the mask, threads of a block at different __syncthreads
// (divergent code), a deadlock.
// __shared__ variables become function statics (blocks never overlap, and
// launches from several host threads are serialized), dynamic shared memory
// and cudaMalloc'd memory start filled with 0xff bytes (NaN as f32) so a read
// of what no thread wrote shows. Launch limits are checked as on an sm_90
// device: 1024 threads a block, 48 KiB of dynamic shared memory unless
// cudaFuncSetAttribute raised the kernel's limit (to at most 227 KiB).
//
// What it cannot show: most data races (a fiber runs until it blocks, so a
// missing __syncthreads between a write and another thread's read is hidden
// when the writer runs first; the odd blocks' reversed order shows the rest
// of that kind), the memory model, device math
// (expf, division: the host's are correctly rounded, the device's within a
// few ulp), and speed. Those need a GPU: scripts/gpu-check.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// Host compilation defines __global__, __device__, __host__ and __shared__ as
// nothing; a block's shared variables are one object for all its threads.
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

namespace llmk::emu {

struct ThreadCtx {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
};
// The running CUDA thread's indices (only inside a kernel).
const ThreadCtx& ctx();

void syncthreads(const char* file, int line);              // the call site, to check every thread is at the same one
int syncthreads_or(const char* file, int line, int pred);  // ... and whether any live thread's pred != 0
enum class WarpOp { sync, shfl_idx, shfl_xor, shfl_down, shfl_up, ballot, any, all, match_any };
// Every lane in `mask` takes part; returns this lane's result (the value bits
// of its source lane for shuffles, the vote for ballot / any / all).
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
// The block's dynamic shared memory (the launch's size, 256-byte aligned).
void* dynamic_smem();

// Runs body once for every thread of every block (blocks in turn, a block's
// threads as fibers); sets the sticky launch error and runs nothing when the
// configuration is invalid on an sm_90 device.
void launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            const std::function<void()>& body);

template <class T>
T warp_value(WarpOp op, unsigned mask, T v, int arg, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a shuffle moves up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const uint64_t r = warp_op(op, mask, bits, arg, width);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

// kernel<<<grid, block, smem, stream>>>(args...) as Launcher(kernel, grid,
// block, smem, stream)(args...): each thread calls the kernel on its own copy
// of the arguments, converted to the kernel's parameter types once.
template <class... P>
struct Launcher {
  Launcher(void (*k)(P...), dim3 g, dim3 b, size_t sm, cudaStream_t st, const char* n)
      : kernel(k), grid(g), block(b), smem(sm), stream(st), name(n) {}
  void (*kernel)(P...);
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char* name;  // the kernel as written at the launch, for the emulator's reports
  template <class... A>
  void operator()(A&&... a) const {
    const std::tuple<std::decay_t<P>...> params(std::forward<A>(a)...);
    const auto k = kernel;
    launch(reinterpret_cast<const void*>(kernel), name, grid, block, smem, stream, [k, &params]() {
      auto mine = params;
      std::apply(k, mine);
    });
  }
};
template <class... P>
Launcher(void (*)(P...), dim3, dim3, size_t, cudaStream_t, const char*) -> Launcher<P...>;

}  // namespace llmk::emu

#define threadIdx (::llmk::emu::ctx().thread_idx)
#define blockIdx (::llmk::emu::ctx().block_idx)
#define blockDim (::llmk::emu::ctx().block_dim)
#define gridDim (::llmk::emu::ctx().grid_dim)

#define __syncthreads() ::llmk::emu::syncthreads(__FILE__, __LINE__)
#define __syncthreads_or(pred) ::llmk::emu::syncthreads_or(__FILE__, __LINE__, (pred))
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::llmk::emu::warp_op(::llmk::emu::WarpOp::sync, mask, 0, 0, 32); }
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::llmk::emu::warp_value(::llmk::emu::WarpOp::shfl_idx, mask, v, src, width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::llmk::emu::warp_value(::llmk::emu::WarpOp::shfl_xor, mask, v, lane_mask, width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::llmk::emu::warp_value(::llmk::emu::WarpOp::shfl_down, mask, v, int(delta), width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::llmk::emu::warp_value(::llmk::emu::WarpOp::shfl_up, mask, v, int(delta), width);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return unsigned(::llmk::emu::warp_op(::llmk::emu::WarpOp::ballot, mask, pred != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int pred) {
  return int(::llmk::emu::warp_op(::llmk::emu::WarpOp::any, mask, pred != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int pred) {
  return int(::llmk::emu::warp_op(::llmk::emu::WarpOp::all, mask, pred != 0, 0, 32));
}
// The lanes of `mask` whose value equals this lane's (32- or 64-bit values).
template <class T>
unsigned __match_any_sync(unsigned mask, T value) {
  static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8), "match takes 32- or 64-bit integers");
  return unsigned(::llmk::emu::warp_value(::llmk::emu::WarpOp::match_any, mask, uint64_t(value), 0, 32));
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
// One warp's mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"): with g = lane
// / 4 and t = lane % 4, a lane holds A (16 x 16, f16 pairs, the lower index in
// the low half) rows g (a[0]: columns 2t, 2t + 1; a[2]: 2t + 8, 2t + 9) and
// g + 8 (a[1], a[3]), B (16 x 8) column g at rows 2t, 2t + 1 (b[0]) and 2t + 8,
// 2t + 9 (b[1]), and C / D rows g (c[0], c[1]) and g + 8 (c[2], c[3]) of columns
// 2t, 2t + 1. d = A B + c: the products are exact in f32, summed in k order
// after c (the device's order and rounding of the sum may differ).
inline void llmk_emu_mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  const auto& x = ::llmk::emu::ctx();
  const int lane = int(x.thread_idx.x + x.block_dim.x * (x.thread_idx.y + x.block_dim.y * x.thread_idx.z)) % 32;
  const int g = lane / 4, t = lane % 4;
  const auto lo = [](uint32_t h) { return __half2float(__ushort_as_half(uint16_t(h & 0xffffu))); };
  const auto hi = [](uint32_t h) { return __half2float(__ushort_as_half(uint16_t(h >> 16))); };
  float arow[2][16], bcol[2][16];  // A rows g, g + 8; B columns 2t, 2t + 1
  for (int i = 0; i < 4; ++i) {    // lane 4 r + i holds k = 2i, 2i + 1 and 2i + 8, 2i + 9 of row r / column r
    for (int r = 0; r < 2; ++r) {
      const uint32_t near = __shfl_sync(0xffffffffu, a[r], 4 * g + i);
      const uint32_t far = __shfl_sync(0xffffffffu, a[2 + r], 4 * g + i);
      arow[r][2 * i] = lo(near), arow[r][2 * i + 1] = hi(near);
      arow[r][2 * i + 8] = lo(far), arow[r][2 * i + 9] = hi(far);
    }
    for (int j = 0; j < 2; ++j) {
      const int n = 2 * t + j;
      const uint32_t near = __shfl_sync(0xffffffffu, b[0], 4 * n + i), far = __shfl_sync(0xffffffffu, b[1], 4 * n + i);
      bcol[j][2 * i] = lo(near), bcol[j][2 * i + 1] = hi(near);
      bcol[j][2 * i + 8] = lo(far), bcol[j][2 * i + 9] = hi(far);
    }
  }
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 2; ++j) {
      float acc = c[2 * r + j];
      for (int k = 0; k < 16; ++k) acc += arow[r][k] * bcol[j][k];
      d[2 * r + j] = acc;
    }
}

// Byte n of the result is byte s<4n+2:4n> of the 8 bytes {y, x} (x bytes 0-3,
// y bytes 4-7); the fourth bit of each selector is ignored, as documented.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t in = uint64_t(y) << 32 | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= unsigned((in >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }

// Rounded f32 arithmetic (no contraction into an FMA on either side).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;

// Atomics: fibers switch only at barriers and warp operations, so a plain
// read-modify-write is atomic here.
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  const T old = *p;
  *p = old < v ? v : old;
  return old;
}
template <class T>
T atomicMin(T* p, T v) {
  const T old = *p;
  *p = v < old ? v : old;
  return old;
}

// Device code's min / max overloads, for the operand types of the usual
// arithmetic conversions (min(int, unsigned) is unsigned, as in CUDA).
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(b) < C(a) ? C(b) : C(a);
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(b) : C(a);
}
