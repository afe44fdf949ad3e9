// AVX2/F16C conversions f16 <-> f32 (F16C rounds to nearest even like the
// scalar path). Returns false for pairs it does not handle.
#include <immintrin.h>

#include "llmk/dtype.hpp"

namespace llmk::detail {

bool convert_avx2(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == DType::f16 && dt == DType::f32) {
    auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    for (; i < n; ++i) d[i] = f16_bits_to_f32(s[i]);
    return true;
  }
  if (st == DType::f32 && dt == DType::f16) {
    auto* s = static_cast<const float*>(src);
    auto* d = static_cast<uint16_t*>(dst);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) d[i] = f32_to_f16_bits(s[i]);
    return true;
  }
  return false;
}

}  // namespace llmk::detail
