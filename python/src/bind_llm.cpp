// Python bindings of a loaded model and the engine (llmk/engine.hpp): _LLM holds
// the GGUF file, the Model and Tokenizer, and an AsyncEngine whose thread steps
// the engine; submit() returns a _Stream (RequestStream) whose wait() blocks with
// the GIL released. python/llmk/llm.py checks the arguments and waits in short
// slices, so Ctrl-C lands between them and cancels the call's requests.
// logits() runs a second Model over the same mapped weights (the engine
// thread's Model has its own scratch), one call at a time under a mutex.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "llmk/chat_template.hpp"
#include "llmk/engine.hpp"
#include "llmk/gguf.hpp"
#include "llmk/grammar.hpp"
#include "llmk/jinja.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk::py {
namespace {

// Requests wait in the engine's own queue (max_seqs run at once); this bound is never the limit.
constexpr int64_t kMaxQueue = int64_t(1) << 40;

struct PyLLM {
  gguf::File file;
  Model model, scorer;  // the engine's; logits()'
  Tokenizer tok;
  EngineConfig ec;
  std::mutex score_mu, engine_mu;  // scorer's scratch; replacing a stopped engine
  std::unique_ptr<AsyncEngine> eng;
  std::mutex grammar_mu;                    // vocab
  std::shared_ptr<const TokenVocab> vocab;  // the token trie, built at the first constrained request
  GrammarCache grammars;

  PyLLM(const std::string& path, const EngineConfig& c)
      : file(gguf::File::open(path)),
        model(Model::from_gguf(file)),
        scorer(Model::from_gguf(file)),
        tok(Tokenizer::from_gguf(file)),
        ec(c) {}

  // Structured output: kind "json_schema", "json_object", "regex", "gbnf" ("" = none), compiled once per text.
  std::shared_ptr<const Constraint> constraint(const std::string& kind, const std::string& text) {
    if (kind.empty()) return nullptr;
    std::shared_ptr<const Grammar> g = grammars.get(kind, text, [&] {
      if (kind == "json_schema") return grammar_from_json_schema(text);
      if (kind == "json_object") return grammar_json_object();
      if (kind == "regex") return grammar_from_regex(text);
      if (kind == "gbnf") return grammar_from_gbnf(text);
      throw InvalidArgument("llmk.LLM: unknown grammar kind \"" + kind + "\"");
    });
    std::lock_guard<std::mutex> lk(grammar_mu);
    if (!vocab) vocab = TokenVocab::of(tok);
    return std::make_shared<GrammarConstraint>(g, vocab);
  }

  // The request's stream. An engine stopped by a failed step (it ended every request
  // with an error) is replaced, so the LLM stays usable.
  std::shared_ptr<RequestStream> submit(const Request& r) {
    std::lock_guard<std::mutex> lk(engine_mu);
    for (int attempt = 0;; ++attempt) {
      AsyncEngine::Refused why = AsyncEngine::Refused::none;
      std::shared_ptr<RequestStream> s = eng->submit(r, &why);
      if (s) return s;
      if (attempt > 0 || why != AsyncEngine::Refused::stopped)
        throw RuntimeError("llmk.LLM: the engine refused a request");
      eng.reset();  // joins the stopped thread
      eng = std::make_unique<AsyncEngine>(model, &tok, ec, kMaxQueue);
    }
  }
};

nb::bytes as_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

nb::list top_list(const std::vector<TokenLogprob>& top) {
  nb::list l;
  for (const TokenLogprob& t : top) l.append(nb::make_tuple(t.token, t.logprob));
  return l;
}

}  // namespace
}  // namespace llmk::py

