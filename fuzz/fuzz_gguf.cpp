// libFuzzer target: the GGUF parser, and everything built on its output. An input must either
// parse or throw gguf::FormatError (any other exception, a crash or a sanitizer report is a
// bug). When it parses, every tensor's first and last byte are read (ASan checks they lie in
// the buffer), every typed accessor is called on every key, and, when the file carries
// tokenizer metadata, a Tokenizer is built and run over a fixed text.
// Build and run: scripts/fuzz-smoke (corpus: fuzz/corpus/gguf, made by fuzz/make_corpus.py).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "llmk/gguf.hpp"
#include "llmk/tokenizer.hpp"

using namespace llmk;

static void exercise(const gguf::File& f) {
  volatile uint8_t sink = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.n_bytes == 0) continue;
    sink = sink + static_cast<const uint8_t*>(t.data)[0] + static_cast<const uint8_t*>(t.data)[t.n_bytes - 1];
    try {
      f.tensor(t.name);
    } catch (const gguf::FormatError&) {
    }
  }
  for (const auto& [key, value] : f.metadata()) {
    // Each accessor either returns or names the key in a FormatError.
    try {
      f.get_string(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_int(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_u32(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_f32(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_bool(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_strings(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_ints(key);
    } catch (const gguf::FormatError&) {
    }
    try {
      f.get_f32s(key);
    } catch (const gguf::FormatError&) {
    }
  }
  if (!f.has("tokenizer.ggml.tokens")) return;
  try {
    const Tokenizer tok = Tokenizer::from_gguf(f);
    const std::vector<int32_t> ids = tok.encode("Hello <|im_start|>w\xc3\xb6rld 123 \xf0\x9f\x99\x82\n\n  x", true,
                                                true);
    StreamDecoder d(tok);
    for (int32_t id : ids) d.push(id);
    d.finish();
  } catch (const gguf::FormatError&) {
  } catch (const InvalidArgument&) {  // e.g. a merge without a space: named by the constructor
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const gguf::File f = gguf::File::parse({data, size}, "fuzz");
    exercise(f);
  } catch (const gguf::FormatError&) {
  }
  return 0;
}
