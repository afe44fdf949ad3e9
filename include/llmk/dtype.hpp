// Element types and conversions. f16 is IEEE binary16, bf16 is the top half of
// an IEEE binary32. Conversions to them round to nearest even; NaN stays NaN
// and infinities keep their sign. All arithmetic in llmk accumulates in f32 or
// wider: these types are storage only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

// Inline functions in public headers live in an inline namespace named after
// the ISA the including file is compiled for. Files *_avx2.cpp / *_avx512.cpp
// get ISA flags; without this, the linker could keep their AVX-compiled copy of
// an inline helper for the scalar path too (SIGILL on a CPU without AVX2). The
// ctest isa_leak_check guards it. Types stay outside: only functions go in.
#if defined(__AVX512F__)
#define LLMK_ISA_NAMESPACE isa_avx512
#elif defined(__AVX2__)
#define LLMK_ISA_NAMESPACE isa_avx2
#else
#define LLMK_ISA_NAMESPACE isa_base
#endif

namespace llmk {

enum class DType : uint8_t { f32, f16, bf16, i32, i8, u8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
// Parses "f32" | "f16" | "bf16" | "i32" | "i8" | "u8"; throws InvalidArgument naming `arg`.
DType parse_dtype(std::string_view name, std::string_view arg = "dtype");

// Storage wrappers, so templates can tell f16 from bf16 from uint16_t.
struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

inline namespace LLMK_ISA_NAMESPACE {

inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / nan (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: renormalize
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // nan, quiet
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                         // overflow (incl. inf) -> inf
  if (ax < 0x38800000u) {                                                         // result is subnormal or zero
    if (ax < 0x33000000u) return sign;                                            // below half the smallest subnormal
    // value = m * 2^(e-150) with the implicit bit in m; the f16 subnormal unit
    // is 2^-24, so q = m * 2^(e-126), rounded to nearest even.
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return uint16_t(sign | q);
  }
  // normal: rebias and round to nearest even on the 13 dropped bits
  uint32_t r = ax - 0x38000000u;  // exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

inline float bf16_bits_to_f32(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

inline float to_f32(float v) { return v; }
inline float to_f32(f16 v) { return f16_bits_to_f32(v.bits); }
inline float to_f32(bf16 v) { return bf16_bits_to_f32(v.bits); }

template <class T>
inline T from_f32(float v);
template <>
inline float from_f32<float>(float v) {
  return v;
}
template <>
inline f16 from_f32<f16>(float v) {
  return f16{f32_to_f16_bits(v)};
}
template <>
inline bf16 from_f32<bf16>(float v) {
  return bf16{f32_to_bf16_bits(v)};
}

// The floating storage types an op accepts.
template <class T>
concept FloatStorage = std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

template <FloatStorage T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  if constexpr (std::is_same_v<T, f16>) return DType::f16;
  return DType::bf16;
}

}  // namespace LLMK_ISA_NAMESPACE

// Element-wise conversion between the float storage types (n elements).
void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n);

}  // namespace llmk
