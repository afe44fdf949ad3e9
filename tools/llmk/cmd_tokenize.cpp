// `llmk tokenize`: the token ids and pieces of a text (or of a file's bytes) under the model's
// tokenizer. Pieces are shown decoded (bytes, with C escapes for control and non-UTF-8 bytes,
// or JSON strings). --lines gives one result per line of the file: a quick way to compare
// many texts with another tokenizer. --chat tokenizes the text `llmk chat` renders for one
// user message. --vocab prints the tokenizer's metadata as llama.cpp reads it.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "llmk/chat_template.hpp"
#include "llmk/utf8.hpp"
#include "model_cli.hpp"

namespace {
using namespace llmk::cli;

// Escapes bytes for a terminal (C style) or JSON; bytes that are not valid UTF-8 become \xNN
// (terminal) or U+FFFD (JSON, which must be valid UTF-8).
std::string escape(const std::string& s, bool json) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = llmk::utf8_sequence_length(std::string_view(s).substr(i));
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

// One result; the summary line (not in JSON) gives the encode time.
void print(const llmk::Tokenizer& tok, const std::vector<int32_t>& ids, size_t n_bytes, double ms, bool json) {
  if (json) {
    std::string line = "{\"ids\": [";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    line += "], \"pieces\": [";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", \"" : "\"") + escape(tok.token_bytes(ids[i]), true) + "\"";
    std::printf("%s]}\n", line.c_str());
    return;
  }
  for (int32_t id : ids) std::printf("%6d  '%s'\n", id, escape(tok.token_bytes(id), false).c_str());
  std::printf("%zu tokens, %zu bytes, encoded in %.2f ms (%.2f MB/s)\n", ids.size(), n_bytes, ms,
              ms > 0 ? double(n_bytes) / ms / 1e3 : 0.0);
}

// The tokenizer's metadata as llama.cpp reads it, for comparison with llama.cpp.
void print_vocab(const llmk::Tokenizer& tok) {
  static constexpr const char* kPre[] = {"gpt2",  "digits_then_gpt2", "llama3",
                                         "qwen2", "deepseek_llm",     "deepseek_coder"};
  std::string eog;
  for (int32_t id : tok.eog_ids()) eog += (eog.empty() ? "" : ", ") + std::to_string(id);
  std::printf(
      "{\"kind\": \"%s\", \"pre\": \"%s\", \"n_vocab\": %d, \"bos\": %d, \"eos\": %d, "
      "\"add_bos\": %s, \"add_eos\": %s, \"eog\": [%s]}\n",
      tok.kind() == llmk::TokenizerKind::spm ? "spm" : "bpe",
      tok.kind() == llmk::TokenizerKind::spm ? "" : kPre[int(tok.pre())], tok.n_vocab(), tok.bos_id(), tok.eos_id(),
      tok.add_bos() ? "true" : "false", tok.add_eos() ? "true" : "false", eog.c_str());
}

int run_tokenize(llmk::cli::Args& args) {
  const std::string model = llmk::cli::model_arg(args);
  const bool json = args.flag("json"), no_special = args.flag("no-special"), bos = args.flag("bos");
  const bool lines = args.flag("lines"), chat = args.flag("chat"), null = args.flag("null"), vocab = args.flag("vocab");
  const std::string file = args.get("file");
  const std::string template_name = args.get("chat-template");
  args.finish();
  LLMK_CHECK_ARG(chat || template_name.empty(), "tokenize", "--chat-template", template_name, "needs --chat");
  if (vocab) {
    LLMK_CHECK_ARG(file.empty() && args.positional().empty(), "tokenize", "--vocab", "1", "takes no TEXT or --file");
    const llmk::gguf::File gguf = llmk::gguf::File::open(llmk::cli::model_path(model));
    print_vocab(llmk::Tokenizer::from_gguf(gguf));
    return 0;
  }
  LLMK_CHECK_ARG(file.empty() != args.positional().empty(), "tokenize", "TEXT", "(missing or given twice)",
                 "give either TEXT or --file F (see --help)");
  LLMK_CHECK_ARG(!lines || !file.empty(), "tokenize", "--lines", "1", "needs --file F");
  LLMK_CHECK_ARG(!lines || !chat, "tokenize", "--chat", "1", "cannot be combined with --lines");
  LLMK_CHECK_ARG(!null || lines, "tokenize", "--null", "1", "needs --lines");
  std::string text;
  if (file.empty()) {
    for (const std::string& p : args.positional()) text += (text.empty() ? "" : " ") + p;
  } else {
    if (file == "-") {
      std::stringstream ss;
      ss << std::cin.rdbuf();
      text = ss.str();
    } else {
      text = llmk::cli::read_text_file("tokenize", "--file", file);
    }
  }

  const llmk::gguf::File gguf = llmk::gguf::File::open(llmk::cli::model_path(model));
  const llmk::Tokenizer tok = llmk::Tokenizer::from_gguf(gguf);
  if (chat) {
    const llmk::ChatMessage msg{"user", text};
    text = llmk::chat_template_of(tok, template_name).render({&msg, 1}, llmk::chat_render_options(tok));
  }
  auto encode = [&](const std::string& t) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok.encode(t, !no_special, bos && tok.add_bos(), bos && tok.add_eos());
    print(tok, ids, t.size(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
          json);
  };
  if (!lines) {
    encode(text);
    return 0;
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line, null ? '\0' : '\n');) encode(line);
  return 0;
}

}  // namespace
LLMK_COMMAND("tokenize", "print the token ids and pieces of a text, or the tokenizer's special ids (--vocab)",
             run_tokenize,
             options(model_option(),
                     path("file", "FILE", "tokenize FILE's bytes ('-': stdin) instead of TEXT")
                         .must("needs a file name ('-' for stdin)"),
                     flag("lines", "with --file: each line on its own, one result a line"),
                     flag("null", "with --lines: texts separated by NUL bytes, not newlines"),
                     flag("json", "print {\"ids\": [...], \"pieces\": [...]}"),
                     flag("no-special", "special tokens' texts are plain text"),
                     flag("bos", "add BOS / EOS where the model's metadata says to"),
                     flag("chat", "render TEXT as one user message in the chat template first"),
                     text("chat-template", "NAME|FILE", "with --chat: a built-in chat template or a Jinja file")
                         .shown_default("the model's own"),
                     flag("vocab", "print the tokenizer's kind, size and special ids as JSON")),
             "TEXT...\tthe text (its words joined by spaces)");
