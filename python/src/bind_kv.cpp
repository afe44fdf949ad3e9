// Python bindings of the host KV cache and attention over it (llmk/kv_cache.hpp,
// llmk/attention.hpp): the KvCache class; decode_out/prefill_out write into an
// f32 output allocated by python/llmk/kv.py.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "llmk/attention.hpp"

namespace llmk::py {
namespace {
// A CPU f32 array of exactly `n` contiguous elements (any shape).
template <class A>
float* f32_data(const A& a, int64_t n, const char* fn, const char* arg) {
  const DType t = dtype_of(a.dtype(), fn, arg);
  LLMK_CHECK_ARG(t == DType::f32, fn, arg, std::string("dtype ") + dtype_name(t), "must be float32");
  LLMK_CHECK_ARG(a.device_type() == nb::device::cpu::value, fn, arg, "device type " + std::to_string(a.device_type()),
                 "must be on the CPU");
  LLMK_CHECK_ARG(int64_t(a.size()) == n, fn, arg, std::to_string(a.size()) + " elements",
                 "must hold " + std::to_string(n) + " elements");
  int64_t expect = 1;
  for (int d = int(a.ndim()) - 1; d >= 0; --d) {
    LLMK_CHECK_ARG(a.shape(d) <= 1 || a.stride(d) == expect, fn, arg,
                   "stride " + std::to_string(a.stride(d)) + " in dimension " + std::to_string(d),
                   "must be C-contiguous");
    expect *= a.shape(d);
  }
  LLMK_CHECK_ARG(reinterpret_cast<uintptr_t>(a.data()) % alignof(float) == 0, fn, arg, a.data(),
                 "must be aligned to 4 bytes");
  return static_cast<float*>(const_cast<void*>(static_cast<const void*>(a.data())));
}

// n_heads query heads over the layer's kv heads: checked before it sizes q and out.
void check_heads(const KvCache& c, int64_t n_heads, const char* fn) {
  const int64_t h = c.config().n_kv_heads;
  LLMK_CHECK_ARG(n_heads >= 1 && n_heads % h == 0 && n_heads / h <= 256, fn, "n_heads", n_heads,
                 "must be a multiple of n_kv_heads = " + std::to_string(h) + " (at most 256x it)");
}

// The batch's page table; an all-empty batch has no block ids, but the
// attention entry points want non-null arrays (they then name the empty sequence).
PageTable page_table(const KvCache& c, const std::vector<int64_t>& seqs) {
  PageTable pt = c.page_table(seqs);
  pt.indices.reserve(1);
  return pt;
}
}  // namespace
}  // namespace llmk::py

