// Reference quantizers and dequantizers of the KV storage types (see
// llmk/kv_quant.hpp). Plain loops: these are the oracle of the fused kernels.
#include "llmk/kv_quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "llmk/dtype.hpp"
#include "llmk/error.hpp"

namespace llmk {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::bf16: return "bf16";
    case KvType::int8: return "int8";
    case KvType::int4: return "int4";
  }
  return "?";
}

KvType parse_kv_type(std::string_view name, std::string_view arg) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4})
    if (name == kv_type_name(t)) return t;
  throw_invalid_argument("parse_kv_type", arg, std::string(name), "must be f32, f16, bf16, int8 or int4");
}

bool kv_type_quantized(KvType t) { return t == KvType::int8 || t == KvType::int4; }

int64_t kv_type_align(KvType t) { return t == KvType::f32 ? 4 : 2; }

int64_t kv_row_bytes(KvType t, int64_t n) {
  const int64_t groups = (n + kKvGroup - 1) / kKvGroup;
  switch (t) {
    case KvType::f32: return 4 * n;
    case KvType::f16:
    case KvType::bf16: return 2 * n;
    case KvType::int8: return groups * int64_t(sizeof(BlockQ8));
    case KvType::int4: return groups * int64_t(sizeof(BlockQ4));
  }
  return 0;
}

namespace {
constexpr uint16_t kF16QuietNan = 0x7e00;

// A group with a NaN or an infinity: NaN scale (and min), quants 0 (llmk/kv_quant.hpp).
bool all_finite(const float* x, int n) {
  bool ok = true;
  for (int j = 0; j < n; ++j) ok &= std::isfinite(x[j]);
  return ok;
}

void quantize_q8(const float* x, int n, BlockQ8* b) {
  if (!all_finite(x, n)) {
    b->d = kF16QuietNan;
    std::memset(b->qs, 0, sizeof b->qs);
    return;
  }
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  b->d = f32_to_f16_bits(amax / 127.0f);
  const float d = f16_bits_to_f32(b->d);
  const float id = d > 0 ? 1.0f / d : 0.0f;
  std::memset(b->qs, 0, sizeof b->qs);
  for (int j = 0; j < n; ++j) b->qs[j] = int8_t(std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f));
}

void quantize_q4(const float* x, int n, BlockQ4* b) {
  if (!all_finite(x, n)) {
    b->d = b->m = kF16QuietNan;
    std::memset(b->qs, 0, sizeof b->qs);
    return;
  }
  float lo = x[0], hi = x[0];
  for (int j = 1; j < n; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  // -0 + 0 = +0: which zero a min or max keeps among equal zeros depends on
  // the order it compares them (the device reduces in a tree); both store +0.
  lo += 0.0f, hi += 0.0f;
  b->d = f32_to_f16_bits((hi - lo) / 15.0f);
  b->m = f32_to_f16_bits(lo);
  const float d = f16_bits_to_f32(b->d), m = f16_bits_to_f32(b->m);
  const float id = d > 0 ? 1.0f / d : 0.0f;
  std::memset(b->qs, 0, sizeof b->qs);
  for (int j = 0; j < n; ++j) {
    const int q = int(std::clamp(std::nearbyint((x[j] - m) * id), 0.0f, 15.0f));
    b->qs[j % 16] |= uint8_t(j < 16 ? q : q << 4);
  }
}
}  // namespace

void kv_quantize_row(KvType t, const float* x, int64_t n, void* dst) {
  switch (t) {
    case KvType::f32: std::memcpy(dst, x, size_t(n) * 4); return;
    case KvType::f16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16_bits(x[i]);
      return;
    case KvType::bf16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16_bits(x[i]);
      return;
    case KvType::int8:
      for (int64_t g = 0; g * kKvGroup < n; ++g)
        quantize_q8(x + g * kKvGroup, int(std::min<int64_t>(kKvGroup, n - g * kKvGroup)), static_cast<BlockQ8*>(dst) + g);
      return;
    case KvType::int4:
      for (int64_t g = 0; g * kKvGroup < n; ++g)
        quantize_q4(x + g * kKvGroup, int(std::min<int64_t>(kKvGroup, n - g * kKvGroup)), static_cast<BlockQ4*>(dst) + g);
      return;
  }
}

void kv_dequantize_row(KvType t, const void* src, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = i / kKvGroup, j = i % kKvGroup;
    switch (t) {
      case KvType::f32: y[i] = static_cast<const float*>(src)[i]; break;
      case KvType::f16: y[i] = f16_bits_to_f32(static_cast<const uint16_t*>(src)[i]); break;
      case KvType::bf16: y[i] = bf16_bits_to_f32(static_cast<const uint16_t*>(src)[i]); break;
      case KvType::int8: {
        const BlockQ8& b = static_cast<const BlockQ8*>(src)[g];
        y[i] = float(b.qs[j]) * f16_bits_to_f32(b.d);
        break;
      }
      case KvType::int4: {
        const BlockQ4& b = static_cast<const BlockQ4*>(src)[g];
        const int q = j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4;
        y[i] = float(q) * f16_bits_to_f32(b.d) + f16_bits_to_f32(b.m);
        break;
      }
    }
  }
}

double kv_error_bound(KvType t, const float* x, int64_t n, const void* row, int64_t i) {
  const double ax = std::fabs(double(x[i]));
  if (t == KvType::f32) return 0;
  if (t == KvType::f16) return ax * 0x1p-11;
  if (t == KvType::bf16) return ax * 0x1p-8;
  const int64_t g = i / kKvGroup, g0 = g * kKvGroup, g1 = std::min(n, g0 + kKvGroup);
  double amax = 0;
  for (int64_t j = g0; j < g1; ++j) amax = std::max(amax, std::fabs(double(x[j])));
  // f32 arithmetic in the quantizer (x*id rounding, q*d + m) adds < 2^-20 * amax.
  if (t == KvType::int8)
    return 0.5 * f16_bits_to_f32(static_cast<const BlockQ8*>(row)[g].d) + 0x1p-11 * amax + 0x1p-20 * amax;
  return 0.5 * f16_bits_to_f32(static_cast<const BlockQ4*>(row)[g].d) + 3 * 0x1p-11 * amax + 0x1p-20 * amax;
}

}  // namespace llmk
