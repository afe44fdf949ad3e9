// The storage-type traits table and the scalar reference quantizers and dequantizers of
// ggml's blocks (include/llmk/ggml_quants.hpp). The 32-value quantizers follow ggml's *_ref
// rounding step for step (reciprocal of the f32 scale, truncation after +0.5/+8.5/+16.5,
// fp16 round-to-nearest-even), so a row quantized here is byte-identical to the one
// llama.cpp writes. This file is compiled without floating-point contraction
// (src/gguf/CMakeLists.txt): every product and sum rounds to f32 on its own, as numpy's do
// in the gguf package the dequantizers are checked against bit for bit.
#include "llmk/ggml_quants.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "core/enum_table.hpp"
#include "llmk/dtype.hpp"
#include "llmk/error.hpp"

namespace llmk {

static void check_n(const char* fn, int64_t n, int block = kQuantBlock) {
  LLMK_CHECK_ARG(n >= 0 && n % block == 0, fn, "n", n, "must be a non-negative multiple of " + std::to_string(block));
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

// ---- Q5_0 / Q5_1 ----

void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n) {
  check_n("quantize_row_q5_0_ref", n);
  check_finite("quantize_row_q5_0_ref", x, n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQuantBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -16.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16_bits(d);
    uint32_t qh = 0;
    // x * id + 16.5 in double, as the gguf package does (ggml's C gets it from a fused multiply-add)
    const auto code = [&](float v) { return std::min(31, int(std::trunc(double(v) * double(id) + 16.5))); };
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const int q0 = code(x[j]), q1 = code(x[j + 16]);
      y[b].qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= uint32_t(q0 >> 4) << j | uint32_t(q1 >> 4) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n) {
  check_n("quantize_row_q5_1_ref", n);
  check_finite("quantize_row_q5_1_ref", x, n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQuantBlock; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16_bits(d);
    y[b].m = f32_to_f16_bits(min);
    uint32_t qh = 0;
    const auto code = [&](float v) { return std::min(31, int((v - min) * id + 0.5f)); };
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const int q0 = code(x[j]), q1 = code(x[j + 16]);
      y[b].qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= uint32_t(q0 >> 4) << j | uint32_t(q1 >> 4) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

void dequantize_row_q5_0_ref(const BlockQ5_0* x, float* y, int64_t n) {
  check_n("dequantize_row_q5_0_ref", n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = f16_bits_to_f32(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      y[j] = d * float(int((x[b].qs[j] & 0x0f) | ((qh >> j) & 1) << 4) - 16);
      y[j + 16] = d * float(int((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16);
    }
  }
}

void dequantize_row_q5_1_ref(const BlockQ5_1* x, float* y, int64_t n) {
  check_n("dequantize_row_q5_1_ref", n);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, y += kQuantBlock) {
    const float d = f16_bits_to_f32(x[b].d), m = f16_bits_to_f32(x[b].m);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      y[j] = d * float((x[b].qs[j] & 0x0f) | ((qh >> j) & 1) << 4) + m;
      y[j + 16] = d * float((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) + m;
    }
  }
}

// ---- K-quants ----
namespace {

// Sub-block scales (and mins) quantized to `levels` steps of the largest: the super-block's
// f16 scale and the integer steps, each at most `levels`.
float quantize_scales(const float* v, int count, int levels, int* q) {
  float vmax = 0;
  for (int s = 0; s < count; ++s) vmax = std::max(vmax, v[s]);
  const float d = vmax / float(levels), d16 = f16_bits_to_f32(f32_to_f16_bits(d));
  for (int s = 0; s < count; ++s) q[s] = d16 > 0 ? std::min(levels, int(std::nearbyint(v[s] / d16))) : 0;
  return d;
}
// round((x + off) / step) clamped to [lo, hi]; 0 when step is 0.
int code_of(float x, float off, float step, int lo, int hi) {
  if (!(step > 0)) return std::clamp(0, lo, hi);
  return std::clamp(int(std::nearbyint((x + off) / step)), lo, hi);
}

}  // namespace

void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t n) {
  check_n("quantize_row_q2_k_ref", n, kSuperBlock);
  check_finite("quantize_row_q2_k_ref", x, n);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float sc[16], mn[16];
    for (int s = 0; s < 16; ++s) {
      float lo = 0, hi = -FLT_MAX;
      for (int l = 0; l < 16; ++l) lo = std::min(lo, x[16 * s + l]), hi = std::max(hi, x[16 * s + l]);
      sc[s] = (hi - lo) / 3.0f;
      mn[s] = -lo;
    }
    int isc[16], imn[16];
    y[b].d = f32_to_f16_bits(quantize_scales(sc, 16, 15, isc));
    y[b].dmin = f32_to_f16_bits(quantize_scales(mn, 16, 15, imn));
    const float d = f16_bits_to_f32(y[b].d), dmin = f16_bits_to_f32(y[b].dmin);
    std::memset(y[b].qs, 0, sizeof y[b].qs);
    for (int s = 0; s < 16; ++s) y[b].scales[s] = uint8_t(isc[s] | imn[s] << 4);
    for (int i = 0; i < kSuperBlock; ++i) {
      const int s = i / 16, h = i / 128, j = (i / 32) % 4, l = i % 32;
      const int q = code_of(x[i], dmin * float(imn[s]), d * float(isc[s]), 0, 3);
      y[b].qs[32 * h + l] = uint8_t(y[b].qs[32 * h + l] | q << (2 * j));
    }
  }
}

void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t n) {
  check_n("quantize_row_q3_k_ref", n, kSuperBlock);
  check_finite("quantize_row_q3_k_ref", x, n);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float sc[16];
    for (int s = 0; s < 16; ++s) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * s + l]));
      sc[s] = amax / 4.0f;
    }
    int isc[16];
    y[b].d = f32_to_f16_bits(quantize_scales(sc, 16, 31, isc));
    const float d = f16_bits_to_f32(y[b].d);
    std::memset(y[b].hmask, 0, sizeof y[b].hmask);
    std::memset(y[b].qs, 0, sizeof y[b].qs);
    std::memset(y[b].scales, 0, sizeof y[b].scales);
    for (int s = 0; s < 16; ++s) {
      const int v = isc[s] + 32;  // stored biased by 32
      y[b].scales[s % 8] = uint8_t(y[b].scales[s % 8] | (v & 0x0f) << (s < 8 ? 0 : 4));
      y[b].scales[8 + s % 4] = uint8_t(y[b].scales[8 + s % 4] | (v >> 4) << (2 * (s / 4)));
    }
    for (int i = 0; i < kSuperBlock; ++i) {
      const int s = i / 16, h = i / 128, j = (i / 32) % 4, l = i % 32;
      const int u = code_of(x[i], 0.0f, d * float(isc[s]), -4, 3) + 4;  // value = low - 4 * !hbit
      y[b].qs[32 * h + l] = uint8_t(y[b].qs[32 * h + l] | (u & 3) << (2 * j));
      y[b].hmask[l] = uint8_t(y[b].hmask[l] | (u >> 2) << (4 * h + j));
    }
  }
}

