// libFuzzer target: the Jinja interpreter (llmk/jinja.hpp) and chat templates on top of it.
// The input is split at 0x00 bytes into a template text, a context and messages (each "role
// byte + content"). The template text is parsed; it renders the context when that is a JSON
// object, and chat-renders the messages (ChatTemplate::render) with and without the generation
// prompt and tools. Checks, beyond "no crash, no leak": only InvalidArgument escapes, and the
// sandbox bounds (steps, output, depth; set small here) keep every input fast and small.
// Build and run: scripts/fuzz-smoke (corpus: fuzz/corpus/chat_template).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmk/chat_template.hpp"
#include "llmk/error.hpp"
#include "llmk/jinja.hpp"

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
  jinja::RenderOptions ro;
  ro.now = 1756900800;
  ro.limits.max_steps = 200000;
  ro.limits.max_output = 1 << 20;
  ro.limits.max_depth = 64;
  std::string out;
  try {
    const jinja::Template t = jinja::Template::parse(parts[0]);
    if (parts.size() > 1) {
      try {
        out = t.render(parts[1], ro);
        if (out.size() > ro.limits.max_output) std::abort();  // the output bound holds
      } catch (const InvalidArgument&) {
      }
    }
  } catch (const InvalidArgument&) {
    return 0;
  }
  static const char* const roles[] = {"system", "user", "assistant", "tool"};
  std::vector<ChatMessage> ms;
  for (size_t i = 2; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    ms.push_back({roles[p.empty() ? 1 : uint8_t(p[0]) % 4], p.empty() ? "" : p.substr(1)});
  }
  if (ms.empty()) return 0;
  try {
    const ChatTemplate ct = ChatTemplate::from_jinja(parts[0]);
    for (bool agp : {true, false}) {
      ChatRenderOptions o{agp, "<s>", "</s>"};
      o.now = ro.now;
      if (agp) o.tools_json = R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])";
      try {
        (void)ct.render(ms, o);
      } catch (const InvalidArgument&) {
      }
    }
  } catch (const InvalidArgument&) {
  }
  return 0;
}
