// Run-time CPU-feature dispatch. The SIMD levels are ordered: scalar < avx2
// (AVX2+FMA+F16C) < avxvnni (those and 256-bit VNNI: AVX-VNNI on Alder Lake
// and Zen 5, or AVX-512 VNNI with VL) < avx512 (F/BW/VL/DQ) < avx512vnni <
// avx512vbmi (VNNI and VBMI: Ice Lake, Zen 4 and later). Every CPU kernel runs
// at simd_level(); a kernel without a path for a level runs the next lower one,
// passing over an avxvnni path on a CPU without 256-bit VNNI (AVX-512 without
// VNNI: Skylake-SP), where a cap at avxvnni also means avx2 (which kernels have
// which paths: docs/ARCHITECTURE.md, Conventions). Paths at different levels
// may round differently, each within the bound its tests assert against the
// double reference.
//
// The environment variable LLMK_SIMD=scalar|avx2|avxvnni|avx512|avx512vnni|avx512vbmi,
// read once, caps the level for the whole process: a capped run behaves as a
// machine of that level would, tests included (they enumerate the paths up to
// detected_simd_level()). set_simd_limit() lowers the level further at run time
// but never lifts it above that cap. All functions are thread-safe.
#pragma once
#include <string_view>

namespace llmk {

enum class SimdLevel : int { scalar = 0, avx2 = 1, avxvnni = 2, avx512 = 3, avx512vnni = 4, avx512vbmi = 5 };
inline constexpr SimdLevel kTopSimdLevel = SimdLevel::avx512vbmi;
inline constexpr const char* kSimdLevelChoices = "must be scalar, avx2, avxvnni, avx512, avx512vnni or avx512vbmi";

SimdLevel cpu_simd_level();  // what this CPU + OS support
// 256-bit VNNI (vpdpbusd / vpdpwssd on ymm): VEX-encoded (AVX-VNNI) or
// EVEX-encoded (AVX-512 VNNI + VL). An avxvnni path runs only where one is true.
bool cpu_has_avx_vnni();
bool cpu_has_vnni256();
SimdLevel detected_simd_level();  // min(cpu_simd_level(), LLMK_SIMD): the machine as this process sees it
SimdLevel simd_level();           // min(detected_simd_level(), set_simd_limit()): the level kernels run
void set_simd_limit(SimdLevel level);
const char* simd_name(SimdLevel level);
SimdLevel parse_simd_level(std::string_view name);  // throws InvalidArgument

// RAII cap for tests: restores the previous limit on destruction.
class ScopedSimdLimit {
 public:
  explicit ScopedSimdLimit(SimdLevel level);
  ~ScopedSimdLimit();
  ScopedSimdLimit(const ScopedSimdLimit&) = delete;
  ScopedSimdLimit& operator=(const ScopedSimdLimit&) = delete;

 private:
  SimdLevel prev_;
};

}  // namespace llmk
