// `llmk serve`: an OpenAI-compatible HTTP server (cpp-httplib, nlohmann-json) on the engine. The API,
// errors, metrics, health states and thread model are in docs/serving.md.
// HTTP threads parse and check a request, submit it to the AsyncEngine (whose one thread
// steps the engine) and turn its events into a JSON body or server-sent events; a client
// that goes away mid-stream cancels its request. It listens while the model loads (every route 503).
// SIGTERM drains: /health and new requests get 503, in-flight ones run up to --drain-timeout; then (or on
// SIGINT, or a second signal) the rest end with a final event (finish_reason "abort"), and it exits 0.
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "llmk/chat_template.hpp"
#include "model_cli.hpp"
#include "serve_chat.hpp"
#include "serve_metrics.hpp"
#include "structured_request.hpp"

namespace {
using namespace llmk;
using namespace llmk::cli;
using json = nlohmann::json;

// Choices of one request at most (prompts x n).
constexpr int64_t kMaxChoices = 64;
// Bodies larger than this get 413 before they are read.
constexpr size_t kMaxBodyBytes = size_t(4) << 20;
// While a stream waits for tokens, a comment line is sent this often, so a client
// that went away is noticed (and its request cancelled) even before the next token.
constexpr auto kKeepAlive = std::chrono::milliseconds(500);

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// An error the client caused (or a refusal): status, OpenAI-style body.
struct HttpError {
  int status;
  std::string message, type, param, code;
};

void send_error(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  json body = {{"error",
                {{"message", e.message},
                 {"type", e.type},
                 {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                 {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  res.set_content(dump(body), "application/json");
}

HttpError bad(const std::string& param, const std::string& message) {
  return {400, param.empty() ? message : param + ": " + message, "invalid_request_error", param, "invalid_value"};
}

std::string shown(const json& v) {
  std::string s = dump(v);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

const char* finish_reason(Finish f) {
  switch (f) {
    case Finish::eos:
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::cancelled: return "abort";
    case Finish::error: return "error";
    case Finish::running: break;
  }
  return "error";
}

constexpr const char* kKvType = "f16";

// /v1/models' "meta": the served model as a router or a user sees it. "quantization" is the storage
// type holding the most weight elements.
json model_meta(const LoadedModel& lm, const EngineConfig& ec, int64_t context) {
  std::map<std::string, int64_t> elems;
  int64_t params = 0, bytes = 0;
  for (const gguf::TensorInfo& t : lm.file.tensors()) {
    elems[gguf::ggml_type_name(t.type)] += t.n_elements;
    params += t.n_elements;
    bytes += t.n_bytes;
  }
  std::string quant = "none";
  int64_t most = -1;
  for (const auto& [name, n] : elems)
    if (n > most) most = n, quant = name;
  const ModelConfig& c = lm.model.config();
  return {{"architecture", arch_name(c.arch)},
          {"quantization", quant},
          {"context_length", context},
          {"n_ctx_train", c.n_ctx},
          {"n_vocab", c.n_vocab},
          {"n_embd", c.d_model},
          {"n_layer", c.n_layer},
          {"n_params", params},
          {"size_bytes", bytes},
          {"kv_type", kv_cli_name(ec)},
          {"kv_tokens", ec.kv_tokens},
          {"block_size", ec.block_tokens},
          {"max_seqs", ec.max_seqs}};
}

// What one HTTP request asks for, after every field was checked.
struct Job {
  bool chat = false, stream = false, include_usage = false;
  bool continuous_usage = false;  // stream_options.continuous_usage_stats: usage on every chunk
  size_t n = 1;                   // choices per prompt
  int32_t logprobs = -1;          // engine logprobs (-1 off)
  std::vector<Request> reqs;      // the choices: prompt p's choice j is reqs[p * n + j]
  std::vector<std::string> echo;  // [reqs] the prompt's text, put before the choice's (completions' echo)
  serve::ChatReplyOptions reply;  // chat: tool calls, reasoning
};

class Server {
 public:
  Server(std::string api_key, std::string name, const serve::ChatConfig& chat_cfg = {})
      : chat_cfg_(chat_cfg),
        api_key_(std::move(api_key)),
        name_(std::move(name)),
        created_(int64_t(std::time(nullptr))) {}

  // Loads the model and starts the engine (the routes answer 503 meanwhile), then opens the routes,
  // unless a signal came first.
  void load(const std::string& path, const EngineConfig& ec, int64_t max_queue, const std::string& chat_template) {
    auto lm = std::make_unique<LoadedModel>(path);
    try {  // a model without a known template still serves completions; its chat requests get the reason
      chat_ = chat_template_of(lm->tok, chat_template);
    } catch (const InvalidArgument& e) {
      if (!chat_template.empty()) throw;
      no_chat_ = e.what();
    }
    context_ = std::min<int64_t>(lm->model.config().n_ctx, ec.kv_tokens / ec.block_tokens * ec.block_tokens);
    model_meta_ = model_meta(*lm, ec, context_);
    auto ae = std::make_unique<AsyncEngine>(lm->model, &lm->tok, ec, max_queue);
    std::lock_guard<std::mutex> lk(phase_m_);
    if (phase_.load() != Phase::loading) return;  // a signal came first: nothing to serve
    lm_ = std::move(lm);
    ae_ = std::move(ae);
    loaded_.store(true);
    phase_.store(Phase::ready);
  }

  void routes(httplib::Server& http) {
    http.set_payload_max_length(kMaxBodyBytes);
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (const Phase ph = phase_.load(); ph != Phase::ready) {
        const bool loading = ph == Phase::loading;
        if (req.path == "/health") {
          res.status = 503;
          res.set_content(dump({{"status", loading ? "loading" : "draining"}}), "application/json");
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!loaded_.load() ||
            (req.path != "/metrics" && req.path != "/get_load")) {  // a draining server still reports
          res.set_header("Retry-After", "1");
          send_error(res, {503, loading ? "the model is loading" : "the server is shutting down", "server_error", "",
                           loading ? "loading" : "shutting_down"});
          metrics_.count(loading ? "loading" : "shutting_down");
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      if (!api_key_.empty() && req.path.rfind("/v1/", 0) == 0 &&
          req.get_header_value("Authorization") != "Bearer " + api_key_) {
        send_error(res, {401, "missing or wrong API key (send \"Authorization: Bearer KEY\")", "invalid_request_error",
                         "", "invalid_api_key"});
        metrics_.count("unauthorized");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty() || res.is_chunked_content_provider_) return;
      if (res.status == 404) {
        send_error(res, {404, "no route " + req.method + " " + req.path, "invalid_request_error", "", "not_found"});
        metrics_.count("not_found");
      } else if (res.status == 413) {
        send_error(res, {413, "request body over the limit of " + std::to_string(kMaxBodyBytes) + " bytes",
                         "invalid_request_error", "", "body_too_large"});
        metrics_.count("too_large");
      } else {
        send_error(res, {res.status, "bad HTTP request", "invalid_request_error", "", ""});
        metrics_.count("bad_http");
      }
    });
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, {500, what, "server_error", "", ""});
      metrics_.count("server_error");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump({{"status", "ok"}}), "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json m = {{"id", name_},        {"object", "model"},         {"created", created_},
                {"owned_by", "llmk"}, {"max_model_len", context_}, {"meta", model_meta_}};
      res.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(metrics_, ae_->status(), ae_->config(), name_), "text/plain; version=0.0.4");
    });
    http.Get("/get_load", [this](const httplib::Request&, httplib::Response& res) {  // for power-of-two routing
      res.set_content(dump({{"load", ae_->status().in_flight}}), "application/json");
    });
    http.Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res) { handle(req, res, false); });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { handle(req, res, true); });
    chat_routes(http);
  }

  bool stopping() const { return phase_.load() == Phase::draining; }
  // The listener ended by itself, or the model failed to load: the signal thread is woken to clean up.
  void fail_listener() { listener_failed_.store(true); }
  bool stopping_for_listener_failure() const { return listener_failed_.load(); }
  // The first signal: /health and new requests get 503 from now on.
  void drain() {
    std::lock_guard<std::mutex> lk(phase_m_);
    phase_.store(Phase::draining);
  }
  // True once every accepted response has been written out (or `wait` passed).
  bool drained(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lk(open_m_);
    return open_cv_.wait_for(lk, wait, [this] { return open_ == 0; });
  }
  // Ends the in-flight requests and waits for them. Returns once every response, streams included,
  // has been written out (or its client dropped it), so that stopping the listener afterwards cuts
  // no stream short of its final event.
  void shut_down() {
    drain();
    std::lock_guard<std::mutex> lk(phase_m_);  // load() publishes ae_ under it
    if (!ae_) return;
    ae_->stop();
    ae_->wait_idle();
    drained(kShutdownWait);
  }

 private:
  // --- request parsing ---
  static const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  static double number(const json& body, const char* name, double fallback, double lo, double hi,
                       bool lo_open = false) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) throw bad(name, "must be a number, got " + shown(*v));
    const double x = v->get<double>();
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
      char range[96];
      std::snprintf(range, sizeof range, "must be in %c%g, %g], got ", lo_open ? '(' : '[', lo, hi);
      throw bad(name, range + shown(*v));
    }
    return x;
  }
  static int64_t integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number_integer()) throw bad(name, "must be an integer, got " + shown(*v));
    const bool ok = v->is_number_unsigned()
                        ? v->get<uint64_t>() <= uint64_t(hi) && (lo <= 0 || v->get<uint64_t>() >= uint64_t(lo))
                        : v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
    if (!ok)
      throw bad(name, (hi == INT64_MAX ? "must be >= " + std::to_string(lo)
                                       : "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]") +
                          ", got " + shown(*v));
    return v->get<int64_t>();
  }
  static bool boolean(const json& body, const char* name, bool fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean()) throw bad(name, "must be true or false, got " + shown(*v));
    return v->get<bool>();
  }

  std::vector<int32_t> encode(const std::string& text, const std::string& param) const {
    std::vector<int32_t> ids = lm_->tok.encode(text, true, lm_->tok.add_bos());
    if (ids.empty()) throw bad(param, "encodes to no tokens");
    return ids;
  }

  std::vector<std::vector<int32_t>> prompts(const json& body) const {
    const json* p = field(body, "prompt");
    if (!p) throw bad("prompt", "is required");
    std::vector<std::vector<int32_t>> out;
    auto ids = [&](const json& a, const std::string& param) {
      std::vector<int32_t> t;
      for (const json& x : a) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= lm_->model.config().n_vocab)
          throw bad(param, "token ids must be integers in [0, " + std::to_string(lm_->model.config().n_vocab) +
                               "), got " + shown(x));
        t.push_back(int32_t(x.get<int64_t>()));
      }
      if (t.empty()) throw bad(param, "must not be empty");
      return t;
    };
    if (p->is_string()) {
      out.push_back(encode(p->get<std::string>(), "prompt"));
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
      out.push_back(ids(*p, "prompt"));
    } else if (p->is_array() && !p->empty()) {
      for (size_t i = 0; i < p->size(); ++i) {
        const json& e = (*p)[i];
        const std::string param = "prompt[" + std::to_string(i) + "]";
        if (e.is_string()) out.push_back(encode(e.get<std::string>(), param));
        else if (e.is_array()) out.push_back(ids(e, param));
        else throw bad(param, "must be a string or a list of token ids, got " + shown(e));
      }
    } else {
      throw bad("prompt", "must be a string, a list of strings, or token ids, got " + shown(*p));
    }
    if (out.size() > 64) throw bad("prompt", "at most 64 prompts per request, got " + std::to_string(out.size()));
    return out;
  }

  std::vector<int32_t> chat_prompt(const std::string& raw, Job& job) const {
    return encode_chat_prompt(lm_->tok, chat_text(raw, &job.reply));
  }
  std::string chat_text(const std::string& raw, serve::ChatReplyOptions* reply) const {
    if (!chat_) {
      const json body = json::parse(raw, nullptr, false);
      if (!body.is_object() || !field(body, "messages")) throw bad("messages", "is required");
      throw bad("messages", no_chat_);
    }
    try {
      return serve::render_chat_request(raw, *chat_, chat_render_options(lm_->tok), chat_cfg_, reply);
    } catch (const serve::ChatRequestError& e) {
      throw bad(e.param, e.message);
    }
  }

  // POST /apply-template (the prompt a chat request renders), /tokenize, /detokenize: as
  // llama-server names them.
  void chat_routes(httplib::Server& http) {
    auto body_of = [](const httplib::Request& req) {
      json body = json::parse(req.body, nullptr, false);
      if (!body.is_object()) throw bad("", "the body must be a JSON object");
      return body;
    };
    auto guarded = [this](auto f) {
      return [this, f](const httplib::Request& req, httplib::Response& res) {
        try {
          f(req, res);
        } catch (const HttpError& e) {
          metrics_.count("invalid");
          send_error(res, e);
        } catch (const InvalidArgument& e) {
          metrics_.count("invalid");
          send_error(res, bad("", e.what()));
        }
      };
    };
    http.Post("/apply-template", guarded([this, body_of](const httplib::Request& req, httplib::Response& res) {
                body_of(req);
                serve::ChatReplyOptions reply;
                res.set_content(dump({{"prompt", chat_text(req.body, &reply)}}), "application/json");
              }));
    http.Post("/tokenize", guarded([this, body_of](const httplib::Request& req, httplib::Response& res) {
                const json body = body_of(req);
                const json* c = field(body, "content");
                if (!c || !c->is_string()) throw bad("content", "must be a string");
                const bool special = boolean(body, "add_special", false);
                const bool parse_special = boolean(body, "parse_special", true);
                const std::vector<int32_t> ids = lm_->tok.encode(c->get<std::string>(), parse_special,
                                                                 special && lm_->tok.add_bos(),
                                                                 special && lm_->tok.add_eos());
                json toks = json::array();
                if (boolean(body, "with_pieces", false)) {
                  for (int32_t id : ids) toks.push_back({{"id", id}, {"piece", lm_->tok.token_bytes(id)}});
                } else {
                  toks = ids;
                }
                res.set_content(dump({{"tokens", toks}}), "application/json");
              }));
    http.Post("/detokenize", guarded([this, body_of](const httplib::Request& req, httplib::Response& res) {
                const json body = body_of(req);
                const json* t = field(body, "tokens");
                if (!t || !t->is_array()) throw bad("tokens", "must be an array of token ids");
                std::vector<int32_t> ids;
                for (size_t i = 0; i < t->size(); ++i) {
                  const json& v = (*t)[i];
                  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= lm_->tok.n_vocab())
                    throw bad("tokens[" + std::to_string(i) + "]",
                              "must be a token id in [0, " + std::to_string(lm_->tok.n_vocab()) + "), got " + shown(v));
                  ids.push_back(int32_t(v.get<int64_t>()));
                }
                res.set_content(dump({{"content", lm_->tok.decode(ids, false)}}), "application/json");
              }));
  }

  Job parse(const std::string& raw, bool chat) const {
    json body;
    try {
      body = json::parse(raw);
    } catch (const json::parse_error& e) {
      throw bad("", std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw bad("", "the body must be a JSON object, got " + shown(body));
    Job job;
    job.chat = chat;
    job.stream = boolean(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
      if (!so->is_object()) throw bad("stream_options", "must be an object, got " + shown(*so));
      job.include_usage = boolean(*so, "include_usage", false);
      job.continuous_usage = boolean(*so, "continuous_usage_stats", false);
    }
    const int64_t n = integer(body, "n", 1, 1, kMaxChoices);
    job.n = size_t(n);
    bool echo = false;
    if (chat) {
      if (boolean(body, "logprobs", false)) job.logprobs = int32_t(integer(body, "top_logprobs", 0, 0, kMaxLogprobs));
      else if (field(body, "top_logprobs")) throw bad("top_logprobs", "needs \"logprobs\": true");
    } else {
      job.logprobs = int32_t(integer(body, "logprobs", -1, 0, kMaxLogprobs));
      echo = boolean(body, "echo", false);
      if (echo && job.logprobs >= 0) throw bad("echo", "with logprobs is not supported (no prompt log-probabilities)");
      if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
        throw bad("suffix", "is not supported");
      if (integer(body, "best_of", 1, 1, 1) != 1) throw bad("best_of", "only 1 is supported");
    }
    if (const json* lb = field(body, "logit_bias"); lb && !lb->empty()) throw bad("logit_bias", "is not supported");
    if (number(body, "frequency_penalty", 0, -2, 2) != 0)
      throw bad("frequency_penalty", "is not supported (0 only); presence_penalty and repetition_penalty are");
    Request base;
    base.sampling.temperature = float(number(body, "temperature", 1.0, 0, 2));
    base.sampling.top_p = float(number(body, "top_p", 1.0, 0, 1, true));
    const int64_t top_k = integer(body, "top_k", 0, -1, INT32_MAX);
    base.sampling.top_k = int32_t(std::max<int64_t>(top_k, 0));
    base.sampling.min_p = float(number(body, "min_p", 0, 0, 1));
    if (base.sampling.min_p >= 1) throw bad("min_p", "must be < 1, got " + shown(body["min_p"]));
    base.sampling.presence_penalty = float(number(body, "presence_penalty", 0, -2, 2));
    base.sampling.repetition_penalty = float(number(body, "repetition_penalty", 1, 0, 10, true));
    if (base.sampling.presence_penalty != 0 && base.sampling.repetition_penalty != 1)
      throw bad("presence_penalty", "cannot be combined with repetition_penalty (they would see different tokens)");
    if (field(body, "seed")) {
      base.seed = uint64_t(integer(body, "seed", 0, INT64_MIN, INT64_MAX));
    } else {
      std::random_device rd;
      base.seed = (uint64_t(rd()) << 32) | rd();
    }
    if (const json* st = field(body, "stop")) {
      auto add = [&](const json& s, const std::string& param) {
        if (!s.is_string() || s.get<std::string>().empty())
          throw bad(param, "must be a non-empty string, got " + shown(s));
        base.stop.push_back(s.get<std::string>());
      };
      if (st->is_array()) {
        if (st->size() > 16) throw bad("stop", "at most 16 strings, got " + std::to_string(st->size()));
        for (size_t i = 0; i < st->size(); ++i) add((*st)[i], "stop[" + std::to_string(i) + "]");
      } else {
        add(*st, "stop");
      }
    }
    base.logprobs = job.logprobs;
    base.ignore_eos = boolean(body, "ignore_eos", false);  // vLLM's extension
    if (const json* sp = field(body, "spec")) {            // llmk's extension: speculative decoding for this request
      if (!sp->is_string() || (*sp != "off" && *sp != "ngram"))
        throw bad("spec", "must be \"off\" or \"ngram\", got " + shown(*sp));
      base.spec = parse_spec_mode(sp->get<std::string>());
    }
    try {
      base.constraint = structured_output(body, lm_->tok);
    } catch (const StructuredRequestError& e) {
      throw bad(e.param, e.message);
    }
    const char* mt = chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    const bool has_max = field(body, mt) != nullptr;
    const int64_t max_tokens = integer(body, mt, chat ? 0 : 16, 1, INT64_MAX);
    std::vector<std::vector<int32_t>> ps;
    if (chat) ps.push_back(chat_prompt(raw, job));
    else ps = prompts(body);
    if (chat && !job.reply.forced_tools.empty()) {
      if (base.constraint)
        throw bad("tool_choice", "cannot be combined with response_format or another structured-output field");
      try {
        base.constraint = tool_call_output(job.reply.format, job.reply.forced_tools, job.reply.parallel,
                                           job.reply.split_reasoning, lm_->tok);
      } catch (const StructuredRequestError& e) {
        throw bad(e.param, e.message);
      }
    }
    if (chat && job.reply.buffered() && job.logprobs >= 0)
      throw bad("logprobs", "cannot be combined with tools or --reasoning-format deepseek (the reply is parsed)");
    if (int64_t(ps.size()) * n > kMaxChoices)
      throw bad("n", "prompts x n must be at most " + std::to_string(kMaxChoices) + ", got " +
                         std::to_string(ps.size()) + " x " + std::to_string(n));
    // echo: a prompt given as text comes back as sent; token ids as their decoded text
    const json* pj = chat ? nullptr : field(body, "prompt");
    auto echo_text = [&](size_t i) -> std::string {
      if (!echo) return {};
      const json& e = pj->is_array() && !(*pj)[0].is_number() ? (*pj)[i] : *pj;
      return e.is_string() ? e.get<std::string>() : lm_->tok.decode(ps[i]);
    };
    for (size_t pi = 0; pi < ps.size(); ++pi) {
      std::vector<int32_t>& p = ps[pi];
      const int64_t np = int64_t(p.size());
      if (np >= context_)
        throw bad(chat ? "messages" : "prompt", "the prompt has " + std::to_string(np) + " tokens; the context holds " +
                                                    std::to_string(context_) + " (prompt + at least 1 new token)");
      Request r = base;
      r.max_tokens = has_max || !chat ? max_tokens : context_ - np;
      if (r.max_tokens > context_ - np)
        throw bad(mt, "the prompt (" + std::to_string(np) + " tokens) + " + mt + " (" + std::to_string(r.max_tokens) +
                          ") exceed the context of " + std::to_string(context_) + " tokens");
      const std::string text = echo_text(pi);
      r.prompt = std::move(p);
      for (int64_t j = 0; j < n; ++j) {  // choice j draws with seed + j: choice 0 is the n = 1 result
        Request rj = r;
        rj.seed = r.seed + uint64_t(j);
        job.reqs.push_back(std::move(rj));
        job.echo.push_back(text);
      }
    }
    return job;
  }

  // --- responses ---
  json logprobs_json(bool chat, const std::vector<int32_t>& toks, const std::vector<float>& lps,
                     const std::vector<std::vector<TokenLogprob>>& top, size_t text_offset) const {
    auto bytes_of = [](const std::string& s) {
      json b = json::array();
      for (unsigned char c : s) b.push_back(int(c));
      return b;
    };
    if (chat) {
      json content = json::array();
      for (size_t i = 0; i < toks.size(); ++i) {
        const std::string s = lm_->tok.token_bytes(toks[i]);
        json alts = json::array();
        for (const TokenLogprob& a : top[i]) {
          const std::string as = lm_->tok.token_bytes(a.token);
          alts.push_back({{"token", as}, {"logprob", a.logprob}, {"bytes", bytes_of(as)}});
        }
        content.push_back({{"token", s}, {"logprob", lps[i]}, {"bytes", bytes_of(s)}, {"top_logprobs", alts}});
      }
      return {{"content", content}};
    }
    json tokens = json::array(), token_lps = json::array(), tops = json::array(), offs = json::array();
    for (size_t i = 0; i < toks.size(); ++i) {
      const std::string s = lm_->tok.token_bytes(toks[i]);
      tokens.push_back(s);
      token_lps.push_back(lps[i]);
      json alt = json::object();
      for (const TokenLogprob& a : top[i]) alt[lm_->tok.token_bytes(a.token)] = a.logprob;
      tops.push_back(alt);
      offs.push_back(text_offset);
      text_offset += s.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offs}};
  }

  static json usage(int64_t prompt, int64_t cached, int64_t completion) {
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  // Per choice: the stream, its token counts, and the timing the histograms take.
  struct Choice {
    std::shared_ptr<RequestStream> st;
    std::chrono::steady_clock::time_point last;  // submission, then the latest token
    std::chrono::steady_clock::time_point start = last;
    bool first = true, done = false;
    int64_t generated = 0;
    size_t text_bytes = 0;
    std::string reply;  // a buffered chat reply so far
    std::optional<Output> out;
  };
  // One HTTP request's state; it lives until httplib has written the whole response.
  struct Live {
    explicit Live(Server* s) : srv(s) {
      std::lock_guard<std::mutex> lk(srv->open_m_);
      ++srv->open_;
    }
    Live(const Live&) = delete;
    Live& operator=(const Live&) = delete;
    Server* srv;
    Job job;
    std::string id;
    int64_t created;
    std::vector<Choice> choices;
    bool sent_role = false, sent_done = false;
    ~Live() {
      for (Choice& c : choices)
        if (!c.done) {  // the client went away: free its blocks
          srv->ae_->cancel(c.st->id());
          srv->metrics_.count("cancelled");
        }
      std::lock_guard<std::mutex> lk(srv->open_m_);
      if (--srv->open_ == 0) srv->open_cv_.notify_all();
    }
  };

  void observe(Choice& c, const std::vector<Event>& evs) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lk(metrics_.m);
    for (const Event& e : evs) {
      if (e.token < 0) continue;
      ++c.generated;
      const double dt = std::chrono::duration<double>(now - c.last).count();
      (c.first ? metrics_.ttft : metrics_.tbt).observe(dt);
      c.first = false;
      c.last = now;
    }
  }

  void finished(Choice& c) {
    c.done = true;
    {
      std::lock_guard<std::mutex> lk(metrics_.m);
      metrics_.e2e.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count());
    }
    c.out = c.st->output();
    metrics_.count(c.out ? (c.out->finish == Finish::cancelled ? "cancelled" : finish_reason(c.out->finish)) : "error");
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    auto live = std::make_shared<Live>(this);
    try {
      live->job = parse(req.body, chat);
      for (Request& r : live->job.reqs) {
        AsyncEngine::Refused why;
        std::shared_ptr<RequestStream> st = ae_->submit(r, &why);
        if (!st) {
          res.set_header("Retry-After", "1");
          throw HttpError{503,
                          why == AsyncEngine::Refused::stopped ? "the server is shutting down"
                                                               : "the request queue is full; retry later",
                          "server_error", "", why == AsyncEngine::Refused::stopped ? "shutting_down" : "queue_full"};
        }
        live->choices.push_back(Choice{st, std::chrono::steady_clock::now()});
      }
    } catch (const HttpError& e) {
      // the ones already accepted are cancelled by ~Live
      metrics_.count(e.status == 503 ? "queue_full" : "invalid");
      send_error(res, e);
      return;
    } catch (const InvalidArgument& e) {
      metrics_.count("invalid");
      send_error(res, bad("", e.what()));
      return;
    }
    live->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_.fetch_add(1));
    live->created = int64_t(std::time(nullptr));
    if (live->job.stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider("text/event-stream", [this, live](size_t, httplib::DataSink& sink) {
        return stream_some(*live, sink);
      });
      return;
    }
    json choices = json::array();
    int64_t prompt = 0, cached = 0, completion = 0;
    for (size_t i = 0; i < live->choices.size(); ++i) {
      Choice& c = live->choices[i];
      while (!c.done) {
        const std::vector<Event> evs = c.st->wait(std::chrono::milliseconds(1000));
        observe(c, evs);
        if (c.st->finished()) finished(c);
      }
      const Output& o = *c.out;
      if (i % live->job.n == 0) {  // a prompt counts once, however many choices it has (OpenAI's rule)
        prompt += o.prompt_tokens;
        cached += o.cached_tokens;
      }
      completion += int64_t(o.tokens.size());
      json ch = {{"index", i}, {"finish_reason", finish_reason(o.finish)}};
      json lp = live->job.logprobs >= 0 ? logprobs_json(chat, o.tokens, o.logprobs, o.top, 0) : json(nullptr);
      if (chat) {
        std::string fr;
        ch["message"] = serve::reply_message(o.text, live->job.reply, finish_reason(o.finish),
                                             live->id + "_" + std::to_string(i), &fr);
        ch["finish_reason"] = fr;
      } else ch["text"] = live->job.echo[i] + o.text;
      ch["logprobs"] = lp;
      choices.push_back(ch);
    }
    json body = {{"id", live->id},           {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", live->created}, {"model", name_},
                 {"choices", choices},       {"usage", usage(prompt, cached, completion)}};
    res.set_content(dump(body), "application/json");
  }

  // Server-sent events: writes what the choices have produced; false ends the response
  // (the client went away: ~Live cancels what is unfinished).
  bool stream_some(Live& l, httplib::DataSink& sink) {
    auto send = [&](const json& chunk) {
      const std::string s = "data: " + dump(chunk) + "\n\n";
      return sink.write(s.data(), s.size());
    };
    const bool chat = l.job.chat;
    auto chunk = [&](json choices) {
      json c = {{"id", l.id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", l.created},
                {"model", name_},
                {"choices", std::move(choices)}};
      if (l.job.continuous_usage) {
        int64_t prompt = 0, completion = 0;
        for (size_t i = 0; i < l.choices.size(); ++i) {
          prompt += i % l.job.n == 0 ? int64_t(l.job.reqs[i].prompt.size()) : 0;
          completion += l.choices[i].generated;
        }
        c["usage"] = {{"prompt_tokens", prompt},
                      {"completion_tokens", completion},
                      {"total_tokens", prompt + completion}};
      } else if (l.job.include_usage) {
        c["usage"] = nullptr;
      }
      return c;
    };
    if (!chat && !l.sent_role) {  // completions' echo: each choice's prompt text first
      l.sent_role = true;
      for (size_t i = 0; i < l.choices.size(); ++i)
        if (!l.job.echo[i].empty() &&
            !send(chunk(json::array(
                {{{"index", i}, {"text", l.job.echo[i]}, {"logprobs", nullptr}, {"finish_reason", nullptr}}}))))
          return false;
    }
    if (chat && !l.sent_role) {
      l.sent_role = true;
      json d = json::array();
      for (size_t i = 0; i < l.choices.size(); ++i)
        d.push_back({{"index", i},
                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}});
      if (!send(chunk(d))) return false;
    }
    bool all_done = true, wrote = false;
    for (size_t i = 0; i < l.choices.size(); ++i) {
      Choice& c = l.choices[i];
      if (c.done) continue;
      const std::vector<Event> evs = c.st->wait(l.choices.size() == 1 ? kKeepAlive : std::chrono::milliseconds(5));
      observe(c, evs);
      for (const Event& e : evs) {
        const bool last = e.finish != Finish::running;
        if (last) finished(c);
        if (chat && l.job.reply.buffered()) {  // parsed whole at its end, then sent as deltas
          c.reply += e.text;
          if (!last) continue;
          std::string fr;
          const std::string id = l.id + "_" + std::to_string(i);
          for (json& d : serve::reply_deltas(c.reply, l.job.reply, finish_reason(e.finish), id, &fr))
            if (!send(chunk(
                    json::array({{{"index", i}, {"delta", d}, {"logprobs", nullptr}, {"finish_reason", nullptr}}}))))
              return false;
          if (!send(chunk(json::array(
                  {{{"index", i}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", fr}}}))))
            return false;
          wrote = true;
          continue;
        }
        if (e.text.empty() && !last && l.job.logprobs < 0) continue;
        json ch = {{"index", i}, {"finish_reason", last ? json(finish_reason(e.finish)) : json(nullptr)}};
        json lp = nullptr;
        if (l.job.logprobs >= 0 && e.token >= 0)
          lp = logprobs_json(chat, {e.token}, {e.logprob}, {e.top}, c.text_bytes);
        c.text_bytes += e.text.size();
        if (chat) ch["delta"] = e.text.empty() ? json::object() : json{{"content", e.text}};
        else ch["text"] = e.text;
        ch["logprobs"] = lp;
        if (!send(chunk(json::array({ch})))) return false;
        wrote = true;
      }
      all_done &= c.done;
    }
    if (!all_done) {
      if (!wrote) {
        static const char kPing[] = ": keep-alive\n\n";
        if (!sink.write(kPing, sizeof kPing - 1)) return false;
      }
      return true;
    }
    if (l.job.include_usage) {
      int64_t prompt = 0, cached = 0, completion = 0;
      for (size_t i = 0; i < l.choices.size(); ++i) {
        const Choice& c = l.choices[i];
        prompt += c.out && i % l.job.n == 0 ? c.out->prompt_tokens : 0;
        cached += c.out && i % l.job.n == 0 ? c.out->cached_tokens : 0;
        completion += c.out ? int64_t(c.out->tokens.size()) : 0;
      }
      json u = chunk(json::array());
      u["usage"] = usage(prompt, cached, completion);
      if (!send(u)) return false;
    }
    static const char kDone[] = "data: [DONE]\n\n";
    sink.write(kDone, sizeof kDone - 1);
    sink.done();
    return true;
  }

  // Set by load(), before loaded_ and phase_ say so; read only after them.
  std::unique_ptr<LoadedModel> lm_;
  std::unique_ptr<AsyncEngine> ae_;
  int64_t context_ = 0;
  json model_meta_;
  std::optional<ChatTemplate> chat_;
  std::string no_chat_;  // why chat_ is empty
  serve::ChatConfig chat_cfg_;
  const std::string api_key_, name_;
  const int64_t created_;
  enum class Phase { loading, ready, draining };
  std::mutex phase_m_;  // load() and shut_down() exclude each other
  std::atomic<Phase> phase_{Phase::loading};
  std::atomic<bool> loaded_{false}, listener_failed_{false};
  std::atomic<int64_t> next_id_{0};
  Metrics metrics_;
  // Responses not yet written out (Live objects); shut_down waits for them, at most kShutdownWait
  // (over the 10 s write timeout, so a stalled client cannot hold the exit longer).
  static constexpr std::chrono::seconds kShutdownWait{12};
  std::mutex open_m_;
  std::condition_variable open_cv_;
  int64_t open_ = 0;
};

// 127.0.0.0/8, ::1 or localhost.
bool loopback(const std::string& h) {
  if (h == "localhost" || h == "::1") return true;
  unsigned a, b, c, d;
  char tail;
  return std::sscanf(h.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 && c < 256 &&
         d < 256;
}

int run_serve(Args& args) {
  // Before any thread starts: SIGINT / SIGTERM are taken by sigwait() on one thread only.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  args.no_positionals("serve", "use --model PATH");
  const std::string model = model_arg(args);
  const std::string host = args.get("host");
  const int64_t port = args.get_int("port");
  EngineConfig ec;
  kv_args(args, kKvType, ec);
  ec.max_seqs = args.get_int("max-seqs");
  ec.kv_tokens = args.get_int("kv-tokens");
  ec.prefix_cache = !args.flag("no-prefix-cache");
  ec.spec.mode = parse_spec_mode(args.get("spec"), "--spec");
  const int64_t max_queue = args.get_int("max-queue");
  const std::string api_key = args.get("api-key");
  const std::string chat_template = args.get("chat-template");
  serve::ChatConfig chat_cfg;
  if (args.has("tool-parser")) chat_cfg.tool_format = tool_format_from_name(args.get("tool-parser"));
  const std::string reasoning = args.get("reasoning-format");
  LLMK_CHECK_ARG(reasoning == "deepseek" || reasoning == "none", "serve", "--reasoning-format", reasoning,
                 "must be none or deepseek");
  chat_cfg.split_reasoning = reasoning == "deepseek";
  const auto drain_timeout = std::chrono::milliseconds(int64_t(args.get_double("drain-timeout") * 1000));
  LLMK_CHECK_ARG(!args.has("api-key") || !api_key.empty(), "serve", "--api-key", "\"\"", "must not be empty");
  threads_arg(args);
  args.finish();

  const std::string path = model_path(model);
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  Server srv(api_key, name, chat_cfg);
  httplib::Server http;
  const size_t pool = size_t(ec.max_seqs + std::min<int64_t>(max_queue, 1024) + 8);
  http.new_task_queue = [pool] { return new httplib::ThreadPool(pool); };
  http.set_keep_alive_timeout(1);
  http.set_read_timeout(10);
  http.set_write_timeout(10);
  srv.routes(http);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server take the same port
  // silently and splits the connections between the two.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, int(port)) ? int(port) : -1);
  if (bound <= 0) throw RuntimeError("serve: cannot listen on " + host + ":" + std::to_string(port));
  const std::string url = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                          std::to_string(bound);
  if (!loopback(host) && api_key.empty())
    std::fprintf(stderr,
                 "serve: warning: listening on %s without --api-key: anyone who can reach %s can use the model\n",
                 host.c_str(), url.c_str());
  std::fprintf(stderr, "serve: listening on %s; loading %s (/health: 503 until ready)\n", url.c_str(), path.c_str());
  std::thread listener([&] { http.listen_after_bind(); });
  std::thread sig([&] {
    int s = 0;
    sigwait(&sigs, &s);
    srv.drain();
    if (s == SIGTERM && drain_timeout.count() > 0 && !srv.stopping_for_listener_failure()) {
      std::fprintf(stderr, "serve: SIGTERM: draining (up to %.3g s)\n", double(drain_timeout.count()) / 1000);
      const auto end = std::chrono::steady_clock::now() + drain_timeout;
      const timespec tick{0, 50 * 1000 * 1000};
      // a second signal ends the drain at once
      while (!srv.drained(std::chrono::milliseconds(0)) && std::chrono::steady_clock::now() < end &&
             sigtimedwait(&sigs, nullptr, &tick) < 0) {
      }
    }
    std::fprintf(stderr, "serve: %s: ending in-flight requests\n", s == SIGINT ? "SIGINT" : "SIGTERM");
    srv.shut_down();
    http.stop();
  });
  try {
    srv.load(path, ec, max_queue, chat_template);
  } catch (...) {
    srv.fail_listener();
    pthread_kill(sig.native_handle(), SIGTERM);
    sig.join();
    listener.join();
    throw;
  }
  if (!srv.stopping()) {
    std::printf("llmk serve: %s on %s (%s KV, %lld tokens, %lld sequences)\n", name.c_str(), url.c_str(),
                kv_cli_name(ec).c_str(), (long long)ec.kv_tokens, (long long)ec.max_seqs);
    std::fflush(stdout);
  }
  listener.join();
  if (!srv.stopping()) {  // the listener failed: wake the signal thread
    srv.fail_listener();
    pthread_kill(sig.native_handle(), SIGTERM);
  }
  sig.join();
  return 0;
}

}  // namespace
LLMK_COMMAND(
    "serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /health, /metrics)", run_serve,
    options(model_option(),
            text("host", "ADDR",
                 "the address to listen on (0.0.0.0 or :: for every interface; a warning without --api-key)")
                .def("127.0.0.1"),
            integer("port", "N", "the port (0: any free one)").range(0, 65535).def("8080"), kv_options(kKvType),
            integer("kv-tokens", "N", "KV cache size in tokens, shared by every request")
                .range(16, int64_t(1) << 24)
                .def("16384"),
            integer("max-seqs", "N", "requests decoded together at most").range(1, 4096).def("32"),
            integer("max-queue", "N", "requests waiting at most; more get 503").range(1, 1 << 20).def("256"),
            text("api-key", "KEY", "the Bearer token every request must carry").shown_default("none: no key"),
            text("chat-template", "NAME|FILE", "a built-in chat template (chatml, gemma3) or a Jinja file")
                .shown_default("the model's own"),
            text("tool-parser", "NAME", "the tool-call format of replies (hermes, llama3, mistral, deepseek-r1)")
                .shown_default("detected from the template"),
            text("reasoning-format", "NAME",
                 "deepseek: <think>...</think> goes to reasoning_content; none: kept in content")
                .def("deepseek"),
            number("drain-timeout", "S", "on SIGTERM, let in-flight requests finish for up to S seconds")
                .range(0.0, 3600.0)
                .def("0"),
            flag("no-prefix-cache", "run every prompt in full"),
            text("spec", "MODE",
                 "speculative decoding, off or ngram (drafts from the request's own text; the output is the "
                 "same bits either way; a request's \"spec\" field overrides it)")
                .def("ngram"),
            threads_option()));
