// `llmk bench attention`: decode attention over the paged KV cache on the CPU.
//  - time and achieved GB/s of KV read against context (512..32768), for each
//    storage type (K and V of the same type), batch 1 and 32, GQA 9/3x64
//    (SmolLM2-135M) and 32/8x128 (Llama-3-8B), one layer;
//  - paged (16-token blocks in shuffled order) against contiguous (one
//    max-length block per sequence, the same kernel walking contiguous rows),
//    and paged-64 (64-token blocks, shuffled): what a larger block buys back
//    where the 16-token pattern costs (docs/kv_cache.md, "Measured");
//  - the allocator-waste experiment: 256 sequences of 1..4096 tokens held in
//    16-token blocks against one max-length allocation per sequence;
//  - sliding-window decode (AttentionOptions::window = 512, gemma3's local
//    layers) against full attention at the same context, Gemma-3-270M's
//    layer (4 query heads, 1 kv head, head_dim 256), batch 1, f32 and int8,
//    paged: the windowed rows stay flat in the context (window_experiment);
//  - the STREAM triad of this machine, the bandwidth yardstick.
// --only a,b: each item is a storage type (run only those, plus f32 for the
// ratios) or a piece of the shape ("llama3", "B1 ", "ctx8192") that must occur in it;
// one that leaves no shape is an error, before anything runs.
// All (type, layout) variants of a shape are timed in turns, 7 rounds of
// ~30 ms each (interleaved_median_ms), so the type and paging ratios compare
// runs under the same machine load; each round's first call is untimed.
// Decode rows also give the fastest call (min_ms): on a machine shared with
// other jobs, where the medians mostly time the waits.
// Every decode and prefill1 row names the SIMD path that ran (`simd`: the
// level llmk picked, capped by LLMK_SIMD; simd_note()).
// The "read" rows (f32 only) time a plain read of the same K and V rows in the
// kernel's order (read_rows): the memory system's own cost of the layout.
// The "prefill1" rows (paged) time the same step through attention_prefill
// with one query token a sequence, as the engine decodes (its rows do not
// depend on the batch: llmk/attention.hpp); at batch 1 also "prefill1-1chunk",
// the same with prefill_chunk = 2^30 (one chunk a row, one item a kv head: no
// spreading of a long context over the threads).
// Bytes counted: the K and V rows read, sum_b kv_len_b * Hkv * (k_row + v_row)
// bytes (q and out, < 0.1% of it, are not counted). FLOPs counted: sum_b
// kv_len_b * Hq * (4 * head_dim + 5): q.k and p.v are 2 * head_dim each per
// (query head, position), plus 5 for the softmax (max, subtract, exp, sum,
// rescale); the int8 query quantization and the merge of splits are not
// counted. Each decode row carries what a roofline plot needs (model,
// n_heads, n_kv_heads, group, head_dim, k_type, v_type, kv_type, context,
// batch, bytes, flops, gflops, flops_per_byte) as extra fields
// (scripts/plot_capacity.py). Configurations whose KV exceeds 600 MiB per
// layout are skipped (noted).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "bench/common/bench.hpp"
#include "llmk/attention.hpp"
#include "llmk/cpu_features.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"

