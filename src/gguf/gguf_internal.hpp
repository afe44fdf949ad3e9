// Shared between the GGUF reader and writer: the byte size of a scalar metadata value.
#pragma once
#include <cstdint>

#include "llmk/gguf.hpp"

namespace llmk::gguf {

// Bytes of one scalar value of type t; 0 for string and array (variable size).
constexpr uint64_t value_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean: return 1;
    case ValueType::u16:
    case ValueType::i16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64: return 8;
    case ValueType::string:
    case ValueType::array: return 0;
  }
  return 0;
}

}  // namespace llmk::gguf
