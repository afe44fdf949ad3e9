// GGUF writer: serializes metadata and tensors (tests, fuzz corpus, small random models).
// Tensors are written in insertion order, each padded to the alignment; the result is what
// ggml's gguf writer produces for the same content.
#include <algorithm>
#include <cstring>
#include <fstream>

#include "gguf/gguf_internal.hpp"
#include "llmk/gguf.hpp"

namespace llmk::gguf {

namespace {
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
void put_value(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type) {
    case ValueType::u8:
    case ValueType::boolean: put<uint8_t>(out, uint8_t(v.u)); break;
    case ValueType::i8: put<int8_t>(out, int8_t(v.i)); break;
    case ValueType::u16: put<uint16_t>(out, uint16_t(v.u)); break;
    case ValueType::i16: put<int16_t>(out, int16_t(v.i)); break;
    case ValueType::u32: put<uint32_t>(out, uint32_t(v.u)); break;
    case ValueType::i32: put<int32_t>(out, int32_t(v.i)); break;
    case ValueType::u64: put<uint64_t>(out, v.u); break;
    case ValueType::i64: put<int64_t>(out, v.i); break;
    case ValueType::f32: put<float>(out, float(v.f)); break;
    case ValueType::f64: put<double>(out, v.f); break;
    case ValueType::string: put_string(out, v.str); break;
    case ValueType::array:
      put<uint32_t>(out, uint32_t(v.elem));
      put<uint64_t>(out, v.count);
      if (v.elem == ValueType::string)
        for (const std::string& s : v.strs) put_string(out, s);
      else if (v.elem == ValueType::array)
        for (const Value& item : v.items) put_value(out, item);
      else out.insert(out.end(), v.raw.begin(), v.raw.end());
      break;
  }
}
}  // namespace

void Writer::set(std::string key, Value v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(std::move(key), std::move(v));
}

int64_t Writer::checked_bytes(const char* fn, GgmlType type, const std::vector<int64_t>& ne) const {
  LLMK_CHECK_ARG(ggml_type_known(type), fn, "type", uint32_t(type), "must be a known ggml type");
  LLMK_CHECK_ARG(ne.size() >= 1 && ne.size() <= 4, fn, "ne.size()", ne.size(), "must be 1..4");
  int64_t n = 1;
  for (int64_t d : ne) {
    LLMK_CHECK_ARG(d >= 0, fn, "ne", d, "dims must be >= 0");
    n *= d;
  }
  LLMK_CHECK_ARG(ne[0] % ggml_block_elems(type) == 0, fn, "ne[0]", ne[0], "must be a multiple of the type's block");
  return n / ggml_block_elems(type) * ggml_block_bytes(type);
}

void Writer::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, std::span<const uint8_t> data) {
  const char* fn = "gguf::Writer::add_tensor";
  const int64_t bytes = checked_bytes(fn, type, ne);
  LLMK_CHECK_ARG(int64_t(data.size()) == bytes, fn, "data.size()", data.size(),
                 "must equal the tensor's byte size " + std::to_string(bytes));
  tensors_.push_back(
      {std::move(name), type, std::move(ne), std::vector<uint8_t>(data.begin(), data.end()), {}, uint64_t(bytes)});
}

void Writer::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, Fill fill) {
  const char* fn = "gguf::Writer::add_tensor";
  const int64_t bytes = checked_bytes(fn, type, ne);
  LLMK_CHECK_ARG(bool(fill), fn, "fill", "empty", "must be a function");
  tensors_.push_back({std::move(name), type, std::move(ne), {}, std::move(fill), uint64_t(bytes)});
}

uint64_t Writer::alignment() const {
  for (const auto& [k, v] : kv_)
    if (k == "general.alignment" && v.type == ValueType::u32 && v.u != 0) return v.u;
  return 32;
}

std::vector<uint8_t> Writer::header() const {
  const uint64_t align = alignment();
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, version_);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_string(out, k);
    put<uint32_t>(out, uint32_t(v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(out, uint64_t(d));
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, offset);
    offset += (t.size + align - 1) / align * align;
  }
  if (!tensors_.empty()) out.resize((out.size() + align - 1) / align * align, 0);
  return out;
}

namespace {
// Calls sink(piece) over the tensor's bytes and its padding to `align`, in pieces.
template <class Sink>
void emit(const std::vector<uint8_t>& data, const Writer::Fill& fill, uint64_t size, uint64_t align, Sink&& sink) {
  if (!fill) {
    sink(std::span<const uint8_t>(data));
  } else {
    std::vector<uint8_t> piece;
    for (uint64_t at = 0; at < size; at += Writer::kFillPiece) {
      piece.assign(size_t(std::min<uint64_t>(Writer::kFillPiece, size - at)), 0);
      fill(at, std::span<uint8_t>(piece));
      sink(std::span<const uint8_t>(piece));
    }
  }
  const std::vector<uint8_t> pad(size_t((size + align - 1) / align * align - size), 0);
  sink(std::span<const uint8_t>(pad));
}
}  // namespace

std::vector<uint8_t> Writer::bytes() const {
  std::vector<uint8_t> out = header();
  for (const Tensor& t : tensors_)
    emit(t.data, t.fill, t.size, alignment(),
         [&](std::span<const uint8_t> p) { out.insert(out.end(), p.begin(), p.end()); });
  return out;
}

void Writer::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw RuntimeError("gguf: cannot create '" + path + "'");
  const auto sink = [&](std::span<const uint8_t> p) {
    f.write(reinterpret_cast<const char*>(p.data()), std::streamsize(p.size()));
  };
  sink(header());
  for (const Tensor& t : tensors_) emit(t.data, t.fill, t.size, alignment(), sink);
  f.flush();
  if (!f) throw RuntimeError("gguf: cannot write '" + path + "'");
}

}  // namespace llmk::gguf