namespace {
// Q4_K / Q5_K: 8 sub-blocks of 32, codes 0..nmax; the codes go to q[256].
void quantize_k4(const float* x, uint16_t& dbits, uint16_t& dminbits, uint8_t* scales, int nmax, int* q) {
  float sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    float lo = 0, hi = -FLT_MAX;
    for (int l = 0; l < 32; ++l) lo = std::min(lo, x[32 * s + l]), hi = std::max(hi, x[32 * s + l]);
    sc[s] = (hi - lo) / float(nmax);
    mn[s] = -lo;
  }
  int isc[8], imn[8];
  dbits = f32_to_f16_bits(quantize_scales(sc, 8, 63, isc));
  dminbits = f32_to_f16_bits(quantize_scales(mn, 8, 63, imn));
  const float d = f16_bits_to_f32(dbits), dmin = f16_bits_to_f32(dminbits);
  std::memset(scales, 0, 12);
  for (int s = 0; s < 8; ++s) {
    if (s < 4) {
      scales[s] = uint8_t(isc[s]);
      scales[s + 4] = uint8_t(imn[s]);
    } else {
      scales[s + 4] = uint8_t((isc[s] & 0x0f) | (imn[s] & 0x0f) << 4);
      scales[s - 4] = uint8_t(scales[s - 4] | (isc[s] >> 4) << 6);
      scales[s] = uint8_t(scales[s] | (imn[s] >> 4) << 6);
    }
  }
  for (int i = 0; i < kSuperBlock; ++i)
    q[i] = code_of(x[i], dmin * float(imn[i / 32]), d * float(isc[i / 32]), 0, nmax);
}
}  // namespace

void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t n) {
  check_n("quantize_row_q4_k_ref", n, kSuperBlock);
  check_finite("quantize_row_q4_k_ref", x, n);
  int q[kSuperBlock];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    quantize_k4(x, y[b].d, y[b].dmin, y[b].scales, 15, q);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) y[b].qs[32 * c + l] = uint8_t(q[64 * c + l] | q[64 * c + 32 + l] << 4);
  }
}

