// `llmk tokenize [--model PATH] [--no-special] [--bos] [--json] TEXT...`: the token ids and
// pieces of TEXT under the model's tokenizer (default model: fetched when missing). Pieces
// are shown decoded (bytes, with C escapes for control and non-UTF-8 bytes); --json prints
// {"ids": [...], "pieces": [...]} with the pieces as JSON strings.
#include <cstdio>
#include <string>

#include "cli.hpp"
#include "llmk/gguf.hpp"
#include "llmk/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace {

// Escapes bytes for a terminal (C style) or JSON; bytes that are not valid UTF-8 become \xNN
// (terminal) or U+FFFD (JSON, which must be valid UTF-8).
std::string escape(const std::string& s, bool json) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = llmk::unicode::utf8_sequence_length(std::string_view(s).substr(i));
    if (len <= 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += json ? "\xEF\xBF\xBD" : buf;
      ++i;
      continue;
    }
    if (c == '"' && json) out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, json ? "\\u%04x" : "\\x%02x", c);
      out += buf;
    } else {
      out.append(s, i, size_t(len));
    }
    i += size_t(len);
  }
  return out;
}

int run_tokenize(llmk::cli::Args& args) {
  const std::string model = args.has("model") ? args.get("model", "") : llmk::gguf::fetch_default_model();
  const bool json = args.flag("json"), no_special = args.flag("no-special"), bos = args.flag("bos");
  args.finish();
  std::string text;
  for (const std::string& p : args.positional()) text += (text.empty() ? "" : " ") + p;
  LLMK_CHECK_ARG(!args.positional().empty(), "tokenize", "TEXT", "(missing)",
                 "usage: llmk tokenize [--model PATH] [--no-special] [--bos] [--json] TEXT");

  const llmk::gguf::File file = llmk::gguf::File::open(model);
  const llmk::Tokenizer tok = llmk::Tokenizer::from_gguf(file);
  const std::vector<int32_t> ids = tok.encode(text, !no_special, bos);
  if (json) {
    std::printf("{\"ids\": [");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("], \"pieces\": [");
    for (size_t i = 0; i < ids.size(); ++i)
      std::printf("%s\"%s\"", i ? ", " : "", escape(tok.token_bytes(ids[i]), true).c_str());
    std::printf("]}\n");
    return 0;
  }
  for (int32_t id : ids) std::printf("%6d  '%s'\n", id, escape(tok.token_bytes(id), false).c_str());
  std::printf("%zu tokens, %zu bytes\n", ids.size(), text.size());
  return 0;
}

}  // namespace
LLMK_COMMAND("tokenize", "print the token ids and pieces of a text (--model, --json, --no-special, --bos)",
             run_tokenize, {"json", "no-special", "bos"});
