// Scalar reference quantizers and dequantizers for ggml's Q8_0, Q4_0 and Q4_1 blocks
// (include/llmk/ggml_quants.hpp). They follow ggml's *_ref rounding step for step (reciprocal
// of the f32 scale, truncation after +0.5/+8.5, fp16 round-to-nearest-even), so a row
// quantized here is byte-identical to the one llama.cpp writes.
#include "llmk/ggml_quants.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "llmk/dtype.hpp"
#include "llmk/error.hpp"

namespace llmk {

static void check_n(const char* fn, int64_t n) {
  LLMK_CHECK_ARG(n >= 0 && n % kQuantBlock == 0, fn, "n", n, "must be a non-negative multiple of 32");
}

// The quantizers round x / d to an integer code: a NaN or an infinity has none
// (converting it would be undefined), so it is rejected, naming the element.
static void check_finite(const char* fn, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    LLMK_CHECK_ARG(std::isfinite(x[i]), fn, "x[" + std::to_string(i) + "]", x[i], "must be finite to be quantized");
}

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  check_n("quantize_row_q8_0_ref", n);
  check_finite("quantize_row_q8_0_ref", x, n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16_bits(d);
    for (int j = 0; j < kQuantBlock; ++j) y[b].qs[j] = int8_t(std::round(x[j] * id));
  }
}

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n) {
  check_n("quantize_row_q4_0_ref", n);
  check_finite("quantize_row_q4_0_ref", x, n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0, max = 0;  // max: the signed value of largest magnitude
    for (int j = 0; j < kQuantBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16_bits(d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const int q0 = std::min(15, int(int8_t(x[j] * id + 8.5f)));
      const int q1 = std::min(15, int(int8_t(x[j + 16] * id + 8.5f)));
      y[b].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n) {
  check_n("quantize_row_q4_1_ref", n);
  check_finite("quantize_row_q4_1_ref", x, n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQuantBlock; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16_bits(d);
    y[b].m = f32_to_f16_bits(min);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const int q0 = std::min(15, int(int8_t((x[j] - min) * id + 0.5f)));
      const int q1 = std::min(15, int(int8_t((x[j + 16] - min) * id + 0.5f)));
      y[b].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q8_0_ref(const BlockQ8_0* x, float* y, int64_t n) {
  check_n("dequantize_row_q8_0_ref", n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = f16_bits_to_f32(x[b].d);
    for (int j = 0; j < kQuantBlock; ++j) y[j] = float(x[b].qs[j]) * d;
  }
}

void dequantize_row_q4_0_ref(const BlockQ4_0* x, float* y, int64_t n) {
  check_n("dequantize_row_q4_0_ref", n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = f16_bits_to_f32(x[b].d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      y[j] = float((x[b].qs[j] & 0x0f) - 8) * d;
      y[j + 16] = float((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1_ref(const BlockQ4_1* x, float* y, int64_t n) {
  check_n("dequantize_row_q4_1_ref", n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = f16_bits_to_f32(x[b].d), m = f16_bits_to_f32(x[b].m);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      y[j] = float(x[b].qs[j] & 0x0f) * d + m;
      y[j + 16] = float(x[b].qs[j] >> 4) * d + m;
    }
  }
}

}  // namespace llmk
