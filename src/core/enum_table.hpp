// Traits tables indexed by their enum (kv_quant.cpp, ggml_quants.cpp, dtype.cpp).
#pragma once
#include <cstddef>

namespace llmk {

// Whether rows[i].type is enumerator i for every row: the table may be indexed by the enum.
template <class Row, size_t N>
constexpr bool rows_follow_enum(const Row (&rows)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (size_t(rows[i].type) != i) return false;
  return true;
}

}  // namespace llmk
