// The CPU side of LLMK_CUDA=EMU (core/cuda_emu.hpp says what it models and
// what it cannot): the block scheduler, its fibers, and the CUDA runtime
// calls llmk and its tests make, answered on host memory. One device, an
// sm_90 with an H200's limits; streams run in order, at once.
#include "core/cuda_emu.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMK_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define LLMK_EMU_ASAN 1
#endif
#ifdef LLMK_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "LLMK_CUDA=EMU switches fibers with x86-64 code"
#endif

// Saves the callee-saved registers and the stack pointer of the running
// context into *save, and resumes the context whose stack pointer is load.
extern "C" void llmk_emu_switch(void** save, void* load);
asm(R"(
  .text
  .globl llmk_emu_switch
  .type llmk_emu_switch, @function
llmk_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size llmk_emu_switch, .-llmk_emu_switch
  .section .note.GNU-stack,"",@progbits
)");

namespace llmk::emu {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;  // a CUDA thread's stack
constexpr int kMaxThreads = 1024, kWarp = 32;
constexpr size_t kDefaultSmem = size_t(48) << 10, kOptinSmem = 232448;  // sm_90 (H100 / H200)
constexpr size_t kSmemPerSm = 233472;                                   // 228 KiB
constexpr int kSms = 132;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "llmk CUDA emulator: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

struct Fiber {
  void* sp = nullptr;
  char* stack = nullptr;  // kStackBytes, mmap'd once and reused
  ThreadCtx ctx{};
  int index = 0;  // in the block
  enum State { ready, at_barrier, at_warp, done } state = ready;
  WarpOp op = WarpOp::sync;
  const char* bar_file = nullptr;  // the __syncthreads it waits at
  int bar_line = 0;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int arg = 0, width = 32;
};

struct Emu {
  std::mutex launch_mu;  // one launch at a time: __shared__ statics are one per kernel
  std::vector<Fiber> fibers;
  Fiber* cur = nullptr;
  void* sched_sp = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dyn;  // the block's dynamic shared memory (+ alignment slack)
  void* dyn_base = nullptr;
  int nthreads = 0;
  bool reverse = false;  // this block's threads run from the last to the first
  std::string kernel_name;
  std::map<const void*, size_t> smem_limit;  // cudaFuncAttributeMaxDynamicSharedMemorySize
  cudaError_t last_error = cudaSuccess;
#ifdef LLMK_EMU_ASAN
  void* fake_stack = nullptr;
  const void* host_stack_bottom = nullptr;
  size_t host_stack_size = 0;
#endif
};
Emu g_emu;
inline Emu& emu() { return g_emu; }

// The scheduler's side: runs the ready fibers of the block, from f on, in
// index order (each switches straight to the next one: one switch an event),
// until the last of them comes back here.
void resume(Fiber& f) {
  Emu& e = emu();
  e.cur = &f;
#ifdef LLMK_EMU_ASAN
  __sanitizer_start_switch_fiber(&e.fake_stack, f.stack, kStackBytes);
#endif
  llmk_emu_switch(&e.sched_sp, f.sp);
#ifdef LLMK_EMU_ASAN
  __sanitizer_finish_switch_fiber(e.fake_stack, nullptr, nullptr);
#endif
  e.cur = nullptr;
}

// The fiber's side, once its state is set: on to the next ready fiber after
// it, or back to the scheduler at the end of the sweep.
void leave_fiber(bool exiting) {
  Emu& e = emu();
  Fiber& me = *e.cur;
  Fiber* next = nullptr;
  const int step = e.reverse ? -1 : 1;
  for (int t = me.index + step; t >= 0 && t < e.nthreads; t += step)
    if (e.fibers[size_t(t)].state == Fiber::ready) {
      next = &e.fibers[size_t(t)];
      break;
    }
  e.cur = next;
  void* const to = next ? next->sp : e.sched_sp;
#ifdef LLMK_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(exiting ? nullptr : &fake, next ? next->stack : e.host_stack_bottom,
                                 next ? kStackBytes : e.host_stack_size);
  llmk_emu_switch(&me.sp, to);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  (void)exiting;
  llmk_emu_switch(&me.sp, to);
#endif
}

[[noreturn]] void fiber_main() {
#ifdef LLMK_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  (*emu().body)();
  emu().cur->state = Fiber::done;
  leave_fiber(true);
  __builtin_unreachable();
}

