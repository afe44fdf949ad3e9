// `llmk analyze`: KV-cache capacity and roofline placement of a model on the
// built-in devices and on this machine (llmk/analyze.hpp; docs/capacity.md
// derives every number). Text tables by default; --json prints one JSON object
// that scripts/plot_capacity.py reads.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "llmk/analyze.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "model_cli.hpp"

namespace {
using namespace llmk::analyze;

struct Setup {
  ModelConfig m;
  std::vector<Device> devices;
  KvType k = KvType::f16, v = KvType::f16;
  WeightType w = WeightType::f16;
  int64_t batch = 1, context = 0;
  CapacityOptions opt;
  double act_bytes = 2;
  std::vector<int64_t> contexts = {512, 1024, 2048, 4096, 8192, 16384, 32768, 131072};
  std::vector<int64_t> batches = {1, 8, 32, 128};
  std::vector<int64_t> prompts = {16, 128, 512, 2048, 8192, 32768};
  std::vector<int64_t> tokens = {1, 8, 32, 128, 512, 2048};
};

std::string kv_name(const Setup& s) {
  return s.k == s.v ? kv_type_name(s.k) : std::string(kv_type_name(s.k)) + "," + kv_type_name(s.v);
}

double gb(int64_t bytes) { return double(bytes) / 1e9; }

// The whole decode step for `batch` sequences at `context`: weights once, attention per sequence.
Work decode_step(const Setup& s) {
  const Work mm = weight_matmuls(s.m, s.w, s.batch, s.act_bytes);
  const Work at = decode_attention(s.m, s.k, s.v, s.context, s.act_bytes);
  return {mm.flops + double(s.batch) * at.flops, mm.bytes + double(s.batch) * at.bytes};
}

// Below the tensor ridge: "mem"; "mem*" when it is nonetheless above the f32
// vector ridge (compute-bound for a kernel that does not use tensor cores).
const char* side(double intensity, const Device& d) {
  return intensity >= ridge(d) ? "comp" : intensity >= fp32_ridge(d) ? "mem*" : "mem";
}

// printf onto `o`. The text is printed once it is whole, so a product that overflows int64 (a
// huge --batch or --block, a config's head_dim) and throws midway leaves stdout empty.
__attribute__((format(printf, 2, 3))) void out(std::string& o, const char* fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  const size_t at = o.size();
  o.resize(at + size_t(n) + 1);
  std::vsnprintf(o.data() + at, size_t(n) + 1, fmt, ap2);
  va_end(ap2);
  o.resize(at + size_t(n));
}

void print_text(const Setup& s) {
  std::string o;
  const ModelConfig& m = s.m;
  out(o,
      "model %s: %lld layers, hidden %lld, heads %lld/%lld kv (group %lld), head_dim %lld, ffn %lld%s, "
      "vocab %lld%s\n",
      m.name.c_str(), (long long)m.n_layers, (long long)m.hidden, (long long)m.n_heads, (long long)m.n_kv_heads,
      (long long)(m.n_heads / m.n_kv_heads), (long long)m.head_dim, (long long)m.ffn, m.gated_ffn ? " (gated)" : "",
      (long long)m.vocab, m.tied_embeddings ? ", tied" : "");
  out(o, "params %lld (shape implies %lld), weights %s %.3f GB; GB = 1e9 bytes\n", (long long)m.params,
      (long long)estimated_params(m), weight_type_name(s.w), gb(weight_bytes(m, s.w)));
  out(o,
      "settings: batch %lld, context %lld, kv %s, blocks of %lld tokens, reserve %.0f%% of memory, "
      "activations %g bytes\n\n",
      (long long)s.batch, (long long)s.context, kv_name(s).c_str(), (long long)s.opt.block,
      100 * s.opt.reserve_fraction, s.act_bytes);

  out(o, "KV cache per token (K and V, all layers)\n  %-6s %12s %10s %8s\n", "type", "bytes", "KiB", "vs f16");
  const double f16 = double(kv_bytes_per_token(m, KvType::f16, KvType::f16));
  for (KvType t : all_kv_types()) {
    const int64_t b = kv_bytes_per_token(m, t, t);
    out(o, "  %-6s %12lld %10.2f %8.3f\n", kv_type_name(t), (long long)b, double(b) / 1024, double(b) / f16);
  }

  out(o, "\nKV memory (GB) at batch %lld against context, per storage type\n  %8s", (long long)s.batch, "context");
  for (KvType t : all_kv_types()) out(o, " %9s", kv_type_name(t));
  out(o, "\n");
  for (int64_t c : s.contexts) {
    out(o, "  %8lld", (long long)c);
    for (KvType t : all_kv_types()) out(o, " %9.3f", gb(kv_bytes(m, t, t, s.batch, c, s.opt.block)));
    out(o, "\n");
  }
  out(o, "\nKV + weights (GB), kv %s, weights %s, against context and batch\n  %8s", kv_name(s).c_str(),
      weight_type_name(s.w), "context");
  for (int64_t b : s.batches) out(o, "  batch %-4lld", (long long)b);
  out(o, "\n");
  for (int64_t c : s.contexts) {
    out(o, "  %8lld", (long long)c);
    for (int64_t b : s.batches)
      out(o, " %11.2f", gb(kv_bytes(m, s.k, s.v, b, c, s.opt.block)) + gb(weight_bytes(m, s.w)));
    out(o, "\n");
  }

  out(o, "\ncapacity: kv %s, weights %s, reserve %.0f%%\n  %-8s %8s %8s %8s %8s %14s %14s  %s\n", kv_name(s).c_str(),
      weight_type_name(s.w), 100 * s.opt.reserve_fraction, "device", "mem GB", "weights", "reserve", "KV GB",
      ("max ctx @b" + std::to_string(s.batch)).c_str(), ("max batch @" + std::to_string(s.context)).c_str(), "note");
  for (const Device& d : s.devices) {
    const Capacity c = capacity(m, d, s.k, s.v, s.w, s.batch, s.context, s.opt);
    std::string note = !c.fits              ? "does not fit: weights + reserve exceed memory"
                       : c.max_context == 0 ? "no room for one KV block per sequence"
                       : (m.max_context && c.max_context > m.max_context)
                           ? "memory allows more than the trained context " + std::to_string(m.max_context)
                           : "";
    out(o, "  %-8s %8.1f %8.2f %8.2f %8.2f %14lld %14lld  %s\n", d.key.c_str(), gb(c.memory), gb(c.weights),
        gb(c.reserve), gb(std::max<int64_t>(c.kv_budget, 0)), (long long)c.max_context, (long long)c.max_batch,
        note.c_str());
  }

  out(o,
      "\narithmetic intensity (FLOPs/byte) and roofline side: mem = below the ridge, comp = above,\n"
      "mem* = below the tensor ridge but above the f32 (CUDA-core) ridge\n");
  out(o, "  %-34s %9s", "op", "FLOP/B");
  for (const Device& d : s.devices) out(o, " %8s", d.key.c_str());
  out(o, "\n  %-34s %9s", "ridge = peak / bandwidth", "");
  for (const Device& d : s.devices) out(o, " %8.1f", ridge(d));
  out(o, "\n  %-34s %9s", "f32 ridge = f32 peak / bandwidth", "");
  for (const Device& d : s.devices) out(o, " %8.1f", fp32_ridge(d));
  out(o, "\n");
  auto row = [&](const std::string& op, const Work& w) {
    out(o, "  %-34s %9.2f", op.c_str(), w.intensity());
    for (const Device& d : s.devices) out(o, " %8s", side(w.intensity(), d));
    out(o, "\n");
  };
  for (KvType t : all_kv_types())
    row("decode attn " + std::string(kv_type_name(t)) + " ctx " + std::to_string(s.context),
        decode_attention(m, t, t, s.context, s.act_bytes));
  for (int64_t p : s.prompts)
    row("prefill attn " + kv_name(s) + " prompt " + std::to_string(p), prefill_attention(m, s.k, s.v, p, s.act_bytes));
  for (int64_t t : s.tokens)
    row("matmuls " + std::string(weight_type_name(s.w)) + " tokens " + std::to_string(t),
        weight_matmuls(m, s.w, t, s.act_bytes));
  const Work step = decode_step(s);
  row("decode step (batch " + std::to_string(s.batch) + ")", step);

  out(o, "\ndecode step bound: batch %lld at context %lld = %.3f GFLOP, %.3f GB moved\n", (long long)s.batch,
      (long long)s.context, step.flops / 1e9, step.bytes / 1e9);
  out(o, "  %-8s %12s %14s\n", "device", "ms/step", "tokens/s max");
  for (const Device& d : s.devices) {
    const double t = roofline_seconds(d, step);
    out(o, "  %-8s %12.3f %14.1f\n", d.key.c_str(), t * 1e3, double(s.batch) / t);
  }
  out(o, "\ndevices (GB/s; dense bf16/f16 tensor and f32 TFLOP/s; cpu: measured f32 FMA):\n");
  for (const Device& d : s.devices)
    out(o, "  %-8s %s: %.0f GB, %.1f GB/s, %.4g / %.4g TFLOP/s (%s)\n", d.key.c_str(), d.name.c_str(),
        gb(d.memory_bytes), d.bandwidth_gbps, d.peak_tflops, d.fp32_tflops, d.source.c_str());
  std::fputs(o.c_str(), stdout);
}

// --- JSON ---------------------------------------------------------------------
std::string q(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}
std::string num(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}
std::string num(int64_t x) { return std::to_string(x); }
std::string work(const Work& w) {
  return "\"flops\": " + num(w.flops) + ", \"bytes\": " + num(w.bytes) + ", \"intensity\": " + num(w.intensity());
}

void print_json(const Setup& s) {
  const ModelConfig& m = s.m;
  std::string o = "{\"model\": {\"name\": " + q(m.name) + ", \"n_layers\": " + num(m.n_layers) +
                  ", \"hidden\": " + num(m.hidden) + ", \"n_heads\": " + num(m.n_heads) +
                  ", \"n_kv_heads\": " + num(m.n_kv_heads) + ", \"head_dim\": " + num(m.head_dim) +
                  ", \"ffn\": " + num(m.ffn) + ", \"vocab\": " + num(m.vocab) +
                  ", \"tied_embeddings\": " + (m.tied_embeddings ? "true" : "false") +
                  ", \"gated_ffn\": " + (m.gated_ffn ? "true" : "false") + ", \"params\": " + num(m.params) +
                  ", \"max_context\": " + num(m.max_context) + ", \"estimated_params\": " + num(estimated_params(m)) +
                  ", \"matmul_params\": " + num(matmul_params(m)) + "},\n";
  o += " \"settings\": {\"batch\": " + num(s.batch) + ", \"context\": " + num(s.context) +
       ", \"kv_type\": " + q(kv_name(s)) + ", \"weights\": " + q(weight_type_name(s.w)) +
       ", \"block\": " + num(s.opt.block) + ", \"reserve_fraction\": " + num(s.opt.reserve_fraction) +
       ", \"act_bytes\": " + num(s.act_bytes) + "},\n";
  o += " \"weight_bytes\": " + num(weight_bytes(m, s.w)) + ",\n \"kv_bytes_per_token\": {";
  for (KvType t : all_kv_types())
    o += std::string(t == KvType::f32 ? "" : ", ") + q(kv_type_name(t)) + ": " + num(kv_bytes_per_token(m, t, t));
  o += "},\n \"memory_vs_context\": [";
  for (size_t i = 0; i < s.contexts.size(); ++i) {
    o += std::string(i ? ",\n   " : "\n   ") + "{\"context\": " + num(s.contexts[i]) + ", \"kv_bytes\": {";
    for (KvType t : all_kv_types())
      o += std::string(t == KvType::f32 ? "" : ", ") + q(kv_type_name(t)) + ": " +
           num(kv_bytes(m, t, t, s.batch, s.contexts[i], s.opt.block));
    o += "}}";
  }
  o += "],\n \"devices\": [";
  const Work step = decode_step(s);
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const Device& d = s.devices[i];
    const Capacity c = capacity(m, d, s.k, s.v, s.w, s.batch, s.context, s.opt);
    o += std::string(i ? ",\n   " : "\n   ") + "{\"key\": " + q(d.key) + ", \"name\": " + q(d.name) +
         ", \"memory_bytes\": " + num(d.memory_bytes) + ", \"bandwidth_gbps\": " + num(d.bandwidth_gbps) +
         ", \"peak_tflops\": " + num(d.peak_tflops) + ", \"ridge\": " + num(ridge(d)) +
         ", \"fp32_tflops\": " + num(d.fp32_tflops) + ", \"fp32_ridge\": " + num(fp32_ridge(d)) +
         ", \"source\": " + q(d.source) + ",\n    \"capacity\": {\"fits\": " + (c.fits ? "true" : "false") +
         ", \"reserve\": " + num(c.reserve) + ", \"weights\": " + num(c.weights) +
         ", \"kv_budget\": " + num(c.kv_budget) + ", \"block_bytes\": " + num(c.block_bytes) +
         ", \"blocks\": " + num(c.blocks) + ", \"max_context\": " + num(c.max_context) +
         ", \"max_batch\": " + num(c.max_batch) + "}, \"decode_step_seconds\": " + num(roofline_seconds(d, step)) + "}";
  }
  o += "],\n \"intensity\": {\"decode_attention\": [";
  for (KvType t : all_kv_types())
    o += std::string(t == KvType::f32 ? "" : ", ") + "{\"kv_type\": " + q(kv_type_name(t)) +
         ", \"context\": " + num(s.context) + ", " + work(decode_attention(m, t, t, s.context, s.act_bytes)) + "}";
  o += "],\n  \"prefill_attention\": [";
  for (size_t i = 0; i < s.prompts.size(); ++i)
    o += std::string(i ? ", " : "") + "{\"prompt\": " + num(s.prompts[i]) + ", " +
         work(prefill_attention(m, s.k, s.v, s.prompts[i], s.act_bytes)) + "}";
  o += "],\n  \"weight_matmuls\": [";
  for (size_t i = 0; i < s.tokens.size(); ++i)
    o += std::string(i ? ", " : "") + "{\"tokens\": " + num(s.tokens[i]) + ", " +
         work(weight_matmuls(m, s.w, s.tokens[i], s.act_bytes)) + "}";
  o += "],\n  \"decode_step\": {\"batch\": " + num(s.batch) + ", " + work(step) + "}}}\n";
  std::fputs(o.c_str(), stdout);
}

