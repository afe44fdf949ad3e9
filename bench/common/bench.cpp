// Timing, reporting, STREAM triad and Python peers (see bench.hpp).
#include "bench.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "llmk/analyze.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/tensor.hpp"

#ifndef LLMK_SOURCE_DIR
#define LLMK_SOURCE_DIR "."
#endif

namespace llmk::bench {

namespace {
std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}
std::string num(double v, int prec = 4) {
  std::ostringstream os;
  os.precision(prec);
  os << v;
  return os.str();
}
}  // namespace

Reporter::Reporter(const Options& opt, std::string kernel, const std::string& convention)
    : opt_(opt), kernel_(std::move(kernel)) {
  if (opt_.json)
    std::printf("{\"type\":\"note\",\"kernel\":\"%s\",\"note\":\"%s\"}\n", kernel_.c_str(),
                json_escape(convention).c_str());
  else std::printf("== bench %s ==\n%s\n", kernel_.c_str(), convention.c_str());
  std::fflush(stdout);
}

void Reporter::add(Row r) {
  if (r.kernel.empty()) r.kernel = kernel_;
  if (opt_.json) {
    std::printf(
        "{\"kernel\":\"%s\",\"impl\":\"%s\",\"op\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\","
        "\"median_ms\":%.6g,\"gbps\":%.6g",
        r.kernel.c_str(), r.impl.c_str(), r.op.c_str(), r.shape.c_str(), r.dtype.c_str(), r.median_ms, r.gbps);
    for (const auto& [k, v] : r.extra) {
      if (looks_numeric(v)) std::printf(",\"%s\":%s", json_escape(k).c_str(), v.c_str());
      else std::printf(",\"%s\":\"%s\"", json_escape(k).c_str(), json_escape(v).c_str());
    }
    std::printf("}\n");
  } else {
    if (!header_) {
      std::printf("%-14s %-5s %-22s %-5s %12s %10s  %s\n", "impl", "op", "shape", "dtype", "median_ms", "GB/s",
                  "extra");
      header_ = true;
    }
    std::string extra;
    for (const auto& [k, v] : r.extra) extra += k + "=" + v + " ";
    std::printf("%-14s %-5s %-22s %-5s %12.4f %10.2f  %s\n", r.impl.c_str(), r.op.c_str(), r.shape.c_str(),
                r.dtype.c_str(), r.median_ms, r.gbps, extra.c_str());
  }
  std::fflush(stdout);
  rows_.push_back(std::move(r));
}

void Reporter::ratios(const std::string& impl, const std::vector<std::string>& versus) {
  if (!opt_.json)
    std::printf("-- ratios (time of the other / time of %s; > 1 means %s is faster) --\n", impl.c_str(), impl.c_str());
  for (const Row& a : rows_) {
    if (a.impl != impl) continue;
    for (const std::string& v : versus) {
      for (const Row& b : rows_) {
        if (b.impl != v || b.op != a.op || b.shape != a.shape || b.dtype != a.dtype) continue;
        if (a.median_ms <= 0 || b.median_ms <= 0) continue;
        const double ratio = b.median_ms / a.median_ms;
        if (opt_.json)
          std::printf(
              "{\"type\":\"ratio\",\"kernel\":\"%s\",\"impl\":\"%s\",\"versus\":\"%s\",\"op\":\"%s\","
              "\"shape\":\"%s\",\"dtype\":\"%s\",\"speedup\":%.4g}\n",
              kernel_.c_str(), impl.c_str(), v.c_str(), a.op.c_str(), a.shape.c_str(), a.dtype.c_str(), ratio);
        else
          std::printf("%s %-4s %-22s %-5s %6.2fx %s\n", impl.c_str(), a.op.c_str(), a.shape.c_str(), a.dtype.c_str(),
                      ratio, v.c_str());
      }
    }
  }
  std::fflush(stdout);
}

std::string simd_note() {
  return std::string("llmk SIMD path: ") + simd_name(simd_level()) + " (this CPU: " + simd_name(cpu_simd_level()) +
         (detected_simd_level() < cpu_simd_level() ? ", capped by LLMK_SIMD)" : ")");
}

void Reporter::note(const std::string& text) {
  if (opt_.json)
    std::printf("{\"type\":\"note\",\"kernel\":\"%s\",\"note\":\"%s\"}\n", kernel_.c_str(), json_escape(text).c_str());
  else std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

namespace {
double median_of(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}
}  // namespace

double median_ms(const std::function<void()>& fn, int min_reps, double min_seconds, int max_reps) {
  using clk = std::chrono::steady_clock;
  fn();
  std::vector<double> t;
  const auto start = clk::now();
  while ((int)t.size() < max_reps) {
    const auto a = clk::now();
    fn();
    const auto b = clk::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    if ((int)t.size() >= min_reps && std::chrono::duration<double>(b - start).count() >= min_seconds) break;
  }
  return median_of(std::move(t));
}

std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& fns, int rounds,
                                          double round_seconds, std::vector<double>* min_ms) {
  using clk = std::chrono::steady_clock;
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      fns[i]();  // warm: the previous function's data may have evicted this one's
      const auto start = clk::now();
      for (;;) {
        const auto a = clk::now();
        fns[i]();
        const auto b = clk::now();
        t[i].push_back(std::chrono::duration<double, std::milli>(b - a).count());
        if (std::chrono::duration<double>(b - start).count() >= round_seconds) break;
      }
    }
  std::vector<double> med;
  if (min_ms) min_ms->clear();
  for (auto& v : t) {
    if (min_ms) min_ms->push_back(*std::min_element(v.begin(), v.end()));
    med.push_back(median_of(std::move(v)));
  }
  return med;
}

