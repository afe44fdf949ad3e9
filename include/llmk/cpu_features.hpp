// Run-time CPU-feature dispatch. The SIMD levels are ordered: scalar < avx2
// (AVX2+FMA+F16C) < avx512 (F/BW/VL/DQ) < avx512vnni < avx512vbmi (VNNI and
// VBMI: Ice Lake, Zen 4 and later). Every CPU kernel runs at simd_level(); a
// kernel without a path for a level runs the next lower one (which kernels
// have which paths: docs/ARCHITECTURE.md, Conventions). Paths at different
// levels may round differently, each within the bound its tests assert against
// the double reference.
//
// The environment variable LLMK_SIMD=scalar|avx2|avx512|avx512vnni|avx512vbmi,
// read once, caps the level for the whole process: a capped run behaves as a
// machine of that level would, tests included (they enumerate the paths up to
// detected_simd_level()). set_simd_limit() lowers the level further at run time
// but never lifts it above that cap. All functions are thread-safe.
#pragma once
#include <string_view>

namespace llmk {

enum class SimdLevel : int { scalar = 0, avx2 = 1, avx512 = 2, avx512vnni = 3, avx512vbmi = 4 };
inline constexpr const char* kSimdLevelChoices = "must be scalar, avx2, avx512, avx512vnni or avx512vbmi";

SimdLevel cpu_simd_level();       // what this CPU + OS support
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