// --list: the built-in models (with f16/int8/int4 KV KiB per token) and devices, as Markdown tables.
void print_list() {
  std::printf(
      "| model | layers | hidden | heads/kv | head_dim | ffn | vocab | tied | params | context |"
      " KV KiB/token f32 | f16 | int8 | int4 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ModelConfig& m : builtin_models()) {
    std::printf("| %s | %lld | %lld | %lld/%lld | %lld | %lld | %lld | %s | %lld | %lld |", m.name.c_str(),
                (long long)m.n_layers, (long long)m.hidden, (long long)m.n_heads, (long long)m.n_kv_heads,
                (long long)m.head_dim, (long long)m.ffn, (long long)m.vocab, m.tied_embeddings ? "yes" : "no",
                (long long)m.params, (long long)m.max_context);
    for (KvType t : {KvType::f32, KvType::f16, KvType::int8, KvType::int4})
      std::printf(" %g |", double(kv_bytes_per_token(m, t, t)) / 1024);
    std::printf("\n");
  }
  std::printf(
      "\n| device | memory GB | GB/s | tensor TFLOP/s | ridge FLOP/B | f32 TFLOP/s | f32 ridge | source |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const Device& d : builtin_devices())
    std::printf("| %s (%s) | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %s |\n", d.key.c_str(), d.name.c_str(),
                gb(d.memory_bytes), d.bandwidth_gbps, d.peak_tflops, ridge(d), d.fp32_tflops, fp32_ridge(d),
                d.source.c_str());
}

// --kv-type T or K,V (`part` is T, K or V) and --weights T, named as options: the parsers
// name 'kv type' and 'weight type', and only a part of "f16,f16,f16" ('f16,f16').
KvType kv_type_arg(const std::string& kv, const std::string& part) {
  try {
    return parse_kv_type(part);
  } catch (const llmk::InvalidArgument&) {
    llmk::throw_invalid_argument("analyze", "--kv-type", kv,
                                 "must be T or K,V, each one of " + llmk::kv_type_choices());
  }
}

WeightType weight_type_arg(const std::string& name) {
  try {
    return parse_weight_type(name);
  } catch (const llmk::InvalidArgument&) {
    llmk::throw_invalid_argument("analyze", "--weights", name, "must be one of " + weight_type_choices());
  }
}

int run_analyze(llmk::cli::Args& args) {
  Setup s;
  if (args.flag("list")) {
    args.finish();
    print_list();
    return 0;
  }
  const bool json = args.flag("json");
  const std::string model = args.get("model"), config = args.get("config");
  LLMK_CHECK_ARG(!args.has("model") || !args.has("config"), "analyze", "--config", config,
                 "give --model or --config, not both");
  s.m = args.has("config") ? parse_model_config(llmk::cli::read_text_file("analyze", "--config", config), config)
                           : find_model(model);
  const std::string device = args.get("device");
  const std::string kv = args.get("kv-type");
  const auto comma = kv.find(',');
  s.k = kv_type_arg(kv, kv.substr(0, comma));
  s.v = comma == std::string::npos ? s.k : kv_type_arg(kv, kv.substr(comma + 1));
  s.w = weight_type_arg(args.get("weights"));
  s.batch = args.get_int("batch");
  s.context = args.get_int("context", s.m.max_context ? s.m.max_context : 4096);
  s.opt.block = args.get_int("block");
  s.opt.reserve_fraction = args.get_double("reserve");
  s.act_bytes = args.get_double("act-bytes");
  double bandwidth = args.get_double("bandwidth"), peak = args.get_double("peak-tflops");  // 0: measured
  const int threads = int(args.get_int("threads", llmk::num_threads()));
  args.finish();
  args.no_positionals("analyze", "name the model with --model NAME");

  const bool host = device == "all" || device == "cpu";
  LLMK_CHECK_ARG(host || (bandwidth == 0 && peak == 0), "analyze", "--device", device,
                 "--bandwidth and --peak-tflops describe this machine: use them with --device cpu or all");
  if (device == "all") s.devices = builtin_devices();
  else if (device != "cpu") s.devices = {find_device(device)};
  if (host) {
    if (bandwidth == 0) bandwidth = measure_triad_gbps(threads);
    if (peak == 0) peak = measure_peak_tflops(threads);
    s.devices.push_back(host_device(bandwidth, peak));
  }
  if (std::find(s.batches.begin(), s.batches.end(), s.batch) == s.batches.end()) s.batches.push_back(s.batch);
  std::sort(s.batches.begin(), s.batches.end());
  if (std::find(s.tokens.begin(), s.tokens.end(), s.batch) == s.tokens.end()) s.tokens.push_back(s.batch);
  std::sort(s.tokens.begin(), s.tokens.end());
  if (json) print_json(s);
  else print_text(s);
  return 0;
}

std::vector<std::string> device_names() {
  std::vector<std::string> r;
  for (const Device& d : builtin_devices()) r.push_back(d.key);
  r.push_back("cpu");  // this machine
  r.push_back("all");  // every built-in device and this machine
  return r;
}
}  // namespace

