// DType names, sizes and bulk conversion (scalar; AVX2 in dtype_avx2.cpp).
#include "llmk/dtype.hpp"

#include <iterator>
#include <string>

#include "core/dispatch.hpp"
#include "core/enum_table.hpp"
#include "llmk/error.hpp"

namespace llmk {

namespace detail {
bool convert_avx2(const void* src, DType st, void* dst, DType dt, size_t n);  // dtype_avx2.cpp
}

namespace {
struct DTypeRow {
  DType type;
  const char* name;
  size_t size;
};
// Rows in DType order.
constexpr DTypeRow kDTypes[] = {{DType::f32, "f32", 4}, {DType::f16, "f16", 2}, {DType::bf16, "bf16", 2},
                                {DType::i32, "i32", 4}, {DType::i8, "i8", 1},   {DType::u8, "u8", 1}};
static_assert(rows_follow_enum(kDTypes), "kDTypes rows must follow the DType enum");
const DTypeRow* row(DType t) { return size_t(t) < std::size(kDTypes) ? &kDTypes[size_t(t)] : nullptr; }
}  // namespace

size_t dtype_size(DType t) { return row(t) ? row(t)->size : 0; }

const char* dtype_name(DType t) { return row(t) ? row(t)->name : "?"; }

DType parse_dtype(std::string_view name, std::string_view arg) {
  std::string names;
  for (const DTypeRow& r : kDTypes) {
    if (name == r.name) return r.type;
    names += (names.empty() ? "" : ", ") + std::string(r.name);
  }
  throw_invalid_argument("parse_dtype", arg, std::string(name), "must be one of " + names);
}

namespace {
template <class S, class D>
void convert_scalar(const S* s, D* d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = from_f32<D>(to_f32(s[i]));
}
template <class S>
void convert_from(const S* s, void* dst, DType dt, size_t n) {
  switch (dt) {
    case DType::f32: convert_scalar(s, static_cast<float*>(dst), n); return;
    case DType::f16: convert_scalar(s, static_cast<f16*>(dst), n); return;
    case DType::bf16: convert_scalar(s, static_cast<bf16*>(dst), n); return;
    default: throw_invalid_argument("convert", "dst_type", dtype_name(dt), "must be f32, f16 or bf16");
  }
}
// A vector path for some (src, dst) pairs, returning false on the others; none
// on scalar: the loops above take what it leaves.
using VectorFn = bool (*)(const void* src, DType st, void* dst, DType dt, size_t n);
constexpr simd::Paths<VectorFn> kVector{.scalar = nullptr, .avx2 = detail::convert_avx2};
}  // namespace

void convert(const void* src, DType st, void* dst, DType dt, size_t n) {
  const VectorFn vector = kVector.pick();
  if (vector && vector(src, st, dst, dt, n)) return;
  switch (st) {
    case DType::f32: convert_from(static_cast<const float*>(src), dst, dt, n); return;
    case DType::f16: convert_from(static_cast<const f16*>(src), dst, dt, n); return;
    case DType::bf16: convert_from(static_cast<const bf16*>(src), dst, dt, n); return;
    default: throw_invalid_argument("convert", "src_type", dtype_name(st), "must be f32, f16 or bf16");
  }
}

}  // namespace llmk