namespace llmk::bench {
namespace {
struct Model {
  const char* name;
  int64_t Hq, Hkv, D;
};

// Pools of nblocks blocks of bt tokens, every row a copy of one quantized random row.
struct Pools {
  Buffer k, v;
  KvLayerView view;
};
Pools make_pools(const Model& m, KvType t, int64_t nblocks, int64_t bt) {
  const int64_t rb = kv_row_bytes(t, m.D), rows = nblocks * m.Hkv * bt;
  Pools p{kv_pool_buffer(size_t(rows * rb)), kv_pool_buffer(size_t(rows * rb)), {}};  // as KvCache, both layouts
  std::vector<float> x(static_cast<size_t>(m.D));
  std::mt19937 g(1);
  std::normal_distribution<float> n;
  for (auto& e : x) e = n(g);
  std::vector<uint8_t> row(static_cast<size_t>(rb));
  kv_quantize_row(t, x.data(), m.D, row.data());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(p.k.as<uint8_t>() + r * rb, row.data(), size_t(rb));
    std::memcpy(p.v.as<uint8_t>() + r * rb, row.data(), size_t(rb));
  }
  p.view = {p.k.data(), p.v.data(), t, t, nblocks, bt, m.Hkv, m.D, Device::cpu};
  return p;
}

// Reads every K and V row the decode kernel reads, in its order (threads over
// its items, each walking its blocks in table order and, in each tile, the
// item's kv heads in turn: attention_decode_heads_per_item), and does nothing
// else: how fast this machine's memory serves the layout's access pattern,
// with no arithmetic to hide it. The "read" rows; paged against contiguous
// they separate what the block layout costs the memory system from what it
// costs the kernel.
uint64_t read_rows(const Pools& p, const PageTable& pt, const Model& m) {
  const KvLayerView& kv = p.view;
  const PageTableView pv = pt.view();
  const int64_t B = pv.num_seqs, bt = kv.block_tokens, rw = kv_row_bytes(kv.k_type, m.D) / 8;  // words a row
  const int64_t len = bt * (pv.indptr[1] - pv.indptr[0]);  // every sequence: whole blocks
  const int64_t nh = attention_decode_heads_per_item(kv), hg = m.Hkv / nh, tile = 16;
  const int64_t ns = attention_decode_splits(kv, pv, len);
  const int64_t chunk = ((len + ns - 1) / ns + tile - 1) / tile * tile;  // as attention_decode
  uint64_t x = 0;
#pragma omp parallel for num_threads(num_threads()) schedule(static, 1) reduction(^ : x)
  for (int64_t i = 0; i < B * hg * ns; ++i) {
    const int64_t b = i / (hg * ns), h0 = i / ns % hg * nh, s = i % ns;
    for (int64_t p0 = s * chunk; p0 < std::min(len, (s + 1) * chunk);) {
      const int64_t n = std::min({tile, len - p0, bt - p0 % bt});
      for (int64_t h = h0; h < h0 + nh; ++h) {
        const size_t off = size_t(kv_pool_row<int64_t>(pv.indices[pv.indptr[b] + p0 / bt], m.Hkv, h, bt, p0 % bt) * rw);
        const uint64_t* k = static_cast<const uint64_t*>(kv.k) + off;
        const uint64_t* v = static_cast<const uint64_t*>(kv.v) + off;
        for (int64_t w = 0; w < n * rw; ++w) x ^= k[w] ^ v[w];
      }
      p0 += n;
    }
  }
  return x;
}

void waste_experiment(Reporter& rep) {
  KvCacheConfig cfg;  // SmolLM2-135M, f16
  cfg.n_layers = 30, cfg.n_kv_heads = 3, cfg.head_dim = 64, cfg.k_type = cfg.v_type = KvType::f16;
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<int> len(1, 4096);
  std::vector<int> lens(256);
  for (auto& l : lens) l = len(rng);
  int64_t tokens = 0, used = 0;
  const double ms = median_ms(
      [&] {
        KvBlockManager m(256 * 4096 / 16, 16);
        std::vector<int64_t> slots;
        std::vector<KvBlockCopy> copies;
        tokens = 0;
        for (int n : lens) {
          slots.clear();
          m.append(m.add_sequence(), std::vector<int32_t>(size_t(n), 1), &slots, &copies);
          tokens += n;
        }
        used = m.stats().blocks_used;
      },
      3, 0.05);
  const double tok_bytes = double(tokens) * kv_bytes_per_token(cfg);
  const double paged = double(used) * double(kv_block_bytes(cfg)), contiguous = 256.0 * 4096 * kv_bytes_per_token(cfg);
  Row r{"attention", "paged-16", "alloc", "256 seqs x 1..4096", "f16", ms, 0, {}};
  r.extra["held_over_token_bytes"] = std::to_string(paged / tok_bytes);
  r.extra["contiguous_over_token_bytes"] = std::to_string(contiguous / tok_bytes);
  rep.add(r);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "allocator waste (SmolLM2-135M f16, 256 seqs of 1..4096 tokens): 16-token blocks hold %.4fx the token "
                "bytes (target <= 1.04), one max-length allocation per sequence %.3fx",
                paged / tok_bytes, contiguous / tok_bytes);
  rep.note(buf);
}