using llmk::cli::choice, llmk::cli::flag, llmk::cli::integer, llmk::cli::number, llmk::cli::path, llmk::cli::text;
LLMK_COMMAND(
    "analyze", "KV-cache capacity and roofline of a model (docs/capacity.md)", run_analyze,
    llmk::cli::options(
        text("model", "NAME", "a built-in model (--list names them)").def("smollm2-135m"),
        path("config", "FILE", "a Hugging Face config.json instead of --model"),
        choice("device", device_names, "the device (cpu: this machine; all: every one)").def("all"),
        text("kv-type", "T|K,V", "the KV cache's type, " + llmk::kv_type_choices() + ", or K's,V's").def("f16"),
        text("weights", "T", "the weights' type: " + weight_type_choices()).def("f16"),
        integer("batch", "N", "sequences").range(1, INT64_MAX).def("1"),
        integer("context", "N", "tokens a sequence")
            .range(1, INT64_MAX)
            .shown_default("the model's trained context, else 4096"),
        integer("block", "N", "tokens a KV block").range(1, INT64_MAX).def("16"),
        number("reserve", "F", "the share of memory kept free").range(0.0, 1.0, false, true).def("0.1"),
        number("act-bytes", "A", "bytes an activation element").range(0.0, INFINITY, true).def("2"),
        number("bandwidth", "GB/s", "this machine's bandwidth (cpu, all)")
            .range(0.0, INFINITY)
            .def("0")
            .shown_default("0: the measured STREAM triad"),
        number("peak-tflops", "X", "this machine's peak (cpu, all)")
            .range(0.0, INFINITY)
            .def("0")
            .shown_default("0: the measured f32 FMA rate"),
        llmk::cli::threads_option(), flag("json", "print one JSON object (scripts/plot_capacity.py reads it)"),
        flag("list", "list the built-in models and devices as Markdown tables")));