void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t n) {
  check_n("quantize_row_q5_k_ref", n, kSuperBlock);
  check_finite("quantize_row_q5_k_ref", x, n);
  int q[kSuperBlock];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    quantize_k4(x, y[b].d, y[b].dmin, y[b].scales, 31, q);
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) y[b].qs[32 * c + l] = uint8_t((q[64 * c + l] & 15) | (q[64 * c + 32 + l] & 15) << 4);
    for (int i = 0; i < kSuperBlock; ++i) y[b].qh[i % 32] = uint8_t(y[b].qh[i % 32] | (q[i] >> 4) << (i / 32));
  }
}

void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t n) {
  check_n("quantize_row_q6_k_ref", n, kSuperBlock);
  check_finite("quantize_row_q6_k_ref", x, n);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float sc[16];
    for (int s = 0; s < 16; ++s) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * s + l]));
      sc[s] = amax / 31.0f;
    }
    int isc[16];
    y[b].d = f32_to_f16_bits(quantize_scales(sc, 16, 127, isc));
    const float d = f16_bits_to_f32(y[b].d);
    for (int s = 0; s < 16; ++s) y[b].scales[s] = int8_t(isc[s]);
    std::memset(y[b].ql, 0, sizeof y[b].ql);
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int i = 0; i < kSuperBlock; ++i) {
      const int h = i / 128, j = (i / 32) % 4, l = i % 32;
      const int u = code_of(x[i], 0.0f, d * float(isc[i / 16]), -32, 31) + 32;
      uint8_t& lo = y[b].ql[64 * h + 32 * (j & 1) + l];
      lo = uint8_t(lo | (u & 15) << (4 * (j >> 1)));
      y[b].qh[32 * h + l] = uint8_t(y[b].qh[32 * h + l] | (u >> 4) << (2 * j));
    }
  }
}

void dequantize_row_q2_k_ref(const BlockQ2_K* x, float* y, int64_t n) {
  check_n("dequantize_row_q2_k_ref", n, kSuperBlock);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = f16_bits_to_f32(x[b].d), dmin = f16_bits_to_f32(x[b].dmin);
    for (int i = 0; i < kSuperBlock; ++i) {
      const int s = i / 16, h = i / 128, j = (i / 32) % 4, l = i % 32;
      const float dl = d * float(x[b].scales[s] & 0x0f), ml = dmin * float(x[b].scales[s] >> 4);
      y[i] = dl * float((x[b].qs[32 * h + l] >> (2 * j)) & 3) - ml;
    }
  }
}

void dequantize_row_q3_k_ref(const BlockQ3_K* x, float* y, int64_t n) {
  check_n("dequantize_row_q3_k_ref", n, kSuperBlock);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = f16_bits_to_f32(x[b].d);
    for (int i = 0; i < kSuperBlock; ++i) {
      const int h = i / 128, j = (i / 32) % 4, l = i % 32;
      const int q = ((x[b].qs[32 * h + l] >> (2 * j)) & 3) - (((x[b].hmask[l] >> (4 * h + j)) & 1) ? 0 : 4);
      y[i] = (d * float(q3k_scale(x[b].scales, i / 16))) * float(q);
    }
  }
}

void dequantize_row_q4_k_ref(const BlockQ4_K* x, float* y, int64_t n) {
  check_n("dequantize_row_q4_k_ref", n, kSuperBlock);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = f16_bits_to_f32(x[b].d), dmin = f16_bits_to_f32(x[b].dmin);
    for (int i = 0; i < kSuperBlock; ++i) {
      int sc, m;
      k4_scale_min(x[b].scales, i / 32, sc, m);
      const int q = (x[b].qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 15;
      y[i] = (d * float(sc)) * float(q) - dmin * float(m);
    }
  }
}

void dequantize_row_q5_k_ref(const BlockQ5_K* x, float* y, int64_t n) {
  check_n("dequantize_row_q5_k_ref", n, kSuperBlock);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = f16_bits_to_f32(x[b].d), dmin = f16_bits_to_f32(x[b].dmin);
    for (int i = 0; i < kSuperBlock; ++i) {
      int sc, m;
      k4_scale_min(x[b].scales, i / 32, sc, m);
      const int q = ((x[b].qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 15) |
                    ((x[b].qh[i % 32] >> (i / 32)) & 1) << 4;
      y[i] = (d * float(sc)) * float(q) - dmin * float(m);
    }
  }
}

