// UTF-8 byte structure, as the tokenizer's decoders read it: well-formed sequences per
// Unicode Table 3-7 (no overlong forms, no surrogates, nothing above U+10FFFF).
// Pure functions of their arguments; thread-safe.
#pragma once
#include <string_view>

namespace llmk {

// Length of the well-formed UTF-8 sequence at the start of s: 1..4; 0 when s is empty or
// holds only the start of a well-formed sequence (more bytes needed); -1 when s's first
// bytes start no well-formed sequence.
int utf8_sequence_length(std::string_view s);

}  // namespace llmk
