// Python bindings of the host KV cache and attention over it (llmk/kv_cache.hpp,
// llmk/attention.hpp): the KvCache class; decode_out/prefill_out write into an
// f32 output allocated by python/llmk/kv.py.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "llmk/attention.hpp"

namespace llmk::py {
namespace {
// A CPU f32 array of exactly `n` contiguous elements.
template <class A>
float* f32_data(const A& a, int64_t n, const char* fn, const char* arg) {
  LLMK_CHECK_ARG(a.dtype() == nb::dtype<float>(), fn, arg, "dtype", "must be float32");
  LLMK_CHECK_ARG(a.device_type() == nb::device::cpu::value, fn, arg, "device", "must be on the CPU");
  LLMK_CHECK_ARG(int64_t(a.size()) == n, fn, arg, int64_t(a.size()), "must hold " + std::to_string(n) + " elements");
  int64_t expect = 1;
  for (int d = int(a.ndim()) - 1; d >= 0; --d) {
    LLMK_CHECK_ARG(a.shape(d) <= 1 || a.stride(d) == expect, fn, arg, "strides", "must be C-contiguous");
    expect *= a.shape(d);
  }
  return static_cast<float*>(const_cast<void*>(static_cast<const void*>(a.data())));
}
}  // namespace
}  // namespace llmk::py

LLMK_PY_BINDINGS(kv) {
  using namespace llmk;
  using llmk::py::Array;
  using llmk::py::MutArray;
  using llmk::py::f32_data;
  namespace nb = nanobind;
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
      .def("reuse_prefix", [](KvCache& c, int64_t s, const std::vector<int32_t>& t) { return c.reuse_prefix(s, t); })
      .def("append",  // the slots, or None when out of blocks
           [](KvCache& c, int64_t s, const std::vector<int32_t>& t) -> nb::object {
             std::vector<int64_t> slots;
             if (c.append(s, t, &slots) != KvStatus::ok) return nb::none();
             return nb::cast(slots);
           })
      .def("fork", &KvCache::fork)
      .def("truncate", &KvCache::truncate)
      .def("free_sequence", &KvCache::free_sequence)
      .def("length", [](const KvCache& c, int64_t s) { return c.manager().length(s); })
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
      .def("write",
           [](KvCache& c, int64_t layer, const std::vector<int64_t>& slots, const Array& k, const Array& v) {
             const int64_t n = int64_t(slots.size()) * c.config().n_kv_heads * c.config().head_dim;
             c.write(layer, slots, f32_data(k, n, "KvCache.write", "k"), f32_data(v, n, "KvCache.write", "v"));
           })
      .def("decode_out",
           [](const KvCache& c, int64_t layer, const std::vector<int64_t>& seqs, const Array& q, int64_t n_heads,
              float scale, MutArray out) {
             const int64_t n = int64_t(seqs.size()) * n_heads * c.config().head_dim;
             const PageTable pt = c.page_table(seqs);
             attention_decode(f32_data(q, n, "KvCache.decode", "q"), c.layer(layer), pt.view(), n_heads, scale,
                              f32_data(out, n, "KvCache.decode", "out"));
           })
      .def("prefill_out", [](const KvCache& c, int64_t layer, const std::vector<int64_t>& seqs,
                             const std::vector<int64_t>& qo_indptr, const Array& q, int64_t n_heads, float scale,
                             MutArray out) {
        LLMK_CHECK_ARG(qo_indptr.size() == seqs.size() + 1, "KvCache.prefill", "qo_indptr", qo_indptr.size(),
                       "must have len(seqs) + 1 entries");
        const int64_t n = qo_indptr.back() * n_heads * c.config().head_dim;
        const PageTable pt = c.page_table(seqs);
        attention_prefill(f32_data(q, n, "KvCache.prefill", "q"), qo_indptr.data(), c.layer(layer), pt.view(), n_heads,
                          scale, f32_data(out, n, "KvCache.prefill", "out"));
      });
}