// The fields scripts/plot_capacity.py needs to place a decode row on the roofline.
void add_roofline_fields(Row& r, const Model& m, KvType t, int64_t ctx, int64_t B, int64_t bytes, double ms) {
  const double flops = double(B) * double(ctx) * double(m.Hq) * double(4 * m.D + 5);
  r.extra["model"] = m.name;
  r.extra["n_heads"] = std::to_string(m.Hq);
  r.extra["n_kv_heads"] = std::to_string(m.Hkv);
  r.extra["group"] = std::to_string(m.Hq / m.Hkv);
  r.extra["head_dim"] = std::to_string(m.D);
  r.extra["k_type"] = r.extra["v_type"] = r.extra["kv_type"] = kv_type_name(t);
  r.extra["context"] = std::to_string(ctx);
  r.extra["batch"] = std::to_string(B);
  r.extra["bytes"] = std::to_string(bytes);
  r.extra["flops"] = std::to_string(int64_t(flops));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", flops / (ms * 1e6));
  r.extra["gflops"] = buf;
  std::snprintf(buf, sizeof buf, "%.4g", flops / double(bytes));
  r.extra["flops_per_byte"] = buf;
}

// Gemma-3-270M's layer at batch 1: decode (attention_decode) and the engine's
// one-token prefill (attention_prefill) with the 512-position window of its
// local layers ("window512") and without ("full"), per context, timed in
// turns. Bytes counted: the K and V rows a call reads, min(ctx, 512) rows
// windowed (the whole blocks before the window are skipped).
void window_experiment(Reporter& rep, const std::vector<int64_t>& ctxs, KvType t, bool quick) {
  const Model m{"gemma3-270m", 4, 1, 256};
  constexpr int64_t W = 512, bt = 16;
  for (int64_t ctx : ctxs) {
    const std::string shape = std::string(m.name) + " B1 ctx" + std::to_string(ctx);
    Pools p = make_pools(m, t, ctx / bt, bt);
    PageTable pt;
    pt.indptr = {0, ctx / bt};
    pt.indices.resize(size_t(ctx / bt));
    std::iota(pt.indices.begin(), pt.indices.end(), 0);
    std::shuffle(pt.indices.begin(), pt.indices.end(), std::mt19937(7));
    pt.last_len = {int32_t(bt)};
    std::vector<float> q(size_t(m.Hq * m.D), 0.05f), out(q.size());
    const float scale = float(1 / std::sqrt(double(m.D)));
    const int64_t qo[] = {0, 1};
    AttentionOptions full, win;
    win.window = W;
    std::vector<std::function<void()>> fns = {
        [&] { attention_decode(q.data(), p.view, pt.view(), m.Hq, scale, out.data(), full); },
        [&] { attention_decode(q.data(), p.view, pt.view(), m.Hq, scale, out.data(), win); },
        [&] { attention_prefill(q.data(), qo, p.view, pt.view(), m.Hq, scale, out.data(), full); },
        [&] { attention_prefill(q.data(), qo, p.view, pt.view(), m.Hq, scale, out.data(), win); }};
    std::vector<double> fastest;
    const std::vector<double> ms = interleaved_median_ms(fns, quick ? 1 : 7, quick ? 0.002 : 0.03, &fastest);
    const char* impls[] = {"full", "window512", "full", "window512"};
    const char* ops[] = {"decode", "decode", "prefill1", "prefill1"};
    for (size_t i = 0; i < 4; ++i) {
      const int64_t rows = i % 2 ? std::min(ctx, W) : ctx;
      const int64_t bytes = rows * m.Hkv * 2 * kv_row_bytes(t, m.D);
      rep.add({"attention",
               impls[i],
               ops[i],
               shape,
               kv_type_name(t),
               ms[i],
               double(bytes) / (ms[i] * 1e6),
               {{"simd", simd_name(simd_level())}, {"min_ms", std::to_string(fastest[i])}}});
    }
    char buf[200];  // the fastest calls: on a loaded machine the medians time the waits
    std::snprintf(buf, sizeof buf,
                  "%-30s %-5s fastest call: decode full %.4f ms, window512 %.4f ms (%.2fx); "
                  "prefill1 full %.4f ms, window512 %.4f ms (%.2fx)",
                  shape.c_str(), kv_type_name(t), fastest[0], fastest[1], fastest[0] / fastest[1], fastest[2],
                  fastest[3], fastest[2] / fastest[3]);
    rep.note(buf);
  }
}

