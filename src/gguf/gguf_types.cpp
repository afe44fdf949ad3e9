// GGUF type tables (ggml tensor types, metadata value types), Value builders and the typed
// metadata accessors of gguf::File. Accessor errors name the file, the key and both types.
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "gguf/gguf_internal.hpp"
#include "llmk/ggml_quants.hpp"
#include "llmk/gguf.hpp"

namespace llmk::gguf {

namespace {
struct TypeInfo {
  GgmlType type;
  const char* name;
  int64_t block_elems, block_bytes;
};
// Block sizes as ggml defines them (ggml-common.h); K-quants and IQ types use 256-blocks.
constexpr TypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},
    {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},
    {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},
    {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},
    {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},
    {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},
    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},
    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},
    {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},
    {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},
};
const TypeInfo* type_info(GgmlType t) {
  for (const TypeInfo& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}
const TypeInfo& checked_type_info(GgmlType t, const char* fn) {
  const TypeInfo* i = type_info(t);
  LLMK_CHECK_ARG(i != nullptr, fn, "type", uint32_t(t), "must be a ggml type id with a known block size");
  return *i;
}
}  // namespace

const char* ggml_type_name(GgmlType t) {
  const TypeInfo* i = type_info(t);
  return i ? i->name : "unknown";
}
bool ggml_type_known(GgmlType t) { return type_info(t) != nullptr; }
bool ggml_type_supported(GgmlType t) { return wtype_traits_for_ggml(uint32_t(t)) != nullptr; }

std::string supported_types_list() {
  std::string s;
  for (int i = 0; i < kWTypeCount; ++i) {
    std::string n = wtype_traits(WType(i)).name;
    for (char& c : n) c = char(std::toupper(static_cast<unsigned char>(c)));
    s += (i ? ", " : "") + n;
  }
  return s;
}
int64_t ggml_block_elems(GgmlType t) { return checked_type_info(t, "gguf::ggml_block_elems").block_elems; }
int64_t ggml_block_bytes(GgmlType t) { return checked_type_info(t, "gguf::ggml_block_bytes").block_bytes; }

const char* value_type_name(ValueType t) {
  static constexpr const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                          "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= uint32_t(ValueType::f64) ? names[uint32_t(t)] : "unknown";
}

// ---- Value builders ----
namespace {
template <class T>
constexpr ValueType value_type_of() {
  if constexpr (std::is_same_v<T, bool>) return ValueType::boolean;
  else if constexpr (std::is_same_v<T, uint8_t>) return ValueType::u8;
  else if constexpr (std::is_same_v<T, int8_t>) return ValueType::i8;
  else if constexpr (std::is_same_v<T, uint16_t>) return ValueType::u16;
  else if constexpr (std::is_same_v<T, int16_t>) return ValueType::i16;
  else if constexpr (std::is_same_v<T, uint32_t>) return ValueType::u32;
  else if constexpr (std::is_same_v<T, int32_t>) return ValueType::i32;
  else if constexpr (std::is_same_v<T, uint64_t>) return ValueType::u64;
  else if constexpr (std::is_same_v<T, int64_t>) return ValueType::i64;
  else if constexpr (std::is_same_v<T, float>) return ValueType::f32;
  else {
    static_assert(std::is_same_v<T, double>, "GGUF scalar types: bool, (u)int8..64, float, double");
    return ValueType::f64;
  }
}
}  // namespace

template <class T>
Value Value::of(T x) {
  Value v;
  v.type = value_type_of<T>();
  if constexpr (std::is_floating_point_v<T>) v.f = x;
  else if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) v.u = uint64_t(x);
  else v.i = int64_t(x);
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.type = ValueType::string;
  v.str = std::move(s);
  return v;
}

template <class T>
Value Value::array_of(std::span<const T> xs) {
  Value v;
  v.type = ValueType::array;
  v.elem = value_type_of<T>();
  v.count = xs.size();
  v.raw.resize(xs.size() * sizeof(T));
  if constexpr (std::is_same_v<T, bool>)
    for (size_t k = 0; k < xs.size(); ++k) v.raw[k] = xs[k] ? 1 : 0;
  else if (!xs.empty()) std::memcpy(v.raw.data(), xs.data(), v.raw.size());
  return v;
}

Value Value::strings(std::vector<std::string> xs) {
  Value v;
  v.type = ValueType::array;
  v.elem = ValueType::string;
  v.count = xs.size();
  v.strs = std::move(xs);
  return v;
}

Value Value::arrays(std::vector<Value> xs) {
  for (size_t k = 0; k < xs.size(); ++k)
    LLMK_CHECK_ARG(xs[k].type == ValueType::array, "gguf::Value::arrays", "items[" + std::to_string(k) + "]",
                   value_type_name(xs[k].type), "must be an array");
  Value v;
  v.type = ValueType::array;
  v.elem = ValueType::array;
  v.count = xs.size();
  v.items = std::move(xs);
  return v;
}

#define LLMK_GGUF_INSTANTIATE(T)  \
  template Value Value::of<T>(T); \
  template Value Value::array_of<T>(std::span<const T>);
