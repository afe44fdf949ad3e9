// The bench harness behind `llmk bench <name> [--json] [--quick]`.
//
// A bench measures llmk and its peers side by side, in one run, on the same
// data, and prints a table (or one JSON object per line with --json) with at
// least kernel, impl, op, shape, dtype, median_ms and gbps, then the ratios
// against a baseline. Each bench states how it counts bytes and FLOPs.
// Peers that live in Python (PyTorch, llama-cpp-python) run as a child
// process of the project's venv and answer in the same JSON lines.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace llmk::bench {

struct Options {
  bool json = false;
  bool quick = false;             // small shapes and few reps: a smoke test, not a measurement
  int threads = 0;                // 0 = llmk's default
  std::vector<std::string> only;  // --only a,b: restrict shapes/impls where the bench supports it
  std::string model;              // --model NAME|PATH (bench generate): "" = the default model
  std::string weights;            // --weights MIX (bench generate --model SHAPE): "" = q4_k_m
  int replicas = 0;               // bench serve: > 0 runs N replicas behind --router (bench_replicas.py)
  std::string router;             // bench serve --replicas: vllm-router or haproxy
  bool fault = false;             // bench serve --replicas: the fault test
};

struct Row {
  std::string kernel, impl, op, shape, dtype;
  double median_ms = 0;
  double gbps = 0;                           // bytes (per the bench's convention) / median time
  std::map<std::string, std::string> extra;  // other columns, printed as they are (JSON: strings or numbers)
};

class Reporter {
 public:
  // Prints the bench title and its byte/FLOP counting convention.
  Reporter(const Options& opt, std::string kernel, const std::string& convention);
  void add(Row r);  // prints it at once
  // For every (op, shape, dtype) group, prints impl time ratios relative to
  // `versus` as "llmk is X× <versus>" lines (JSON: {"type":"ratio",...}).
  void ratios(const std::string& impl, const std::vector<std::string>& versus);
  void note(const std::string& text);  // a free-form line (JSON: {"type":"note"})
  const std::vector<Row>& rows() const { return rows_; }

 private:
  Options opt_;
  std::string kernel_;
  std::vector<Row> rows_;
  bool header_ = false;
};

// Median of per-call wall times in ms. Runs fn once to warm up, then at least
// min_reps times and until min_seconds have passed (max_reps caps it).
double median_ms(const std::function<void()>& fn, int min_reps = 5, double min_seconds = 0.3, int max_reps = 1000);

// Medians of per-call wall times in ms of several functions measured in
// turns: `rounds` rounds, each warming fns[i] once and then timing it until
// round_seconds have passed (at least once), for every i in order. On a
// shared machine whose speed drifts over seconds, each function then sees the
// same mix of fast and slow phases, so their ratios hold even when the
// absolute times do not. min_ms (optional): each function's fastest call,
// the least disturbed one where other jobs share the cores.
std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& fns, int rounds,
                                          double round_seconds, std::vector<double>* min_ms = nullptr);

// The rows of several rounds of a bench (llmk's rows and a peer's, taken in
// turn) reduced to one row per (impl, op, shape, dtype): the round with the
// median time (the lower middle for an even count), with an extra "rounds"
// field; in the order the rows first appear.
std::vector<Row> median_rounds(const std::vector<std::vector<Row>>& rounds);

// llmk::analyze::measure_triad_gbps (llmk/analyze.hpp): the STREAM triad in GB/s.
double stream_triad_gbps(int threads, size_t total_bytes = 768u << 20);
// The triad as a row of `kernel`'s bench (impl and op "triad", shape its MiB, median_ms the
// time of one pass): 768 MiB, 48 with --quick.
Row triad_row(const std::string& kernel, int threads, bool quick);

// Runs `<venv python> <repo>/<script> args...` and parses its JSON-lines
// output into rows. On failure (no python, import error) returns {} and sets
// *why, so the bench can print "peer skipped: why".
std::vector<Row> run_python_peer(const std::string& script, const std::vector<std::string>& args, std::string* why);
std::string python_executable();
std::string source_dir();

// "llmk SIMD path: <level> (this CPU: <level>[, capped by LLMK_SIMD])": the
// line benches print first, and whose level their llmk rows carry as `simd`.
std::string simd_note();

// Formats "16384x4096".
std::string shape_str(std::initializer_list<int64_t> dims);

using BenchFn = int (*)(const Options&);
struct Bench {
  const char* name;
  const char* summary;
  BenchFn run;
};
bool register_bench(Bench b);
const std::vector<Bench>& benches();

}  // namespace llmk::bench

#define LLMK_BENCH_CAT2(a, b) a##b
#define LLMK_BENCH_CAT(a, b) LLMK_BENCH_CAT2(a, b)
#define LLMK_BENCH(name, summary, fn) \
  static const bool LLMK_BENCH_CAT(llmk_bench_, __LINE__) = ::llmk::bench::register_bench({name, summary, fn})
