// ARCHITECTURE.md's SIMD dispatch rule, written once: a kernel lists the paths
// it has by SIMD level, and a level without its own path runs the next lower
// level's, passing over an avxvnni path where the CPU has no 256-bit VNNI
// (llmk/cpu_features.hpp). Used only by the files that dispatch (no ISA flags); the paths
// themselves live in the *_avx2.cpp / *_avx512*.cpp files.
//
//   constexpr simd::Paths<ScanFn> kScan{.scalar = scan_scalar, .avx2 = scan_avx2, .avx512 = scan_avx512};
//   kScan.pick()(row, ...);  // avx512vnni and avx512vbmi run scan_avx512
#pragma once
#include <algorithm>
#include <iterator>
#include <optional>

#include "llmk/cpu_features.hpp"

namespace llmk::simd {

// T: a function pointer or a small struct of them. `scalar` is required (it may
// be a null pointer where the caller has a path of its own below the table);
// every other level is optional.
template <class T>
struct Paths {
  T scalar;
  std::optional<T> avx2{}, avxvnni{}, avx512{}, avx512vnni{}, avx512vbmi{};

  // The path `level` runs: its own, else the nearest lower level's, else scalar.
  constexpr const T& at(SimdLevel level) const {
    return at(level, [](const T&) { return true; });
  }
  // The same walk, skipping the paths for which usable(path) is false (a path
  // that needs, say, a length divisible by its vector width); scalar always runs.
  template <class Usable>
  constexpr const T& at(SimdLevel level, Usable usable) const {
    const std::optional<T>* own[] = {nullptr, &avx2, &avxvnni, &avx512, &avx512vnni, &avx512vbmi};
    static_assert(std::size(own) == size_t(kTopSimdLevel) + 1, "one entry per SimdLevel, in order");
    for (int l = std::min(int(level), int(std::size(own)) - 1); l > 0; --l)
      if (*own[l] && usable(**own[l]) && (l != int(SimdLevel::avxvnni) || cpu_has_vnni256())) return **own[l];
    return scalar;
  }

  // The path for llmk::simd_level() (the CPU's level, capped by LLMK_SIMD and set_simd_limit);
  // reads only, so thread-safe on a table no one writes.
  const T& pick() const { return at(simd_level()); }
  template <class Usable>
  const T& pick(Usable usable) const {
    return at(simd_level(), usable);
  }
};

}  // namespace llmk::simd
