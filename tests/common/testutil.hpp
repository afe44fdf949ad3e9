// Test helpers shared by every differential test:
//  - Guarded<T>: a host array with a sentinel tail (and optional misaligned
//    head) that catches writes past the end;
//  - DeviceGuarded<T>: the same on the GPU, checked after copying back;
//  - expect_close(): abs + rel tolerance, NaN must match NaN, infinities must
//    match in sign, and a failure prints the first mismatching pairs;
//  - LLMK_REQUIRE_CUDA(): skips visibly with "skipped: no CUDA device";
//  - simd_levels(): every SIMD path this CPU can run, for dispatch tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/cpu_features.hpp"
#include "llmk/cuda.hpp"
#include "llmk/error.hpp"
#include "llmk/dtype.hpp"

#ifdef LLMK_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace llmk::test {

inline constexpr uint8_t kSentinelByte = 0xA5;
inline constexpr size_t kGuardBytes = 256;

// n elements of T, preceded by `misalign` bytes (so data() may be unaligned)
// and followed by a guard of sentinel bytes.
template <class T>
class Guarded {
 public:
  explicit Guarded(size_t n, size_t misalign = 0)
      : n_(n), off_(misalign), raw_(64 + misalign + n * sizeof(T) + kGuardBytes, kSentinelByte) {
    base_ = reinterpret_cast<uintptr_t>(raw_.data());
    base_ = (base_ + 63) / 64 * 64 - reinterpret_cast<uintptr_t>(raw_.data());
  }
  T* data() { return reinterpret_cast<T*>(raw_.data() + base_ + off_); }
  const T* data() const { return reinterpret_cast<const T*>(raw_.data() + base_ + off_); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return n_; }
  // True when every guard byte (head and tail) is still the sentinel.
  bool guard_intact() const {
    const uint8_t* p = raw_.data() + base_ + off_ + n_ * sizeof(T);
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (p[i] != kSentinelByte) return false;
    const uint8_t* h = raw_.data() + base_;
    for (size_t i = 0; i < off_; ++i)
      if (h[i] != kSentinelByte) return false;
    return true;
  }

 private:
  size_t n_, off_;
  std::vector<uint8_t> raw_;
  size_t base_ = 0;
};

// Tolerance: |a - e| <= atol + rtol * |e| (+ atol_extra[i] when given: an
// analytic per-element bound). NaN must match NaN; an infinity must match an
// infinity of the same sign. Prints up to 8 mismatches.
template <class A, class E>
::testing::AssertionResult all_close(const A* actual, const E* expected, size_t n, double atol, double rtol,
                                     const std::string& what = "", const double* atol_extra = nullptr) {
  size_t bad = 0;
  std::string msg;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = double(actual[i]), e = double(expected[i]);
    bool ok;
    if (std::isnan(e) || std::isnan(a)) ok = std::isnan(e) && std::isnan(a);
    else if (std::isinf(e) || std::isinf(a)) ok = a == e;
    else {
      const double err = std::fabs(a - e), tol = atol + rtol * std::fabs(e) + (atol_extra ? atol_extra[i] : 0.0);
      ok = err <= tol;
      worst = std::max(worst, err / tol);
    }
    if (!ok && bad++ < 8)
      msg += "\n  [" + std::to_string(i) + "] actual " + std::to_string(a) + " expected " + std::to_string(e);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << n << " elements out of tolerance (atol "
                                       << atol << (atol_extra ? " + a per-element bound" : "") << ", rtol " << rtol
                                       << ")" << msg;
}

template <class T>
std::vector<float> to_floats(const T* p, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = to_f32(p[i]);
  return out;
}

// Machine epsilon of a storage type, for tolerances of the form k * eps.
template <class T>
constexpr double eps_of() {
  if constexpr (std::is_same_v<T, float>) return 1.1920928955078125e-07;
  if constexpr (std::is_same_v<T, f16>) return 9.765625e-04;
  if constexpr (std::is_same_v<T, bf16>) return 7.8125e-03;
  return 2.220446049250313e-16;
}

// The message of the InvalidArgument that fn() throws, or "(no InvalidArgument)".
inline std::string invalid_argument_message(auto&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

inline std::vector<SimdLevel> simd_levels() {
  std::vector<SimdLevel> v;
  for (int l = 0; l <= static_cast<int>(detected_simd_level()); ++l)
    if (l != static_cast<int>(SimdLevel::avxvnni) || cpu_has_vnni256()) v.push_back(static_cast<SimdLevel>(l));
  return v;
}

// Fills with N(mean, stddev), rounded to T.
template <class T>
void fill_normal(T* p, size_t n, uint64_t seed, double mean = 0.0, double stddev = 1.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(mean, stddev);
  for (size_t i = 0; i < n; ++i) p[i] = from_f32<T>(float(d(g)));
}

#ifdef LLMK_HAVE_CUDA
// n elements of T on the device followed by a sentinel guard.
template <class T>
class DeviceGuarded {
 public:
  explicit DeviceGuarded(size_t n, size_t misalign = 0) : n_(n), off_(misalign) {
    bytes_ = misalign + n * sizeof(T) + kGuardBytes;
    if (cudaMalloc(&raw_, bytes_) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    cudaMemset(raw_, kSentinelByte, bytes_);
  }
  ~DeviceGuarded() { cudaFree(raw_); }
  DeviceGuarded(const DeviceGuarded&) = delete;
  DeviceGuarded& operator=(const DeviceGuarded&) = delete;
  T* data() { return reinterpret_cast<T*>(static_cast<uint8_t*>(raw_) + off_); }
  void upload(const T* host) { cudaMemcpy(data(), host, n_ * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), static_cast<const uint8_t*>(raw_) + off_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  bool guard_intact() const {
    std::vector<uint8_t> g(kGuardBytes + off_);
    cudaMemcpy(g.data() + off_, static_cast<const uint8_t*>(raw_) + off_ + n_ * sizeof(T), kGuardBytes,
               cudaMemcpyDeviceToHost);
    if (off_) cudaMemcpy(g.data(), raw_, off_, cudaMemcpyDeviceToHost);
    for (uint8_t b : g)
      if (b != kSentinelByte) return false;
    return true;
  }

 private:
  size_t n_, off_, bytes_;
  void* raw_ = nullptr;
};
#endif

// True where the CUDA tests run on the CPU emulator (LLMK_CUDA=EMU,
// src/core/cuda_emu.hpp): a few tests then take fewer rows of their largest
// shapes (every launch configuration still runs), since a block's threads run
// one after another there.
#ifdef LLMK_CUDA_EMU
inline constexpr bool kCudaEmulated = true;
#else
inline constexpr bool kCudaEmulated = false;
#endif

}  // namespace llmk::test

// Skips the current test, visibly, when there is no CUDA device to run on.
#define LLMK_REQUIRE_CUDA()                                                          \
  do {                                                                               \
    if (::llmk::cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)
