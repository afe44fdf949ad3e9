// `llmk serve`'s /metrics: Prometheus text format, llmk's own names and, beside them, the vLLM
// names that routers and gateways read (vLLM's production stack, llm-d, the Gateway API
// Inference Extension's endpoint picker). docs/serving.md lists both and how they are counted.
#pragma once
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#include "llmk/engine.hpp"

namespace llmk::cli {

// Prometheus histogram with fixed buckets (seconds).
struct Histogram {
  static constexpr double kBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  int64_t counts[std::size(kBounds) + 1] = {};
  double sum = 0;
  int64_t n = 0;
  void observe(double s) {
    size_t i = 0;
    while (i < std::size(kBounds) && s > kBounds[i]) ++i;
    ++counts[i];
    sum += s;
    ++n;
  }
  // `labels`: "" or `k="v",...` added to every sample.
  void print(std::string& out, const std::string& name, const std::string& help, const std::string& labels = "") const {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    const std::string pre = labels.empty() ? "" : labels + ",";
    const std::string own = labels.empty() ? "" : "{" + labels + "}";
    int64_t cum = 0;
    char b[64];
    for (size_t i = 0; i < std::size(kBounds); ++i) {
      cum += counts[i];
      std::snprintf(b, sizeof b, "%g", kBounds[i]);
      out += name + "_bucket{" + pre + "le=\"" + b + "\"} " + std::to_string(cum) + "\n";
    }
    out += name + "_bucket{" + pre + "le=\"+Inf\"} " + std::to_string(n) + "\n";
    std::snprintf(b, sizeof b, "%.9g", sum);
    out += name + "_sum" + own + " " + b + "\n" + name + "_count" + own + " " + std::to_string(n) + "\n";
  }
};

struct Metrics {
  std::mutex m;
  std::map<std::string, int64_t> outcomes;  // requests by outcome
  Histogram ttft, tbt, e2e;                 // first token, between tokens, submission to the last event
  void count(const std::string& outcome) {
    std::lock_guard<std::mutex> lk(m);
    ++outcomes[outcome];
  }
};

// The whole /metrics body. `model` labels the vLLM-named samples (model_name, as vLLM does).
inline std::string metrics_text(Metrics& mx, const AsyncEngineStatus& s, const EngineConfig& ec,
                                const std::string& model) {
  std::string o;
  auto head = [&](const std::string& name, const char* type, const char* help) {
    o += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto metric = [&](const std::string& name, const char* type, const char* help, int64_t v) {
    head(name, type, help);
    o += name + " " + std::to_string(v) + "\n";
  };
  const std::string ml = "model_name=\"" + model + "\"";
  const int64_t blocks = (ec.kv_tokens + ec.block_tokens - 1) / ec.block_tokens;  // the cache's blocks
  auto vllm = [&](const std::string& name, const char* type, const char* help, double v) {
    head(name, type, help);
    char b[64];
    std::snprintf(b, sizeof b, "%.9g", v);
    o += name + "{" + ml + "} " + b + "\n";
  };
  {
    std::lock_guard<std::mutex> lk(mx.m);
    head("llmk_requests_total", "counter", "Requests by outcome (finish reason, or why they were refused).");
    for (const auto& [k, v] : mx.outcomes)
      o += "llmk_requests_total{outcome=\"" + k + "\"} " + std::to_string(v) + "\n";
    mx.ttft.print(o, "llmk_time_to_first_token_seconds", "Time from submission to a request's first token.");
    mx.tbt.print(o, "llmk_time_between_tokens_seconds", "Time between a request's consecutive tokens.");
    mx.ttft.print(o, "vllm:time_to_first_token_seconds", "Time from submission to a request's first token.", ml);
    mx.tbt.print(o, "vllm:inter_token_latency_seconds", "Time between a request's consecutive tokens.", ml);
    mx.e2e.print(o, "vllm:e2e_request_latency_seconds", "Time from submission to a request's last event.", ml);
  }
  metric("llmk_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", s.stats.prompt_tokens);
  metric("llmk_cached_prompt_tokens_total", "counter", "Prompt tokens taken from the prefix cache.",
         s.stats.cached_tokens);
  metric("llmk_generation_tokens_total", "counter", "Tokens generated.", s.stats.generated_tokens);
  metric("llmk_preemptions_total", "counter", "Sequences preempted for KV blocks.", s.stats.preemptions);
  metric("llmk_spec_drafted_tokens_total", "counter", "Speculative tokens drafted (n-gram lookup) and verified.",
         s.stats.drafted_tokens);
  metric("llmk_spec_accepted_tokens_total", "counter", "Drafted tokens kept (the sampler drew them).",
         s.stats.accepted_tokens);
  metric("llmk_queue_depth", "gauge", "Accepted requests not yet running.", s.queued);
  metric("llmk_running_sequences", "gauge", "Sequences holding KV blocks.", s.running);
  head("llmk_kv_blocks", "gauge",
       "KV cache blocks by state (used: held by a sequence; cached: free, kept for prefix reuse; free: empty).");
  o += "llmk_kv_blocks{state=\"used\"} " + std::to_string(s.kv.blocks_used) + "\n";
  o += "llmk_kv_blocks{state=\"cached\"} " + std::to_string(s.kv.blocks_cached) + "\n";
  o += "llmk_kv_blocks{state=\"free\"} " + std::to_string(s.kv.blocks_free) + "\n";
  // vLLM's names: waiting = accepted, not running (queued or preempted); usage = blocks held by a
  // sequence over all blocks (cached-but-free blocks are reusable, so they count as free);
  // prefix-cache queries and hits in prompt tokens, as vLLM counts them.
  vllm("vllm:num_requests_waiting", "gauge", "Requests waiting to be processed.", double(s.queued));
  vllm("vllm:num_requests_running", "gauge", "Requests running on the engine.", double(s.running));
  vllm("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage: 1 means 100 percent.",
       double(s.kv.blocks_used) / double(blocks));
  vllm("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in prompt tokens.",
       double(s.stats.prompt_tokens));
  vllm("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in prompt tokens.",
       double(s.stats.cached_tokens));
  vllm("vllm:prompt_tokens_total", "counter", "Prefill tokens processed.", double(s.stats.prompt_tokens));
  vllm("vllm:generation_tokens_total", "counter", "Generation tokens processed.", double(s.stats.generated_tokens));
  vllm("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.", double(s.stats.preemptions));
  head("vllm:cache_config_info", "gauge", "Information of the KV cache configuration.");
  o += "vllm:cache_config_info{block_size=\"" + std::to_string(ec.block_tokens) + "\",enable_prefix_caching=\"" +
       (ec.prefix_cache ? "True" : "False") + "\",num_gpu_blocks=\"" + std::to_string(blocks) + "\"} 1\n";
  return o;
}

}  // namespace llmk::cli
