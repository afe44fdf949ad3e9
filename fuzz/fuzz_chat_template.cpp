// libFuzzer target: chat templates. The input is split at 0x00 bytes into a template text and
// messages (each "role byte + content"); ChatTemplate::from_jinja runs on the template text,
// and every named family renders the messages with and without the generation prompt.
// Checks, beyond "no crash": only InvalidArgument escapes, and a rendered prompt holds each
// user message's content, trimmed where the family trims, unless the family threw.
// Build and run: scripts/fuzz-smoke (corpus: fuzz/corpus/chat_template).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmk/chat_template.hpp"
#include "llmk/error.hpp"

using namespace llmk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (size_t a = 0;;) {
    const size_t b = in.find('\0', a);
    parts.push_back(in.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  try {
    (void)ChatTemplate::from_jinja(parts[0]);
  } catch (const InvalidArgument&) {
  }
  static const char* const roles[] = {"system", "user", "assistant"};
  std::vector<ChatMessage> ms;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    ms.push_back({roles[p.empty() ? 1 : uint8_t(p[0]) % 3], p.empty() ? "" : p.substr(1)});
  }
  for (const std::string& name : ChatTemplate::names()) {
    const ChatTemplate t = ChatTemplate::from_name(name);
    for (bool agp : {true, false}) {
      std::string out;
      try {
        out = t.render(ms, {agp, "<s>", "</s>", "01 Jan 2025"});
      } catch (const InvalidArgument&) {
        continue;
      }
      // contents that no family rewrites: a user message without whitespace or think tags
      for (const ChatMessage& m : ms) {
        if (m.role != "user" ||
            m.content.find_first_of(" \t\n\v\f\r\x1c\x1d\x1e\x1f\xc2\xe1\xe2\xe3") != std::string::npos)
          continue;
        if (out.find(m.content) == std::string::npos) std::abort();
      }
    }
  }
  return 0;
}