LLMK_PY_BINDINGS(kv) {
  using namespace llmk;
  using llmk::py::as_array;
  using llmk::py::as_mut_array;
  using llmk::py::f32_data;
  namespace nb = nanobind;
  using H = nb::handle;
  // The KV storage-type table's (name, cli_name) rows, in order (llmk/kv_quant.hpp).
  m.def("kv_type_names", [] {
    std::vector<std::pair<std::string, std::string>> r;
    for (int i = 0; i < kKvTypeCount; ++i) {
      const KvTypeTraits& t = kv_type_traits(KvType(i));
      r.emplace_back(t.name, t.cli_name);
    }
    return r;
  });
  nb::class_<KvCache>(m, "KvCache")
      .def(
          "__init__",
          [](KvCache* self, int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t budget_bytes,
             int64_t block_tokens, const std::string& k_type, const std::string& v_type, bool k_rotate) {
            KvCacheConfig c;
            c.n_layers = n_layers, c.n_kv_heads = n_kv_heads, c.head_dim = head_dim, c.budget_bytes = budget_bytes;
            c.block_tokens = block_tokens, c.k_type = parse_kv_type(k_type, "k_type");
            c.v_type = parse_kv_type(v_type, "v_type");
            c.k_rotate = k_rotate;
            new (self) KvCache(c);
          },
          nb::arg("n_layers"), nb::arg("n_kv_heads"), nb::arg("head_dim"), nb::arg("budget_bytes"),
          nb::arg("block_tokens") = 16, nb::arg("k_type") = "f32", nb::arg("v_type") = "f32",
          nb::arg("k_rotate") = false)
      .def("add_sequence", &KvCache::add_sequence)
      .def(
          "reuse_prefix", [](KvCache& c, int64_t s, const std::vector<int32_t>& t) { return c.reuse_prefix(s, t); },
          nb::arg("seq"), nb::arg("tokens"))
      .def(
          "append",  // the slots, or None when out of blocks
          [](KvCache& c, int64_t s, const std::vector<int32_t>& t) -> nb::object {
            std::vector<int64_t> slots;
            if (c.append(s, t, &slots) != KvStatus::ok) return nb::none();
            return nb::cast(slots);
          },
          nb::arg("seq"), nb::arg("tokens"))
      .def("fork", &KvCache::fork, nb::arg("seq"))
      .def("truncate", &KvCache::truncate, nb::arg("seq"), nb::arg("length"))
      .def("free_sequence", &KvCache::free_sequence, nb::arg("seq"))
      .def(
          "length", [](const KvCache& c, int64_t s) { return c.manager().length(s); }, nb::arg("seq"))
      .def("stats",
           [](const KvCache& c) {
             const KvStats st = c.manager().stats();
             nb::dict d;
             d["blocks_total"] = st.blocks_total, d["blocks_used"] = st.blocks_used;
             d["blocks_free"] = st.blocks_free, d["blocks_cached"] = st.blocks_cached;
             d["tokens_stored"] = st.tokens_stored, d["fragmentation"] = st.fragmentation;
             d["bytes_per_token"] = kv_bytes_per_token(c.config());
             return d;
           })
      .def(
          "write",
          [](KvCache& c, int64_t layer, const std::vector<int64_t>& slots, H k, H v) {
            const char* fn = "KvCache.write";
            const int64_t n = int64_t(slots.size()) * c.config().n_kv_heads * c.config().head_dim;
            float* kp = f32_data(as_array(k, fn, "k"), n, fn, "k");
            c.write(layer, slots, kp, f32_data(as_array(v, fn, "v"), n, fn, "v"));
          },
          nb::arg("layer"), nb::arg("slots"), nb::arg("k").none(), nb::arg("v").none())
      .def(
          "decode_out",
          [](const KvCache& c, int64_t layer, const std::vector<int64_t>& seqs, H q, int64_t n_heads, float scale,
             H out) {
            const char* fn = "KvCache.decode";
            const KvLayerView lv = c.layer(layer);
            llmk::py::check_heads(c, n_heads, fn);
            const int64_t n = int64_t(seqs.size()) * n_heads * c.config().head_dim;
            const float* qp = f32_data(as_array(q, fn, "q"), n, fn, "q");
            float* op = f32_data(as_mut_array(out, fn, "out"), n, fn, "out");
            if (seqs.empty()) return;  // an empty batch
            const PageTable pt = llmk::py::page_table(c, seqs);
            attention_decode(qp, lv, pt.view(), n_heads, scale, op);
          },
          nb::arg("layer"), nb::arg("seqs"), nb::arg("q").none(), nb::arg("n_heads"), nb::arg("scale"),
          nb::arg("out").none())
      .def(
          "prefill_out",
          [](const KvCache& c, int64_t layer, const std::vector<int64_t>& seqs, const std::vector<int64_t>& qo_indptr,
             H q, int64_t n_heads, float scale, H out) {
            const char* fn = "KvCache.prefill";
            LLMK_CHECK_ARG(qo_indptr.size() == seqs.size() + 1, fn, "qo_indptr", qo_indptr.size(),
                           "must have len(seqs) + 1 entries");
            LLMK_CHECK_ARG(qo_indptr[0] == 0, fn, "qo_indptr[0]", qo_indptr[0], "must be 0");
            for (size_t i = 1; i < qo_indptr.size(); ++i)  // the cached lengths bound it: attention_prefill checks
              LLMK_CHECK_ARG(qo_indptr[i] >= qo_indptr[i - 1], fn, "qo_indptr[" + std::to_string(i) + "]", qo_indptr[i],
                             "must be >= qo_indptr[" + std::to_string(i - 1) + "]");
            const KvLayerView lv = c.layer(layer);
            llmk::py::check_heads(c, n_heads, fn);
            // at most 2^31 query tokens, so n below cannot overflow
            LLMK_CHECK_ARG(qo_indptr.back() < (int64_t(1) << 31), fn, "qo_indptr[-1]", qo_indptr.back(),
                           "must be < 2^31 (query tokens)");
            const int64_t n = qo_indptr.back() * n_heads * c.config().head_dim;
            const float* qp = f32_data(as_array(q, fn, "q"), n, fn, "q");
            float* op = f32_data(as_mut_array(out, fn, "out"), n, fn, "out");
            if (seqs.empty()) return;  // an empty batch
            const PageTable pt = llmk::py::page_table(c, seqs);
            attention_prefill(qp, qo_indptr.data(), lv, pt.view(), n_heads, scale, op);
          },
          nb::arg("layer"), nb::arg("seqs"), nb::arg("qo_indptr"), nb::arg("q").none(), nb::arg("n_heads"),
          nb::arg("scale"), nb::arg("out").none());
}