// A fresh context on f's stack that starts in fiber_main: six zero registers
// for llmk_emu_switch to pop, fiber_main's address for its ret, and a zero
// return address so fiber_main starts with the stack aligned as after a call.
// The stacks' tops are staggered (by 64 bytes a thread, and 4 KiB every 64
// threads): at one stride they would all fall into the same cache sets.
void start_fiber(Fiber& f, int t) {
  if (!f.stack) {
    void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("cannot map a thread stack");
    f.stack = static_cast<char*>(p);
  }
  auto* top = reinterpret_cast<uintptr_t*>(f.stack + kStackBytes - size_t(t % 64) * 64 - size_t(t / 64 % 16) * 4096);
  top -= 8;  // still 16-byte aligned
  for (int i = 0; i < 6; ++i) top[i] = 0;
  top[6] = reinterpret_cast<uintptr_t>(&fiber_main);
  top[7] = 0;
  f.sp = top;
  f.state = Fiber::ready;
}

std::string where(const Fiber& f) {
  const ThreadCtx& c = f.ctx;
  return "kernel " + emu().kernel_name + ", block (" + std::to_string(c.block_idx.x) + "," +
         std::to_string(c.block_idx.y) + "," + std::to_string(c.block_idx.z) + "), thread (" +
         std::to_string(c.thread_idx.x) + "," + std::to_string(c.thread_idx.y) + "," + std::to_string(c.thread_idx.z) +
         ")";
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl_idx: return "__shfl_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::match_any: return "__match_any_sync";
    default: return "__all_sync";
  }
}

// Completes the warp operation that lane l of the warp at fibers w0.. waits
// at, if every lane of its mask has reached it; returns whether it did. A
// lane of the mask that exited, does not exist or waits at another operation
// is an error (undefined on the GPU); one at a block barrier may still come
// (otherwise the scheduler reports a deadlock).
bool complete_warp_op(int w0, int l) {
  Emu& e = emu();
  Fiber* lanes = e.fibers.data() + w0;
  const int live = std::min(kWarp, e.nthreads - w0);
  const Fiber& me = lanes[l];
  const unsigned m = me.mask;
  if (!(m >> l & 1u)) fail(where(me) + ": " + op_name(me.op) + " with a mask that leaves out the calling lane");
  for (int j = 0; j < kWarp; ++j) {
    if (!(m >> j & 1u)) continue;
    if (j >= live)
      fail(where(me) + ": " + op_name(me.op) + " mask names lane " + std::to_string(j) +
           ", which this block does not have");
    const Fiber& o = lanes[j];
    if (o.state == Fiber::done)
      fail(where(me) + ": " + op_name(me.op) + " mask names lane " + std::to_string(j) + ", which has exited");
    if (o.state == Fiber::at_barrier) return false;
    if (o.op != me.op || o.mask != m || o.width != me.width)
      fail(where(me) + ": " + op_name(me.op) + " (mask " + std::to_string(m) + ") while lane " + std::to_string(j) +
           " is at " + op_name(o.op) + " (mask " + std::to_string(o.mask) + ")");
  }
  const int w = me.width;
  if (w < 1 || w > kWarp || (w & (w - 1)))
    fail(where(me) + ": " + op_name(me.op) + " width " + std::to_string(w) + " is not a power of two <= 32");
  uint64_t vote = 0;
  for (int j = 0; j < kWarp; ++j)
    if (m >> j & 1u && lanes[j].value) vote |= uint64_t(1) << j;
  for (int j = 0; j < kWarp; ++j) {
    if (!(m >> j & 1u)) continue;
    Fiber& f = lanes[j];
    const int seg = j / w * w;
    int src = j;
    switch (f.op) {
      case WarpOp::shfl_idx: src = seg + ((f.arg % w) + w) % w; break;
      case WarpOp::shfl_xor:
        src = j ^ f.arg;
        if (src >= seg + w || src < 0 || src >= kWarp) src = j;
        break;
      case WarpOp::shfl_down:
        src = j + f.arg;
        if (src >= seg + w) src = j;
        break;
      case WarpOp::shfl_up:
        src = j - f.arg;
        if (src < seg) src = j;
        break;
      default: break;
    }
    switch (f.op) {
      case WarpOp::ballot: f.result = vote; break;
      case WarpOp::any: f.result = vote != 0; break;
      case WarpOp::all: f.result = vote == m; break;
      case WarpOp::sync: f.result = 0; break;
      case WarpOp::match_any:
        f.result = 0;
        for (int o = 0; o < kWarp; ++o)
          if (m >> o & 1u && lanes[o].value == f.value) f.result |= uint64_t(1) << o;
        break;
      default:
        if (!(m >> src & 1u))
          fail(where(f) + ": " + op_name(f.op) + " reads lane " + std::to_string(src) + ", outside the mask " +
               std::to_string(m));
        f.result = lanes[src].value;
    }
  }
  for (int j = 0; j < kWarp; ++j)
    if (m >> j & 1u) lanes[j].state = Fiber::ready;
  return true;
}