std::vector<Row> median_rounds(const std::vector<std::vector<Row>>& rounds) {
  std::vector<std::vector<Row>> groups;
  for (const auto& rs : rounds)
    for (const Row& row : rs) {
      auto g = std::find_if(groups.begin(), groups.end(), [&](const std::vector<Row>& v) {
        return v[0].impl == row.impl && v[0].op == row.op && v[0].shape == row.shape && v[0].dtype == row.dtype;
      });
      if (g == groups.end()) groups.push_back({row});
      else g->push_back(row);
    }
  std::vector<Row> out;
  for (auto& g : groups) {
    std::sort(g.begin(), g.end(), [](const Row& a, const Row& b) { return a.median_ms < b.median_ms; });
    Row m = g[(g.size() - 1) / 2];
    m.extra["rounds"] = std::to_string(g.size());
    out.push_back(std::move(m));
  }
  return out;
}

double stream_triad_gbps(int threads, size_t total_bytes) { return analyze::measure_triad_gbps(threads, total_bytes); }

std::string source_dir() {
  const char* env = std::getenv("LLMK_SOURCE_DIR");
  return env && *env ? env : LLMK_SOURCE_DIR;
}

Row triad_row(const std::string& kernel, int threads, bool quick) {
  const size_t bytes = quick ? (48u << 20) : (768u << 20);
  Row r;
  r.kernel = kernel, r.impl = r.op = "triad", r.dtype = "f64";
  r.shape = std::to_string(bytes >> 20) + "MiB";
  r.gbps = stream_triad_gbps(threads, bytes);
  r.median_ms = double(bytes) / (r.gbps * 1e6);
  r.extra["threads"] = std::to_string(threads);
  return r;
}

std::string python_executable() {
  const char* env = std::getenv("LLMK_PYTHON");
  if (env && *env) return env;
  const std::string venv = source_dir() + "/.venv/bin/python";
  if (access(venv.c_str(), X_OK) == 0) return venv;
  return "/usr/bin/python3";
}

namespace {
// Parses one flat JSON object of string/number values; ignores anything else.
bool parse_flat_json(const std::string& line, std::map<std::string, std::string>& out) {
  size_t i = line.find('{');
  if (i == std::string::npos) return false;
  ++i;
  auto skip = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
  };
  auto str = [&](std::string& s) {
    if (line[i] != '"') return false;
    ++i;
    while (i < line.size() && line[i] != '"') {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      s += line[i++];
    }
    ++i;
    return true;
  };
  while (true) {
    skip();
    if (i >= line.size() || line[i] == '}') return true;
    std::string k, v;
    if (!str(k)) return false;
    while (i < line.size() && (line[i] == ' ' || line[i] == ':')) ++i;
    if (i < line.size() && line[i] == '"') {
      if (!str(v)) return false;
    } else {
      while (i < line.size() && line[i] != ',' && line[i] != '}') v += line[i++];
      while (!v.empty() && v.back() == ' ') v.pop_back();
    }
    out[k] = v;
  }
}
}  // namespace

std::vector<Row> run_python_peer(const std::string& script, const std::vector<std::string>& args, std::string* why) {
  std::string cmd = "'" + python_executable() + "' '" + source_dir() + "/" + script + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<Row> rows;
  if (!p) {
    if (why) *why = "cannot start " + cmd;
    return rows;
  }
  std::string out, line;
  std::array<char, 4096> buf;
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = pclose(p);
  std::istringstream is(out);
  std::string last;
  while (std::getline(is, line)) {
    std::map<std::string, std::string> kv;
    if (line.empty() || line[0] != '{' || !parse_flat_json(line, kv)) {
      if (!line.empty()) last = line;
      continue;
    }
    if (kv.count("skipped")) {
      if (why) *why = kv["skipped"];
      continue;
    }
    Row r;
    r.kernel = kv["kernel"];
    r.impl = kv["impl"];
    r.op = kv["op"];
    r.shape = kv["shape"];
    r.dtype = kv["dtype"];
    r.median_ms = std::atof(kv["median_ms"].c_str());
    r.gbps = std::atof(kv["gbps"].c_str());
    for (const auto& [k, v] : kv)
      if (k != "kernel" && k != "impl" && k != "op" && k != "shape" && k != "dtype" && k != "median_ms" && k != "gbps")
        r.extra[k] = v;
    rows.push_back(std::move(r));
  }
  if (rc != 0 && rows.empty() && why && why->empty()) *why = "peer failed (exit " + std::to_string(rc) + "): " + last;
  return rows;
}

std::string shape_str(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

static std::vector<Bench>& bench_registry() {
  static std::vector<Bench> r;
  return r;
}
bool register_bench(Bench b) {
  bench_registry().push_back(b);
  return true;
}
const std::vector<Bench>& benches() {
  auto& r = bench_registry();
  std::sort(r.begin(), r.end(), [](const Bench& a, const Bench& b) { return std::string(a.name) < b.name; });
  return r;
}

}  // namespace llmk::bench
