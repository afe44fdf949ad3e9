// Reference quantizers and dequantizers of the KV storage types (see
// llmk/kv_quant.hpp). Plain loops: these are the oracle of the fused kernels.
#include "llmk/kv_quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "core/enum_table.hpp"
#include "llmk/dtype.hpp"
#include "llmk/error.hpp"

namespace llmk {

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

// Rows of the float types: element-wise conversion (scalar, round to nearest even).
template <class T>
void quantize_float(const float* x, int64_t n, void* dst) {
  for (int64_t i = 0; i < n; ++i) static_cast<T*>(dst)[i] = from_f32<T>(x[i]);
}
template <class T>
void dequantize_float(const void* src, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = to_f32(static_cast<const T*>(src)[i]);
}

// Rows of the block types: one block per group of kKvGroup values, the last one partial.
template <class B, void (*Q)(const float*, int, B*)>
void quantize_blocks(const float* x, int64_t n, void* dst) {
  for (int64_t g = 0; g * kKvGroup < n; ++g)
    Q(x + g * kKvGroup, int(std::min<int64_t>(kKvGroup, n - g * kKvGroup)), static_cast<B*>(dst) + g);
}

void dequantize_q8(const void* src, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const BlockQ8& b = static_cast<const BlockQ8*>(src)[i / kKvGroup];
    y[i] = float(b.qs[i % kKvGroup]) * f16_bits_to_f32(b.d);
  }
}

void dequantize_q4(const void* src, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const BlockQ4& b = static_cast<const BlockQ4*>(src)[i / kKvGroup];
    const int64_t j = i % kKvGroup;
    const int q = j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4;
    y[i] = float(q) * f16_bits_to_f32(b.d) + f16_bits_to_f32(b.m);
  }
}

// Rows in KvType order.
constexpr KvTypeTraits kTraits[] = {
    {KvType::f32, "f32", "f32", 1, 4, 4, quantize_float<float>, dequantize_float<float>},
    {KvType::f16, "f16", "f16", 1, 2, 2, quantize_float<f16>, dequantize_float<f16>},
    {KvType::bf16, "bf16", "bf16", 1, 2, 2, quantize_float<bf16>, dequantize_float<bf16>},
    {KvType::int8, "int8", "q8", kKvGroup, int(sizeof(BlockQ8)), 2, quantize_blocks<BlockQ8, quantize_q8>,
     dequantize_q8},
    {KvType::int4, "int4", "q4", kKvGroup, int(sizeof(BlockQ4)), 2, quantize_blocks<BlockQ4, quantize_q4>,
     dequantize_q4},
};
static_assert(std::size(kTraits) == size_t(kKvTypeCount), "one traits row per KvType");
static_assert(rows_follow_enum(kTraits), "kTraits rows must follow the KvType enum");
}  // namespace

const KvTypeTraits& kv_type_traits(KvType t) {
  LLMK_CHECK_ARG(int(t) < kKvTypeCount, "kv_type_traits", "t", int(t), "must be a KvType enumerator");
  return kTraits[int(t)];
}

const KvTypeTraits* kv_type_traits_named(std::string_view name) {
  for (const KvTypeTraits& r : kTraits)
    if (name == r.name || name == r.cli_name) return &r;
  return nullptr;
}

std::string kv_type_choices() {
  std::string cli, other;
  for (const KvTypeTraits& r : kTraits) {
    cli.append(cli.empty() ? "" : "|").append(r.cli_name);
    if (std::string_view(r.name) != r.cli_name) other.append(other.empty() ? "" : "|").append(r.name);
  }
  return other.empty() ? cli : cli + " (or " + other + ")";
}

const char* kv_type_name(KvType t) { return kv_type_traits(t).name; }

KvType parse_kv_type(std::string_view name, std::string_view arg) {
  const KvTypeTraits* r = kv_type_traits_named(name);
  LLMK_CHECK_ARG(r != nullptr, "parse_kv_type", arg, name, "must be " + kv_type_choices());
  return r->type;
}

bool kv_type_quantized(KvType t) { return kv_type_traits(t).quantized(); }

int64_t kv_type_align(KvType t) { return kv_type_traits(t).align; }

int64_t kv_row_bytes(KvType t, int64_t n) {
  const KvTypeTraits& r = kv_type_traits(t);
  return (n / r.group_values + (n % r.group_values != 0)) * r.group_bytes;
}

void kv_quantize_row(KvType t, const float* x, int64_t n, void* dst) { kv_type_traits(t).quantize(x, n, dst); }

void kv_dequantize_row(KvType t, const void* src, int64_t n, float* y) { kv_type_traits(t).dequantize(src, n, y); }

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