LLMK_PY_BINDINGS(llm) {
  using namespace llmk;
  using namespace llmk::py;
  namespace nb = nanobind;
  m.def("default_model_path", &gguf::default_model_path);
  m.def(
      "resolve_model",
      [](const std::string& spec) {
        nb::gil_scoped_release r;  // a model may be downloaded
        return gguf::resolve_model(spec);
      },
      nb::arg("spec"));
  // A chat template (Jinja text, or a name when name != "") applied to (role, content) pairs:
  // (the template's name, the prompt text).
  m.def(
      "render_chat_template",
      [](const std::string& jinja, const std::string& name, const std::string& messages_json,
         bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token, int64_t now,
         const std::string& tools_json, const std::string& kwargs_json) {
        const ChatTemplate t = name.empty() ? ChatTemplate::from_jinja(jinja) : ChatTemplate::from_name(name);
        ChatRenderOptions o{add_generation_prompt, bos_token, eos_token, std::time_t(now), tools_json, kwargs_json};
        return std::make_pair(t.name(), as_bytes(t.render_json(messages_json, o)));
      },
      nb::arg("template"), nb::arg("name"), nb::arg("messages_json"), nb::arg("add_generation_prompt"),
      nb::arg("bos_token"), nb::arg("eos_token"), nb::arg("now"), nb::arg("tools_json") = "",
      nb::arg("kwargs_json") = "");
  // The Jinja interpreter itself (llmk/jinja.hpp): a parsed template; render(context_json,
  // now) renders it with the variables of a JSON object, `now` being what strftime_now formats.
  nb::class_<jinja::Template>(m, "JinjaTemplate")
      .def("__init__", [](jinja::Template* t,
                          const std::string& source) { new (t) jinja::Template(jinja::Template::parse(source)); })
      .def(
          "render",
          [](const jinja::Template& t, const std::string& context_json, int64_t now) {
            jinja::RenderOptions o;
            o.now = std::time_t(now);
            return as_bytes(t.render(context_json, o));
          },
          nb::arg("context_json"), nb::arg("now"));
  m.def("chat_template_source",
        [](const std::string& name) { return std::string(ChatTemplate::builtin_source(name)); });
  // A GGUF file's tokenizer.chat_template, "" when it has none.
  m.def("gguf_chat_template", [](const std::string& path) {
    const gguf::File f = gguf::File::open(path);
    return f.has("tokenizer.chat_template") ? std::string(f.get_string("tokenizer.chat_template")) : std::string();
  });
  m.def("chat_template_names", [] { return ChatTemplate::names(); });
  m.def("known_models", [] {
    nb::list out;
    for (const gguf::KnownModel& k : gguf::known_models()) out.append(nb::make_tuple(k.name, k.file));
    return out;
  });

  // One request: wait(ms) returns its new events as (token, UTF-8 bytes, finish name,
  // logprob, [(token, logprob), ...]) tuples, blocking with the GIL released until one comes,
  // the request ends or `ms` pass; output() is (tokens, UTF-8 bytes, finish name,
  // prompt_tokens, cached_tokens, logprobs, tops) once it has ended, else None.
  nb::class_<RequestStream>(m, "_Stream")
      .def_prop_ro("id", &RequestStream::id)
      .def("wait",
           [](RequestStream& s, int64_t ms) {
             std::vector<Event> evs;
             {
               nb::gil_scoped_release r;
               evs = s.wait(std::chrono::milliseconds(ms));
             }
             nb::list out;
             for (const Event& e : evs)
               out.append(nb::make_tuple(e.token, as_bytes(e.text), finish_name(e.finish), e.logprob, top_list(e.top)));
             return out;
           })
      .def("finished", &RequestStream::finished)
      .def("output", [](const RequestStream& s) -> nb::object {
        const std::optional<Output> o = s.output();
        if (!o) return nb::none();
        nb::list tops;
        for (const auto& t : o->top) tops.append(top_list(t));
        return nb::make_tuple(o->tokens, as_bytes(o->text), finish_name(o->finish), o->prompt_tokens, o->cached_tokens,
                              o->logprobs, tops);
      });

  nb::class_<PyLLM>(m, "_LLM")
      .def(
          "__init__",
          [](PyLLM* self, const std::string& path, const std::string& kv_type, std::optional<std::string> kv_v_type,
             bool kv_rotate, int64_t max_seqs, int64_t kv_tokens, const std::string& spec) {
            EngineConfig ec;
            ec.spec.mode = parse_spec_mode(spec, "spec");
            ec.kv_type = parse_kv_type(kv_type, "kv_type");
            if (kv_v_type) ec.kv_v_type = parse_kv_type(*kv_v_type, "kv_v_type");
            ec.kv_rotate = kv_rotate;
            ec.max_seqs = max_seqs;
            ec.kv_tokens = kv_tokens;
            nb::gil_scoped_release r;
            try {
              new (self) PyLLM(path, ec);
            } catch (const Error& e) {  // a malformed or unusable file is a bad `model` argument
              throw_invalid_argument("llmk.LLM", "model", path, std::string("is not a usable GGUF model: ") + e.what());
            }
            try {  // the engine names a bad kv_tokens / max_seqs itself
              self->eng = std::make_unique<AsyncEngine>(self->model, &self->tok, self->ec, kMaxQueue);
            } catch (...) {
              self->~PyLLM();  // nanobind destroys only a constructed instance
              throw;
            }
          },
          nb::arg("path"), nb::arg("kv_type"), nb::arg("kv_v_type").none(), nb::arg("kv_rotate"), nb::arg("max_seqs"),
          nb::arg("kv_tokens"), nb::arg("spec") = "off")
      .def(
          "encode",
          [](const PyLLM& l, const std::string& text, bool parse_special, bool add_bos) {
            return l.tok.encode(text, parse_special, add_bos && l.tok.add_bos());
          },
          nb::arg("text"), nb::arg("parse_special"), nb::arg("add_bos"))
      .def(
          "decode",
          [](const PyLLM& l, const std::vector<int32_t>& ids, bool skip_special) {
            return as_bytes(l.tok.decode(ids, skip_special));
          },
          nb::arg("ids"), nb::arg("skip_special"))
      // The prompt of a conversation: the model's template, or the one named (name != "").
      .def(
          "render_chat",
          [](const PyLLM& l, const std::vector<std::pair<std::string, std::string>>& msgs, const std::string& name) {
            std::vector<ChatMessage> m;
            for (const auto& [role, content] : msgs) m.push_back({role, content});
            return chat_template_of(l.tok, name).render(m, chat_render_options(l.tok));
          },
          nb::arg("messages"), nb::arg("name") = "")
      .def("encode_chat", [](const PyLLM& l, const std::string& text) { return encode_chat_prompt(l.tok, text); })
      // One request (prompt ids, max_tokens, sampling, seed, stop strings, logprobs: -1 = off);
      // InvalidArgument as Engine::submit names it, nothing queued then.
      .def(
          "submit",
          [](PyLLM& l, const std::vector<int32_t>& prompt, int64_t max_tokens, float temperature, int32_t top_k,
             float top_p, float min_p, float repetition_penalty, float presence_penalty, uint64_t seed,
             const std::vector<std::string>& stop, int32_t logprobs, const std::string& spec,
             const std::string& grammar_kind, const std::string& grammar_text) {
            Request r;
            if (!spec.empty()) r.spec = parse_spec_mode(spec, "spec");  // "": the LLM's
            r.constraint = l.constraint(grammar_kind, grammar_text);
            r.prompt = prompt;
            r.max_tokens = max_tokens;
            r.sampling = SamplingParams{temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty};
            r.seed = seed;
            r.stop = stop;
            r.logprobs = logprobs;
            return l.submit(r);
          },
          nb::arg("prompt"), nb::arg("max_tokens"), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"),
          nb::arg("min_p"), nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("seed"),
          nb::arg("stop"), nb::arg("logprobs"), nb::arg("spec") = "", nb::arg("grammar_kind") = "",
          nb::arg("grammar_text") = "")
      // Compiles a grammar (GrammarError, a ValueError, names what is wrong) into the cache submit() reads.
      .def(
          "grammar", [](PyLLM& l, const std::string& kind, const std::string& text) { l.constraint(kind, text); },
          nb::arg("kind"), nb::arg("text"))
      // Ends request `id` with finish "cancelled" at the engine's next step (a finished one: nothing).
      .def("cancel",
           [](PyLLM& l, int64_t id) {
             std::lock_guard<std::mutex> lk(l.engine_mu);
             l.eng->cancel(id);
           })
      .def("stats",
           [](PyLLM& l) {
             EngineStats s;
             {
               std::lock_guard<std::mutex> lk(l.engine_mu);
               s = l.eng->status().stats;
             }
             nb::dict d;
             d["prefill_tokens"] = s.prefill_tokens;
             d["decode_tokens"] = s.decode_tokens;
             d["prefill_seconds"] = s.prefill_seconds;
             d["decode_seconds"] = s.decode_seconds;
             d["preemptions"] = s.preemptions;
             d["steps"] = s.steps;
             d["prompt_tokens"] = s.prompt_tokens;
             d["cached_tokens"] = s.cached_tokens;
             d["generated_tokens"] = s.generated_tokens;
             d["drafted_tokens"] = s.drafted_tokens;
             d["accepted_tokens"] = s.accepted_tokens;
             d["finished"] = s.finished;
             d["cancelled"] = s.cancelled;
             return d;
           })
      // Logits [T, n_vocab] of `ids` at positions 0..T-1 into `out` (float32, C-contiguous).
      .def(
          "logits_out",
          [](PyLLM& l, const std::vector<int32_t>& ids, nb::handle out) {
            const char* fn = "llmk.LLM.logits";
            const int64_t V = l.model.config().n_vocab;
            LLMK_CHECK_ARG(!ids.empty(), fn, "ids", "[]", "must hold at least one token");
            for (size_t i = 0; i < ids.size(); ++i)
              LLMK_CHECK_ARG(ids[i] >= 0 && ids[i] < V, fn, "ids[" + std::to_string(i) + "]", ids[i],
                             "must be in [0, n_vocab = " + std::to_string(V) + ")");
            const MutArray a = as_mut_array(out, fn, "out");
            const TensorView v = view(a, fn, "out");
            LLMK_CHECK_ARG(v.dtype == DType::f32 && v.device == Device::cpu && v.rows() == int64_t(ids.size()) &&
                               v.cols() == V && (v.rows() <= 1 || v.row_stride() == V),
                           fn, "out", v.describe(), "must be float32 [T, n_vocab], C-contiguous, on the CPU");
            float* dst = v.ptr<float>();
            nb::gil_scoped_release r;
            std::lock_guard<std::mutex> lk(l.score_mu);
            forward_sequence(l.scorer, l.ec, ids, dst);
          },
          nb::arg("ids"), nb::arg("out"))
      .def("config", [](const PyLLM& l) {
        const ModelConfig& c = l.model.config();
        nb::dict d;
        d["path"] = l.file.path();
        d["architecture"] = arch_name(c.arch);
        d["name"] = l.file.get_string_or("general.name", "");
        d["n_vocab"] = c.n_vocab;
        d["n_ctx"] = c.n_ctx;
        d["d_model"] = c.d_model;
        d["n_layer"] = c.n_layer;
        d["n_head"] = c.n_head;
        d["n_head_kv"] = c.n_head_kv;
        d["d_head"] = c.d_head();
        d["d_ff"] = c.d_ff;
        d["rope_dim"] = c.rope_dim;
        d["rope_base"] = c.rope_base;
        d["norm_eps"] = c.norm_eps;
        d["tied_embeddings"] = c.tied;
        std::map<std::string, int64_t> types;
        for (const gguf::TensorInfo& t : l.file.tensors()) ++types[gguf::ggml_type_name(t.type)];
        nb::dict td;
        for (const auto& [k, n] : types) td[nb::str(k.c_str())] = n;
        d["weight_types"] = td;
        d["weight_bytes"] = l.model.weight_bytes();
        d["kv_type"] = kv_type_name(l.ec.kv_type);
        d["kv_v_type"] = kv_type_name(l.ec.kv_v_type.value_or(l.ec.kv_type));
        d["kv_rotate"] = l.ec.kv_rotate;
        d["max_seqs"] = l.ec.max_seqs;
        d["kv_tokens"] = l.ec.kv_tokens;
        d["bos_id"] = l.tok.bos_id();
        d["eos_id"] = l.tok.eos_id();
        d["add_bos"] = l.tok.add_bos();
        d["chat_template"] = l.tok.chat_template();
        return d;
      });
}