LLMK_GGUF_INSTANTIATE(bool)
LLMK_GGUF_INSTANTIATE(uint8_t)
LLMK_GGUF_INSTANTIATE(int8_t)
LLMK_GGUF_INSTANTIATE(uint16_t)
LLMK_GGUF_INSTANTIATE(int16_t)
LLMK_GGUF_INSTANTIATE(uint32_t)
LLMK_GGUF_INSTANTIATE(int32_t)
LLMK_GGUF_INSTANTIATE(uint64_t)
LLMK_GGUF_INSTANTIATE(int64_t)
LLMK_GGUF_INSTANTIATE(float)
LLMK_GGUF_INSTANTIATE(double)
#undef LLMK_GGUF_INSTANTIATE

bool Value::is_integer() const {
  switch (type) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::u16:
    case ValueType::i16:
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::u64:
    case ValueType::i64: return true;
    default: return false;
  }
}
bool Value::is_float() const { return type == ValueType::f32 || type == ValueType::f64; }

// ---- typed accessors ----
namespace {
bool is_signed_type(ValueType t) {
  return t == ValueType::i8 || t == ValueType::i16 || t == ValueType::i32 || t == ValueType::i64;
}
// Reads element k of a packed scalar array as a signed 64-bit integer (false: out of range).
bool raw_int(const Value& v, uint64_t k, int64_t& out) {
  const uint64_t sz = value_size(v.elem);
  uint64_t bits = 0;
  std::memcpy(&bits, v.raw.data() + k * sz, sz);  // little-endian host
  if (is_signed_type(v.elem)) {
    const int shift = int(64 - 8 * sz);
    out = int64_t(bits << shift) >> shift;  // sign-extend
    return true;
  }
  if (bits > uint64_t(std::numeric_limits<int64_t>::max())) return false;
  out = int64_t(bits);
  return true;
}
}  // namespace

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  if (!v) throw FormatError("gguf: " + name_ + ": missing metadata key '" + std::string(key) + "'");
  return *v;
}

static FormatError wrong_type(const std::string& file, std::string_view key, const Value& v, const char* expected) {
  std::string got = value_type_name(v.type);
  if (v.type == ValueType::array) got += std::string(" of ") + value_type_name(v.elem);
  return FormatError("gguf: " + file + ": metadata key '" + std::string(key) + "' has type " + got + ", expected " +
                     expected);
}

std::string_view File::get_string(std::string_view key) const {
  const Value& v = get(key);
  if (v.type != ValueType::string) throw wrong_type(name_, key, v, "string");
  return v.str;
}

int64_t File::get_int(std::string_view key) const {
  const Value& v = get(key);
  if (!v.is_integer()) throw wrong_type(name_, key, v, "an integer");
  if (is_signed_type(v.type)) return v.i;
  if (v.u > uint64_t(std::numeric_limits<int64_t>::max()))
    throw FormatError("gguf: " + name_ + ": metadata key '" + std::string(key) + "' = " + std::to_string(v.u) +
                      " does not fit in int64");
  return int64_t(v.u);
}

uint32_t File::get_u32(std::string_view key) const {
  const Value& v = get(key);
  if (!v.is_integer()) throw wrong_type(name_, key, v, "u32");
  const int64_t x = get_int(key);
  if (x < 0 || x > int64_t(std::numeric_limits<uint32_t>::max()))
    throw FormatError("gguf: " + name_ + ": metadata key '" + std::string(key) + "' = " + std::to_string(x) +
                      " does not fit in u32");
  return uint32_t(x);
}

float File::get_f32(std::string_view key) const {
  const Value& v = get(key);
  if (!v.is_float()) throw wrong_type(name_, key, v, "f32");
  return float(v.f);
}

bool File::get_bool(std::string_view key) const {
  const Value& v = get(key);
  if (v.type != ValueType::boolean) throw wrong_type(name_, key, v, "bool");
  return v.u != 0;
}

const std::vector<std::string>& File::get_strings(std::string_view key) const {
  const Value& v = get(key);
  if (v.type != ValueType::array || v.elem != ValueType::string) throw wrong_type(name_, key, v, "array of string");
  return v.strs;
}

std::vector<int64_t> File::get_ints(std::string_view key) const {
  const Value& v = get(key);
  Value elem;
  elem.type = v.elem;
  if (v.type != ValueType::array || !elem.is_integer()) throw wrong_type(name_, key, v, "array of integers");
  std::vector<int64_t> out(v.count);
  for (uint64_t k = 0; k < v.count; ++k)
    if (!raw_int(v, k, out[k]))
      throw FormatError("gguf: " + name_ + ": metadata key '" + std::string(key) + "'[" + std::to_string(k) +
                        "] does not fit in int64");
  return out;
}

std::vector<float> File::get_f32s(std::string_view key) const {
  const Value& v = get(key);
  if (v.type != ValueType::array || v.elem != ValueType::f32) throw wrong_type(name_, key, v, "array of f32");
  std::vector<float> out(v.count);
  if (v.count) std::memcpy(out.data(), v.raw.data(), v.count * 4);
  return out;
}

std::string File::get_string_or(std::string_view key, std::string_view fallback) const {
  return has(key) ? std::string(get_string(key)) : std::string(fallback);
}
int64_t File::get_int_or(std::string_view key, int64_t fallback) const { return has(key) ? get_int(key) : fallback; }
uint32_t File::get_u32_or(std::string_view key, uint32_t fallback) const { return has(key) ? get_u32(key) : fallback; }
float File::get_f32_or(std::string_view key, float fallback) const { return has(key) ? get_f32(key) : fallback; }
bool File::get_bool_or(std::string_view key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }

}  // namespace llmk::gguf