bool is_type(const std::string& s) {
  for (const char* t : {"f32", "f16", "bf16", "int8", "int4"})
    if (s == t) return true;
  return false;
}

int run(const Options& opt) {
  if (opt.threads > 0) set_num_threads(opt.threads);
  const Model models[] = {{"smollm2-135m", 9, 3, 64}, {"llama3-8b", 32, 8, 128}};
  const std::vector<int64_t> ctxs = opt.quick ? std::vector<int64_t>{512}
                                              : std::vector<int64_t>{512, 2048, 8192, 32768};
  const std::vector<int64_t> batches = opt.quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 32};
  const KvType types[] = {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4};
  const int64_t cap = int64_t(600) << 20;
  const auto shape_of = [](const Model& m, int64_t B, int64_t ctx) {
    return std::string(m.name) + " B" + std::to_string(B) + " ctx" + std::to_string(ctx);
  };
  const auto selected = [&](const std::string& shape) {
    return std::all_of(opt.only.begin(), opt.only.end(),
                       [&](const std::string& o) { return is_type(o) || (shape + " ").find(o) != std::string::npos; });
  };
  bool any = false;  // checked before anything runs: a --only that matches nothing ran nothing and exited 0
  const Model gemma{"gemma3-270m", 4, 1, 256};
  for (const Model& m : models)
    for (int64_t B : batches)
      for (int64_t ctx : ctxs) any = any || selected(shape_of(m, B, ctx));
  std::vector<int64_t> wctxs;  // the window experiment's contexts
  for (int64_t ctx : ctxs)
    if (selected(shape_of(gemma, 1, ctx))) wctxs.push_back(ctx);
  any = any || !wctxs.empty();
  if (!any) {
    std::string given;
    for (const auto& o : opt.only) given += (given.empty() ? "" : ",") + o;
    throw_invalid_argument("bench attention", "--only", given,
                           "matches no shape (each item a type f32|f16|bf16|int8|int4 or a piece of a shape such as "
                           "\"llama3\", \"gemma3\", \"B1 \", \"ctx8192\"" +
                               std::string(opt.quick ? "; --quick runs B1 ctx512 only)" : ")"));
  }
  Reporter rep(opt, "attention",
               "decode attention, one layer; bytes = K and V rows read = sum_b kv_len_b * Hkv * (k_row + v_row); "
               "FLOPs = sum_b kv_len_b * Hq * (4 * head_dim + 5) (q.k and p.v 2 * head_dim each, softmax 5); "
               "paged = 16-token blocks in shuffled order, paged-64 = 64-token blocks in shuffled order, contiguous = "
               "one "
               "max-length block per sequence");
  rep.note(simd_note());
  std::vector<std::string> skipped;
  for (const KvType t : {KvType::f32, KvType::int8})
    if (!wctxs.empty() && (t == KvType::f32 || !std::any_of(opt.only.begin(), opt.only.end(), is_type) ||
                           std::find(opt.only.begin(), opt.only.end(), kv_type_name(t)) != opt.only.end()))
      window_experiment(rep, wctxs, t, opt.quick);
  for (const Model& m : models)
    for (int64_t B : batches)
      for (int64_t ctx : ctxs) {
        const std::string shape = shape_of(m, B, ctx);
        if (!selected(shape)) continue;
        std::vector<float> q(size_t(B * m.Hq * m.D), 0.05f), out(q.size());
        // Every (type, layout) of the shape is built first and then timed in
        // turns (interleaved_median_ms), so the ratios between them (the
        // targets: int8/int4 against f32, paged against contiguous) compare
        // runs under the same load.
        struct Variant {
          KvType t;
          int64_t bt;  // tokens a block: 16 (paged), 64 (paged-64) or ctx (contiguous)
          bool paged;
          Pools p;
          PageTable pt;
        };
        const auto impl_of = [&](const Variant& v) {
          return !v.paged ? "contiguous" : v.bt == 16 ? "paged" : "paged-64";
        };
        std::vector<Variant> vs;
        for (KvType t : types) {
          if (t != KvType::f32 && std::any_of(opt.only.begin(), opt.only.end(), is_type) &&
              std::find(opt.only.begin(), opt.only.end(), kv_type_name(t)) == opt.only.end())
            continue;
          if (B * ctx * m.Hkv * 2 * kv_row_bytes(t, m.D) > cap) {
            skipped.push_back(shape + " " + kv_type_name(t));
            continue;
          }
          for (int64_t bt : {int64_t(16), int64_t(64), ctx}) {
            const bool paged = bt < ctx;
            const int64_t per_seq = ctx / bt;
            Variant v{t, bt, paged, make_pools(m, t, B * per_seq, bt), {}};
            v.pt.indptr.push_back(0);
            v.pt.indices.resize(size_t(B * per_seq));
            std::iota(v.pt.indices.begin(), v.pt.indices.end(), 0);
            if (paged) std::shuffle(v.pt.indices.begin(), v.pt.indices.end(), std::mt19937(7));
            for (int64_t b = 0; b < B; ++b)
              v.pt.indptr.push_back((b + 1) * per_seq), v.pt.last_len.push_back(int32_t(bt));
            vs.push_back(std::move(v));
          }
        }
        const float scale = float(1 / std::sqrt(double(m.D)));
        std::vector<std::function<void()>> fns;
        for (const Variant& v : vs)
          fns.push_back([&] { attention_decode(q.data(), v.p.view, v.pt.view(), m.Hq, scale, out.data()); });
        std::vector<int64_t> qo_one(static_cast<size_t>(B + 1));
        std::iota(qo_one.begin(), qo_one.end(), 0);
        AttentionOptions one_chunk;
        one_chunk.prefill_chunk = int64_t(1) << 30;
        for (const Variant& v : vs)
          if (v.bt == 16) {
            fns.push_back(
                [&] { attention_prefill(q.data(), qo_one.data(), v.p.view, v.pt.view(), m.Hq, scale, out.data()); });
            if (B == 1)
              fns.push_back([&] {
                attention_prefill(q.data(), qo_one.data(), v.p.view, v.pt.view(), m.Hq, scale, out.data(), one_chunk);
              });
          }
        uint64_t sink = 0;  // the read rows, f32 only: the largest, most memory-bound layout
        for (const Variant& v : vs)
          if (v.t == KvType::f32 && v.bt != 64) fns.push_back([&] { sink ^= read_rows(v.p, v.pt, m); });
        std::vector<double> fastest;
        const std::vector<double> ms = interleaved_median_ms(fns, opt.quick ? 1 : 7, opt.quick ? 0.002 : 0.03,
                                                             &fastest);
        for (size_t i = 0; i < vs.size(); ++i) {
          const Variant& v = vs[i];
          const int64_t bytes = B * ctx * m.Hkv * 2 * kv_row_bytes(v.t, m.D);
          Row r{"attention", impl_of(v), "decode", shape, kv_type_name(v.t), ms[i], double(bytes) / (ms[i] * 1e6), {}};
          r.extra["splits"] = std::to_string(attention_decode_splits(v.p.view, v.pt.view(), ctx));
          r.extra["simd"] = simd_name(simd_level());
          r.extra["min_ms"] = std::to_string(fastest[i]);
          add_roofline_fields(r, m, v.t, ctx, B, bytes, ms[i]);
          rep.add(r);
        }
        size_t next = vs.size();
        for (const Variant& v : vs)
          if (v.bt == 16) {
            const int64_t bytes = B * ctx * m.Hkv * 2 * kv_row_bytes(v.t, m.D);
            for (const char* op : {"prefill1", "prefill1-1chunk"}) {
              if (B != 1 && std::string(op) != "prefill1") continue;  // prefill1-1chunk: batch 1 only
              rep.add({"attention",
                       "paged",
                       op,
                       shape,
                       kv_type_name(v.t),
                       ms[next],
                       double(bytes) / (ms[next] * 1e6),
                       {{"simd", simd_name(simd_level())}}});
              ++next;
            }
          }
        for (size_t i = next, j = 0; i < ms.size(); ++j)
          if (vs[j].t == KvType::f32 && vs[j].bt != 64) {
            const int64_t bytes = B * ctx * m.Hkv * 2 * kv_row_bytes(KvType::f32, m.D);
            rep.add({"attention",
                     vs[j].paged ? "paged" : "contiguous",
                     "read",
                     shape,
                     "f32",
                     ms[i],
                     double(bytes) / (ms[i] * 1e6),
                     {{"checksum", std::to_string(sink & 1)}}});
            ++i;
          }
      }
  for (const auto& s : skipped) rep.note("skipped (KV > 600 MiB per layout): " + s);
  waste_experiment(rep);
  const int threads = num_threads();
  const double triad = stream_triad_gbps(threads, opt.quick ? (48u << 20) : (768u << 20));
  rep.add({"attention", "stream", "triad", std::to_string(threads) + " threads", "f64", 1.0, triad, {}});
  rep.ratios("paged", {"contiguous"});
  rep.ratios("paged-64", {"contiguous"});
  rep.ratios("window512", {"full"});
  // windowed decode against its own time at the smallest context: flat in the context
  for (const Row& a : rep.rows())
    if (a.impl == "window512" && a.op == "decode")
      for (const Row& f : rep.rows())
        if (f.impl == "window512" && f.op == "decode" && f.dtype == a.dtype &&
            f.shape == gemma.name + std::string(" B1 ctx") + std::to_string(wctxs.front())) {
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "%-30s %-5s windowed decode takes %.2fx its time at ctx %lld (fastest calls: %.2fx)",
                        a.shape.c_str(), a.dtype.c_str(), a.median_ms / f.median_ms,
                        static_cast<long long>(wctxs.front()),
                        std::stod(a.extra.at("min_ms")) / std::stod(f.extra.at("min_ms")));
          rep.note(buf);
        }
  // the engine's path (one-token prefill) against decode, paged, per shape and type
  for (const Row& a : rep.rows())
    if (a.impl == "paged" && (a.op == "prefill1" || a.op == "prefill1-1chunk"))
      for (const Row& d : rep.rows())
        if (d.impl == "paged" && d.op == "decode" && d.dtype == a.dtype && d.shape == a.shape) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "%-30s %-5s %s takes %.2fx decode", a.shape.c_str(), a.dtype.c_str(),
                        a.op.c_str(), a.median_ms / d.median_ms);
          rep.note(buf);
        }
  // storage types against f32, paged, per shape
  for (const Row& a : rep.rows())
    if (a.impl == "paged" && a.op == "decode" && a.dtype != "f32")
      for (const Row& f : rep.rows())
        if (f.impl == "paged" && f.op == "decode" && f.dtype == "f32" && f.shape == a.shape) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "%-30s %-5s decode is %.2fx f32", a.shape.c_str(), a.dtype.c_str(),
                        f.median_ms / a.median_ms);
          rep.note(buf);
        }
  return 0;
}
}  // namespace
LLMK_BENCH("attention", "decode attention over the paged KV cache, per storage type, paged vs contiguous", run);
}  // namespace llmk::bench
