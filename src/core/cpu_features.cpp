// CPUID/XGETBV probing and the SIMD-level cap (see llmk/cpu_features.hpp).
#include "llmk/cpu_features.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "llmk/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace llmk {
namespace {

struct Probe {
  SimdLevel level = SimdLevel::scalar;
  bool avx_vnni = false, vnni256 = false;
};

Probe probe() {
  Probe p;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return p;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
  if (!osxsave || !avx) return p;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_os = (xlo & 0x6u) == 0x6u;              // SSE + AVX state
  const bool zmm_os = ymm_os && (xlo & 0xe0u) == 0xe0u;  // opmask + ZMM state
  if (!ymm_os) return p;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return p;
  const bool avx2 = b & (1u << 5);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31),
             avx512vnni = c & (1u << 11), avx512vbmi = c & (1u << 1);
  if (!(avx2 && fma && f16c)) return p;
  const bool avx512 = zmm_os && avx512f && avx512dq && avx512bw && avx512vl;
  unsigned a1 = 0, b1, c1, d1;
  if (a >= 1) __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);  // a: leaf 7's highest subleaf
  p.avx_vnni = a1 & (1u << 4);
  p.vnni256 = p.avx_vnni || (avx512 && avx512vnni);
  if (avx512) p.level = !avx512vnni ? SimdLevel::avx512 : avx512vbmi ? SimdLevel::avx512vbmi : SimdLevel::avx512vnni;
  else p.level = p.avx_vnni ? SimdLevel::avxvnni : SimdLevel::avx2;
#endif
  return p;
}

const Probe& cpu() {
  static const Probe p = probe();
  return p;
}

SimdLevel env_cap() {
  const char* env = std::getenv("LLMK_SIMD");
  return env && *env ? parse_simd_level(env) : kTopSimdLevel;
}

std::atomic<int>& limit() {
  static std::atomic<int> l{static_cast<int>(kTopSimdLevel)};
  return l;
}

}  // namespace

SimdLevel cpu_simd_level() { return cpu().level; }
bool cpu_has_avx_vnni() { return cpu().avx_vnni; }
bool cpu_has_vnni256() { return cpu().vnni256; }

SimdLevel detected_simd_level() {
  static const SimdLevel level = [] {
    const SimdLevel l = std::min(cpu_simd_level(), env_cap());
    return l == SimdLevel::avxvnni && !cpu_has_vnni256() ? SimdLevel::avx2 : l;
  }();
  return level;
}

SimdLevel simd_level() {
  const int l = limit().load(std::memory_order_relaxed);
  const int d = static_cast<int>(detected_simd_level());
  return static_cast<SimdLevel>(l < d ? l : d);
}

void set_simd_limit(SimdLevel level) { limit().store(static_cast<int>(level)); }

const char* simd_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avxvnni: return "avxvnni";
    case SimdLevel::avx512: return "avx512";
    case SimdLevel::avx512vnni: return "avx512vnni";
    case SimdLevel::avx512vbmi: return "avx512vbmi";
  }
  return "?";
}

SimdLevel parse_simd_level(std::string_view name) {
  for (int l = 0; l <= static_cast<int>(kTopSimdLevel); ++l)
    if (name == simd_name(static_cast<SimdLevel>(l))) return static_cast<SimdLevel>(l);
  throw_invalid_argument("parse_simd_level", "LLMK_SIMD", std::string(name), kSimdLevelChoices);
}

ScopedSimdLimit::ScopedSimdLimit(SimdLevel level) : prev_(static_cast<SimdLevel>(limit().load())) {
  set_simd_limit(level);
}
ScopedSimdLimit::~ScopedSimdLimit() { set_simd_limit(prev_); }

}  // namespace llmk
