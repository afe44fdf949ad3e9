// Python bindings of a loaded model and the engine (llmk/engine.hpp): _LLM holds
// the GGUF file, Model and Tokenizer; _LLM.start() submits requests to a new
// Engine and returns a _Generation whose step() runs one engine step with the
// GIL released. python/llmk/llm.py checks the arguments and drives the step
// loop, so Ctrl-C lands between steps and the _LLM stays usable.
// One _LLM's model runs one forward at a time (Model scratch): every call that
// runs it takes the _LLM's mutex after releasing the GIL.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "llmk/engine.hpp"
#include "llmk/gguf.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tokenizer.hpp"

namespace llmk::py {
namespace {

struct PyLLM {
  gguf::File file;
  Model model;
  Tokenizer tok;
  EngineConfig ec;
  int threads;        // 0: the process's setting
  std::mutex mu;      // one forward at a time (Model's scratch)

  PyLLM(const std::string& path, const EngineConfig& c, int t)
      : file(gguf::File::open(path)), model(Model::from_gguf(file)), tok(Tokenizer::from_gguf(file)), ec(c), threads(t) {}
};

// Holds the model for one call: the _LLM's mutex and its thread count (the
// process's setting is restored afterwards). Taken with the GIL released.
class ModelLock {
 public:
  explicit ModelLock(PyLLM& l) : lock_(l.mu), saved_(num_threads()) {
    if (l.threads > 0) set_num_threads(l.threads);
  }
  ~ModelLock() { set_num_threads(saved_); }

 private:
  std::lock_guard<std::mutex> lock_;
  int saved_;
};

struct PyGeneration {
  PyLLM* llm;  // kept alive by keep_alive on start()
  std::unique_ptr<Engine> eng;
  bool idle = false;
};

nb::bytes as_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

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
  m.def("known_models", [] {
    nb::list out;
    for (const gguf::KnownModel& k : gguf::known_models()) out.append(nb::make_tuple(k.name, k.file));
    return out;
  });

  nb::class_<PyGeneration>(m, "_Generation")
      // Runs one engine step; returns (more, events) with events as (request id, token,
      // UTF-8 bytes, finish name) tuples. more is False once every request has finished.
      .def("step",
           [](PyGeneration& g) {
             std::vector<Event> evs;
             if (!g.idle) {
               nb::gil_scoped_release r;
               ModelLock lock(*g.llm);
               g.idle = !g.eng->step([&](const Event& e) { evs.push_back(e); });
             }
             nb::list out;
             for (const Event& e : evs)
               out.append(nb::make_tuple(e.id, e.token, as_bytes(e.text), finish_name(e.finish)));
             return nb::make_tuple(!g.idle, out);
           })
      // (tokens, UTF-8 bytes, finish name, preemptions) per request, in submit order.
      .def("outputs",
           [](PyGeneration& g) {
             nb::list out;
             std::vector<Output> outs;
             {
               nb::gil_scoped_release r;
               ModelLock lock(*g.llm);
               outs = g.eng->run();  // no step left when idle
             }
             for (const Output& o : outs)
               out.append(nb::make_tuple(o.tokens, as_bytes(o.text), finish_name(o.finish), o.preemptions));
             return out;
           })
      .def("stats", [](const PyGeneration& g) {
        const EngineStats& s = g.eng->stats();
        nb::dict d;
        d["prefill_tokens"] = s.prefill_tokens;
        d["decode_tokens"] = s.decode_tokens;
        d["prefill_seconds"] = s.prefill_seconds;
        d["decode_seconds"] = s.decode_seconds;
        d["preemptions"] = s.preemptions;
        d["steps"] = s.steps;
        return d;
      });

  nb::class_<PyLLM>(m, "_LLM")
      .def(
          "__init__",
          [](PyLLM* self, const std::string& path, const std::string& kv_type, std::optional<std::string> kv_v_type,
             bool kv_rotate, int64_t max_seqs, int threads) {
            EngineConfig ec;
            ec.kv_type = parse_kv_type(kv_type, "kv_type");
            if (kv_v_type) ec.kv_v_type = parse_kv_type(*kv_v_type, "kv_v_type");
            ec.kv_rotate = kv_rotate;
            ec.max_seqs = max_seqs;
            nb::gil_scoped_release r;
            try {
              new (self) PyLLM(path, ec, threads);
            } catch (const Error& e) {  // a malformed or unusable file is a bad `model` argument
              throw_invalid_argument("llmk.LLM", "model", path, std::string("is not a usable GGUF model: ") + e.what());
            }
          },
          nb::arg("path"), nb::arg("kv_type"), nb::arg("kv_v_type").none(), nb::arg("kv_rotate"), nb::arg("max_seqs"),
          nb::arg("threads"))
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
      .def("render_chat",
           [](const PyLLM& l, const std::vector<std::pair<std::string, std::string>>& msgs) {
             std::vector<ChatMessage> m;
             for (const auto& [role, content] : msgs) m.push_back({role, content});
             return render_chat(l.tok, m);
           })
      // requests: (prompt ids, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
      // presence_penalty, seed, stop strings); kv_tokens: the cache's capacity.
      .def(
          "start",
          [](PyLLM& l, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens, float temperature,
             int32_t top_k, float top_p, float min_p, float repetition_penalty, float presence_penalty, uint64_t seed,
             const std::vector<std::string>& stop, int64_t kv_tokens) {
            EngineConfig ec = l.ec;
            ec.kv_tokens = kv_tokens;
            auto g = std::make_unique<PyGeneration>();
            g->llm = &l;
            g->eng = std::make_unique<Engine>(l.model, &l.tok, ec);
            for (const auto& p : prompts) {
              Request r;
              r.prompt = p;
              r.max_tokens = max_tokens;
              r.sampling = SamplingParams{temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty};
              r.seed = seed;
              r.stop = stop;
              g->eng->submit(std::move(r));
            }
            return g;
          },
          nb::arg("prompts"), nb::arg("max_tokens"), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"),
          nb::arg("min_p"), nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("seed"),
          nb::arg("stop"), nb::arg("kv_tokens"), nb::keep_alive<0, 1>())
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
            ModelLock lock(l);
            forward_sequence(l.model, l.ec, ids, dst);
          },
          nb::arg("ids"), nb::arg("out"))
      .def("config", [](const PyLLM& l) {
        const ModelConfig& c = l.model.config();
        nb::dict d;
        d["path"] = l.file.path();
        d["architecture"] = c.arch == Arch::gpt2 ? "gpt2" : "llama";
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
        d["bos_id"] = l.tok.bos_id();
        d["eos_id"] = l.tok.eos_id();
        d["add_bos"] = l.tok.add_bos();
        d["chat_template"] = l.tok.chat_template();
        return d;
      });
}