void dequantize_row_q6_k_ref(const BlockQ6_K* x, float* y, int64_t n) {
  check_n("dequantize_row_q6_k_ref", n, kSuperBlock);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = f16_bits_to_f32(x[b].d);
    for (int i = 0; i < kSuperBlock; ++i) {
      const int h = i / 128, j = (i / 32) % 4, l = i % 32;
      const int lo = (x[b].ql[64 * h + 32 * (j & 1) + l] >> (4 * (j >> 1))) & 15;
      const int hi = (x[b].qh[32 * h + l] >> (2 * j)) & 3;
      y[i] = (d * float(x[b].scales[i / 16])) * float((lo | hi << 4) - 32);
    }
  }
}

// ---- the traits table ----
namespace {

template <class B, void (*F)(const B*, float*, int64_t)>
void to_float(const void* x, float* y, int64_t n) {
  F(static_cast<const B*>(x), y, n);
}
template <class B, void (*F)(const float*, B*, int64_t)>
void from_float(const float* y, void* x, int64_t n) {
  F(y, static_cast<B*>(x), n);
}
template <DType T>
void float_to_f32(const void* x, float* y, int64_t n) {
  convert(x, T, y, DType::f32, size_t(n));
}
template <DType T>
void f32_to_float(const float* y, void* x, int64_t n) {
  convert(y, DType::f32, x, T, size_t(n));
}

#define LLMK_QUANT_ROW(t, name, ggml, elems, B, suffix)                                      \
  {                                                                                          \
    WType::t, name, ggml, elems, int(sizeof(B)), to_float<B, dequantize_row_##suffix##_ref>, \
        from_float<B, quantize_row_##suffix##_ref>                                           \
  }
// Rows in WType order; ggml ids from ggml.h.
constexpr WTypeTraits kTraits[] = {
    {WType::f32, "f32", 0, 1, 4, float_to_f32<DType::f32>, f32_to_float<DType::f32>},
    {WType::f16, "f16", 1, 1, 2, float_to_f32<DType::f16>, f32_to_float<DType::f16>},
    {WType::bf16, "bf16", 30, 1, 2, float_to_f32<DType::bf16>, f32_to_float<DType::bf16>},
    LLMK_QUANT_ROW(q8_0, "q8_0", 8, 32, BlockQ8_0, q8_0),
    LLMK_QUANT_ROW(q4_0, "q4_0", 2, 32, BlockQ4_0, q4_0),
    LLMK_QUANT_ROW(q4_1, "q4_1", 3, 32, BlockQ4_1, q4_1),
    LLMK_QUANT_ROW(q5_0, "q5_0", 6, 32, BlockQ5_0, q5_0),
    LLMK_QUANT_ROW(q5_1, "q5_1", 7, 32, BlockQ5_1, q5_1),
    LLMK_QUANT_ROW(q2_k, "q2_k", 10, 256, BlockQ2_K, q2_k),
    LLMK_QUANT_ROW(q3_k, "q3_k", 11, 256, BlockQ3_K, q3_k),
    LLMK_QUANT_ROW(q4_k, "q4_k", 12, 256, BlockQ4_K, q4_k),
    LLMK_QUANT_ROW(q5_k, "q5_k", 13, 256, BlockQ5_K, q5_k),
    LLMK_QUANT_ROW(q6_k, "q6_k", 14, 256, BlockQ6_K, q6_k),
};
#undef LLMK_QUANT_ROW
static_assert(std::size(kTraits) == size_t(kWTypeCount), "one traits row per WType");
static_assert(rows_follow_enum(kTraits), "kTraits rows must follow the WType enum");

}  // namespace

const WTypeTraits& wtype_traits(WType t) {
  LLMK_CHECK_ARG(int(t) < kWTypeCount, "wtype_traits", "t", int(t), "must be a WType enumerator");
  return kTraits[int(t)];
}
const WTypeTraits* wtype_traits_for_ggml(uint32_t ggml_type) {
  for (const WTypeTraits& r : kTraits)
    if (r.ggml_type == ggml_type) return &r;
  return nullptr;
}
const WTypeTraits* wtype_traits_named(std::string_view name) {
  for (const WTypeTraits& r : kTraits)
    if (name == r.name) return &r;
  return nullptr;
}
std::string wtype_choices() {
  std::string s;
  for (const WTypeTraits& r : kTraits) s.append(s.empty() ? "" : "|").append(r.name);
  return s;
}

}  // namespace llmk