// Runs one block. Odd blocks (in launch order) run their threads from the last
// to the first: a read of shared memory that a missing barrier leaves
// unordered then sees the value from before the write in one of any two
// blocks (in thread order, the writer of a lower index always ran first).
void run_block(dim3 grid, dim3 block, uint3 bid, bool reverse) {
  Emu& e = emu();
  const int n = e.nthreads;
  e.reverse = reverse;
  for (int t = 0; t < n; ++t) {
    Fiber& f = e.fibers[size_t(t)];
    f.ctx.thread_idx = uint3{unsigned(t) % block.x, unsigned(t) / block.x % block.y, unsigned(t) / (block.x * block.y)};
    f.ctx.block_idx = bid;
    f.ctx.block_dim = block;
    f.ctx.grid_dim = grid;
    f.index = t;
    start_fiber(f, t);
  }
  if (!e.dyn.empty()) std::memset(e.dyn_base, 0xff, e.dyn.size() - 256);
  for (;;) {
    for (int i = 0; i < n; ++i) {
      const int t = reverse ? n - 1 - i : i;
      if (e.fibers[size_t(t)].state == Fiber::ready) {
        resume(e.fibers[size_t(t)]);  // runs every ready fiber from t on
        break;
      }
    }
    bool released = false;
    for (int t = 0; t < n; ++t)
      if (e.fibers[size_t(t)].state == Fiber::at_warp) released |= complete_warp_op(t / kWarp * kWarp, t % kWarp);
    if (released) continue;
    int done = 0, barrier = 0;
    for (int t = 0; t < n; ++t) {
      done += e.fibers[size_t(t)].state == Fiber::done;
      barrier += e.fibers[size_t(t)].state == Fiber::at_barrier;
    }
    if (done == n) return;
    if (done + barrier == n) {  // every live thread at __syncthreads (exited ones count as arrived)
      const Fiber* first = nullptr;
      uint64_t any = 0;  // __syncthreads_or: a live thread's predicate was true
      for (int t = 0; t < n; ++t)
        if (e.fibers[size_t(t)].state == Fiber::at_barrier) any |= e.fibers[size_t(t)].value != 0;
      for (int t = 0; t < n; ++t) {
        Fiber& f = e.fibers[size_t(t)];
        if (f.state != Fiber::at_barrier) continue;
        f.result = any;
        if (!first) first = &f;
        if (f.bar_line != first->bar_line || std::strcmp(f.bar_file, first->bar_file) != 0)
          fail(where(f) + ": waits at the __syncthreads of " + f.bar_file + ":" + std::to_string(f.bar_line) +
               ", thread " + std::to_string(first->index) + " at " + first->bar_file + ":" +
               std::to_string(first->bar_line) + " (a barrier in divergent code)");
        f.state = Fiber::ready;
      }
      continue;
    }
    for (int t = 0; t < n; ++t)
      if (e.fibers[size_t(t)].state == Fiber::at_warp)
        fail(where(e.fibers[size_t(t)]) + ": deadlock: waits at " + op_name(e.fibers[size_t(t)].op) +
             " while other threads wait at __syncthreads");
    fail("kernel " + e.kernel_name + ": deadlock");
  }
}

}  // namespace

const ThreadCtx& ctx() {
  Emu& e = emu();
  if (!e.cur) fail("threadIdx / blockIdx used outside a kernel");
  return e.cur->ctx;
}

int syncthreads_or(const char* file, int line, int pred) {
  Emu& e = emu();
  if (!e.cur) fail("__syncthreads outside a kernel");
  Fiber& f = *e.cur;
  f.state = Fiber::at_barrier;
  f.bar_file = file;
  f.bar_line = line;
  f.value = pred != 0;
  leave_fiber(false);
  return int(f.result);
}
void syncthreads(const char* file, int line) { syncthreads_or(file, line, 0); }

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Emu& e = emu();
  if (!e.cur) fail(std::string(op_name(op)) + " outside a kernel");
  Fiber& f = *e.cur;
  f.state = Fiber::at_warp;
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  leave_fiber(false);
  return f.result;
}

void* dynamic_smem() {
  Emu& e = emu();
  if (!e.cur) fail("dynamic shared memory outside a kernel");
  return e.dyn_base;
}

void launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t,
            const std::function<void()>& body) {
  Emu& e = emu();
  const std::lock_guard<std::mutex> lock(e.launch_mu);
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > uint64_t(kMaxThreads) || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    e.last_error = cudaErrorInvalidConfiguration;
    return;
  }
  const auto lim = e.smem_limit.find(kernel);
  if (smem > (lim == e.smem_limit.end() ? kDefaultSmem : lim->second)) {
    e.last_error = cudaErrorInvalidValue;
    return;
  }
  e.kernel_name = name;
  e.nthreads = int(threads);
  if (e.fibers.size() < threads) e.fibers.resize(threads);
  e.dyn.assign(smem ? smem + 256 : 0, 0);
  e.dyn_base = smem ? reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(e.dyn.data()) + 255) & ~uintptr_t(255))
                    : nullptr;
  e.body = &body;
#ifdef LLMK_EMU_ASAN
  {  // this thread's stack, for the switches back to the scheduler
    pthread_attr_t a;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      pthread_attr_getstack(&a, &addr, &size);
      pthread_attr_destroy(&a);
    }
    e.host_stack_bottom = addr;
    e.host_stack_size = size;
  }
#endif
  bool odd = false;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x, odd = !odd) run_block(grid, block, uint3{x, y, z}, odd);
  e.body = nullptr;
}

}  // namespace llmk::emu

// ---- the CUDA runtime calls, on host memory --------------------------------

namespace {
using llmk::emu::emu;

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) return nullptr;
  std::memset(p, 0xff, bytes);  // not zero, as on a device: a read of what nothing wrote shows
  return p;
}
}  // namespace

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t e = emu().last_error;
  emu().last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return emu().last_error; }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    default: return "cudaError (emulator)";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    default: return "error (CUDA emulator)";
  }
}
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return cudaErrorInvalidDevice;
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "llmk CUDA emulator (CPU, sm_90 limits)");
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = llmk::emu::kSms;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->sharedMemPerBlock = llmk::emu::kDefaultSmem;
  p->sharedMemPerBlockOptin = llmk::emu::kOptinSmem;
  p->totalGlobalMem = size_t(8) << 30;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
  if (d != 0) return cudaErrorInvalidDevice;
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = llmk::emu::kSms; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = int(llmk::emu::kOptinSmem); return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = int(llmk::emu::kDefaultSmem); return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *v = 32; return cudaSuccess;
    case cudaDevAttrMaxPitch: *v = INT32_MAX; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; return cudaSuccess;
    default: return cudaErrorInvalidValue;
  }
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaDeviceReset() {  // a new context: kernels' raised shared memory limits are gone
  const std::lock_guard<std::mutex> lock(emu().launch_mu);
  emu().smem_limit.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  static char token[64];
  *s = reinterpret_cast<cudaStream_t>(token + 1);  // any non-null handle: streams run in order, at once
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = device_alloc(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
  if (n) std::memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind k, cudaStream_t) {
  return cudaMemcpy(dst, src, n, k);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind, cudaStream_t) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
  if (dpitch > size_t(INT32_MAX) || spitch > size_t(INT32_MAX)) return cudaErrorInvalidPitchValue;  // as on sm_90
  for (size_t r = 0; r < height; ++r)
    std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t n) {
  if (n) std::memset(p, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) { return cudaMemset(p, v, n); }
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* k) {
  *a = cudaFuncAttributes{};  // static shared memory is not known here: 0
  a->maxThreadsPerBlock = 1024;
  const std::lock_guard<std::mutex> lock(emu().launch_mu);
  const auto lim = emu().smem_limit.find(k);
  a->maxDynamicSharedSizeBytes = int(lim == emu().smem_limit.end() ? llmk::emu::kDefaultSmem : lim->second);
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* k, cudaFuncAttribute a, int v) {
  if (a != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (v < 0 || size_t(v) > llmk::emu::kOptinSmem) return cudaErrorInvalidValue;
  const std::lock_guard<std::mutex> lock(emu().launch_mu);
  emu().smem_limit[k] = size_t(v);
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void* k, int block, size_t smem,
                                                                   unsigned) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, k, block, smem);
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int block, size_t smem) {
  // An sm_90 SM: 2048 threads, 32 blocks, 228 KiB of shared memory (1 KiB
  // reserved a block); registers are not known here.
  int by_threads = block > 0 ? 2048 / block : 0;
  const int by_smem = int(llmk::emu::kSmemPerSm / (smem + 1024));
  *n = std::max(0, std::min({by_threads, by_smem, 32}));
  return cudaSuccess;
}

}  // extern "C"
