// attention_decode / attention_prefill: validation at the API boundary, work
// items (decode: sequence and split, every kv head; prefill: sequence, kv head,
// query tile and a range of its context chunks), OpenMP over the items, the
// exact log-sum-exp merges (decode splits; prefill chunks, folded in order), and
// the rotation of the queries against a Hadamard-rotated K (a copy;
// llmk/kv_quant.hpp). The kernel itself is attention_kernel.hpp, instantiated
// here for the scalar path.
#include "llmk/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attention/attention_kernel.hpp"
#include "attention/kv_checks.hpp"
#include "core/dispatch.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"

namespace llmk {
namespace attn {
#ifdef LLMK_HAVE_CUDA
void decode_cuda(const float* q, const KvLayerView& kv, const PageTableView& pages, int64_t n_heads, float scale,
                 float* out, int splits, int64_t window, DecodeCudaKernel kernel, Stream stream);
int decode_cuda_splits(int64_t work, int64_t max_kv_len);
#endif
}  // namespace attn
namespace attn_isa {
void attend_avx2(const KvLayerView&, const attn::Item&, float*);
void attend_avxvnni(const KvLayerView&, const attn::Item&, float*);
void attend_avxvnni_evex(const KvLayerView&, const attn::Item&, float*);
void attend_avx512(const KvLayerView&, const attn::Item&, float*);
void attend_avx512vnni(const KvLayerView&, const attn::Item&, float*);
void attend_avx512vbmi(const KvLayerView&, const attn::Item&, float*);
}  // namespace attn_isa

namespace {
using attn::Item;
using attn::kTile;

int64_t kv_len_of(const PageTableView& p, int64_t b, int64_t bt) {
  const int64_t nb = p.indptr[b + 1] - p.indptr[b];
  return nb == 0 ? 0 : (nb - 1) * bt + p.last_len[b];
}

// kv's shape fields, which the kernels and the split / item choices compute with.
void check_kv_shape(const char* fn, const KvLayerView& kv) {
  LLMK_CHECK_ARG(int(kv.k_type) < kKvTypeCount, fn, "kv.k_type", int(kv.k_type), "must be a KvType");
  LLMK_CHECK_ARG(int(kv.v_type) < kKvTypeCount, fn, "kv.v_type", int(kv.v_type), "must be a KvType");
  LLMK_CHECK_ARG(kv.head_dim >= 16 && kv.head_dim <= 256 && kv.head_dim % 16 == 0, fn, "kv.head_dim", kv.head_dim,
                 "must be a multiple of 16 in [16, 256]");
  LLMK_CHECK_ARG(kv.block_tokens >= 1 && kv.block_tokens <= kKvMaxBlockTokens, fn, "kv.block_tokens", kv.block_tokens,
                 "must be in [1, 2^20]");
  LLMK_CHECK_ARG(kv.n_kv_heads >= 1, fn, "kv.n_kv_heads", kv.n_kv_heads, "must be >= 1");
}

// Validates kv, pages and head counts; returns the longest context.
int64_t validate_common(const char* fn, const float* q, const KvLayerView& kv, const PageTableView& p, int64_t Hq,
                        float scale, const float* out) {
  LLMK_CHECK_ARG(q != nullptr, fn, "q", q, "must not be null");
  LLMK_CHECK_ARG(out != nullptr, fn, "out", out, "must not be null");
  LLMK_CHECK_ARG(kv.k != nullptr && kv.v != nullptr, fn, "kv", "null pool", "k and v pools must not be null");
  check_kv_shape(fn, kv);
  attn::check_pools_aligned(fn, kv);
  LLMK_CHECK_ARG(kv.num_blocks >= 1, fn, "kv.num_blocks", kv.num_blocks, "must be >= 1");
  LLMK_CHECK_ARG(Hq >= 1 && Hq % kv.n_kv_heads == 0 && Hq / kv.n_kv_heads <= 256, fn, "n_heads", Hq,
                 "must be a multiple of kv.n_kv_heads = " + std::to_string(kv.n_kv_heads) + " (at most 256x it)");
  LLMK_CHECK_ARG(std::isfinite(scale), fn, "scale", scale, "must be finite");
  LLMK_CHECK_ARG(p.device == kv.device, fn, "pages.device", device_name(p.device),
                 std::string("must match kv.device = ") + device_name(kv.device));
  LLMK_CHECK_ARG(p.num_seqs >= 1, fn, "pages.num_seqs", p.num_seqs, "must be >= 1");
  LLMK_CHECK_ARG(p.indptr && p.indices && p.last_len, fn, "pages", "null array",
                 "indptr, indices, last_len must be set");
  if (p.device != Device::cpu) return -1;  // device tables are validated by the caller's host copy
  LLMK_CHECK_ARG(p.indptr[0] == 0, fn, "pages.indptr[0]", p.indptr[0], "must be 0");
  int64_t max_len = 0;
  for (int64_t b = 0; b < p.num_seqs; ++b) {
    const int64_t nb = p.indptr[b + 1] - p.indptr[b];
    LLMK_CHECK_ARG(nb >= 0, fn, "pages.indptr", "decreasing at " + std::to_string(b), "must be non-decreasing");
    const int64_t ll = p.last_len[b];
    LLMK_CHECK_ARG(nb == 0 ? ll == 0 : (ll >= 1 && ll <= kv.block_tokens), fn,
                   "pages.last_len[" + std::to_string(b) + "]", ll,
                   "must be in [1, block_tokens] (0 for a sequence without blocks)");
    max_len = std::max(max_len, kv_len_of(p, b, kv.block_tokens));
  }
  for (int64_t i = 0; i < p.indptr[p.num_seqs]; ++i)
    LLMK_CHECK_ARG(p.indices[i] >= 0 && p.indices[i] < kv.num_blocks, fn, "pages.indices[" + std::to_string(i) + "]",
                   p.indices[i], "must be a block id in [0, " + std::to_string(kv.num_blocks) + ")");
  return max_len;
}

// Against a rotated K (kv.k_rotated) the queries q [rows, D] are rotated the
// same way, into buf (the caller's q is never written): (H q) . (H k) = q . k.
const float* rotated_queries(const float* q, int64_t rows, const KvLayerView& kv, std::vector<float>& buf) {
  if (!kv.k_rotated) return q;
  buf.assign(q, q + rows * kv.head_dim);
  hadamard_transform(buf.data(), rows, kv.head_dim, kv_rotation_block(kv.head_dim));
  return buf.data();
}

using AttendFn = void (*)(const KvLayerView&, const Item&, float*);
// The avxvnni level: VEX-encoded where the CPU has AVX-VNNI, else EVEX (the
// level runs only where the CPU has one of them: llmk/cpu_features.hpp).
void attend_avxvnni(const KvLayerView& kv, const Item& it, float* scratch) {
  static const AttendFn f = cpu_has_avx_vnni() ? attn_isa::attend_avxvnni : attn_isa::attend_avxvnni_evex;
  f(kv, it, scratch);
}
constexpr simd::Paths<AttendFn> kAttend{.scalar = attn::attend<attn::Scalar>,
                                        .avx2 = attn_isa::attend_avx2,
                                        .avxvnni = attend_avxvnni,
                                        .avx512 = attn_isa::attend_avx512,
                                        .avx512vnni = attn_isa::attend_avx512vnni,
                                        .avx512vbmi = attn_isa::attend_avx512vbmi};

// One decode item: sequence b's query (row t of q, at position pos), kv heads
// [h, h + nh), positions [k0, k1), walked as [k0, kx) then [kx, k1) (kx: the
// tile boundary after a window's first position, tile_end_at; else k0).
// Decode items hold every kv head of their sequence when a head's run of a
// block is short (the kernel then reads each block as one run:
// attention_kernel.hpp), else one head.
struct Work {
  int64_t b, h, nh, t, pos, k0, k1, kx;
};

// Runs every decode item; writes (m, l, acc) of item i, head h + j, row r to
// part + ((i * nh + j) * G + r) * (D + 2) (every item has the same nh).
void run_items(const float* q, const KvLayerView& kv, const PageTableView& p, int64_t Hq, float scale,
               const std::vector<Work>& work, float* part) {
  if (work.empty()) return;
  const int64_t D = kv.head_dim, G = Hq / kv.n_kv_heads, NH = work[0].nh;
  const AttendFn fn = kAttend.pick();
#pragma omp parallel num_threads(num_threads())
  {
    const size_t nr = size_t(NH * G), nrd = size_t(NH * G * D), ns = size_t(attn::scratch_floats(D, int(G), int(NH)));
    std::vector<float> qs(nrd), m(nr), l(nr), acc(nrd), scratch(ns);
    std::vector<int64_t> limit(static_cast<size_t>(G));
#pragma omp for schedule(static, 1)
    for (int64_t i = 0; i < int64_t(work.size()); ++i) {
      const Work& w = work[size_t(i)];
      std::fill(limit.begin(), limit.end(), w.pos);
      for (int64_t j = 0; j < NH; ++j)
        for (int64_t g = 0; g < G; ++g) {
          const float* src = q + (w.t * Hq + (w.h + j) * G + g) * D;
          float* dst = qs.data() + (j * G + g) * D;
          for (int64_t d = 0; d < D; ++d) dst[d] = src[d] * scale;
        }
      std::fill(m.begin(), m.end(), -INFINITY);
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      Item it{qs.data(), limit.data(), int(G),   w.k0,     w.kx,      p.indices + p.indptr[w.b],
              w.h,       int(NH),      m.data(), l.data(), acc.data()};
      if (w.kx > w.k0) fn(kv, it, scratch.data());
      it.k0 = w.kx, it.k1 = w.k1;
      if (w.k1 > w.kx) fn(kv, it, scratch.data());
      for (int64_t r = 0; r < NH * G; ++r) {
        float* o = part + (i * NH * G + r) * (D + 2);
        o[0] = m[size_t(r)];
        o[1] = l[size_t(r)];
        std::copy(acc.begin() + r * D, acc.begin() + (r + 1) * D, o + 2);
      }
    }
  }
}

// Merges `ns` partial states (stride between splits: `step` floats) into out[D]:
// out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s, M = max_s m_s (exact LSE merge).
void merge(const float* part, int64_t ns, int64_t step, int64_t D, float* out) {
  float M = -INFINITY;
  for (int64_t s = 0; s < ns; ++s) M = std::max(M, part[s * step]);
  float L = 0;
  for (int64_t d = 0; d < D; ++d) out[d] = 0;
  for (int64_t s = 0; s < ns; ++s) {
    const float* p = part + s * step;
    if (p[1] == 0) continue;  // an empty split
    const float w = std::exp(p[0] - M);
    L += w * p[1];
    for (int64_t d = 0; d < D; ++d) out[d] += w * p[2 + d];
  }
  for (int64_t d = 0; d < D; ++d) out[d] /= L;
}

// Prefill. A row at position pos sees [0, pos] in context chunks of C
// positions, [c C, min((c + 1) C, pos + 1)) for c = 0 .. pos / C; each chunk is
// run by the kernel from a fresh state and the chunks' (m, l, acc) are folded
// into the row in chunk order (fold). A row's bits therefore depend on its q,
// its position, C and the rows it sees, never on the batch, the tile it is in,
// or which item or thread ran which chunk: a prompt prefilled cold, in pieces,
// over a reused prefix, or one token at a time (the engine's decode) gives the
// same rows. Chunks let one long sequence use every thread: when the tiles are
// fewer than 4 per thread, a tile's chunks are dealt to several items whose
// partial states are kept and folded afterwards (split); otherwise an item runs
// all its tile's chunks and folds them as it goes.
struct PrefillTile {
  int64_t b, h, t0, nq, pos0, cf, nc;  // sequence, kv head, q rows [t0, t0 + nq) at positions pos0 .., chunks [cf, nc)
};
struct PrefillItem {
  int64_t tile, c0, c1;  // chunks [c0, c1) of the tile
  int64_t part;  // split: first float of its partial states (chunk c, row r at part + ((c - c0) * rows + r) * (D + 2))
};

// Folds one chunk's state (m, l, acc[D]) of a row into the row's running
// (M, L, A[D]), which starts empty (L = 0): an empty chunk (l = 0) is skipped,
// the first non-empty one copied, later ones rescaled to the larger max.
// A row that saw only empty chunks keeps A = 0, L = 0 and ends as 0 / 0 = NaN.
void fold(float& M, float& L, float* A, float m, float l, const float* acc, int64_t D) {
  if (l == 0) return;
  if (L == 0) {  // + 0: as attention_decode's merge of one split (-0 becomes +0)
    M = m, L = l;
    for (int64_t d = 0; d < D; ++d) A[d] = acc[d] + 0.0f;
  } else if (m > M) {
    const float a = std::exp(M - m);
    L = L * a + l;
    for (int64_t d = 0; d < D; ++d) A[d] = A[d] * a + acc[d];
    M = m;
  } else {
    const float w = std::exp(m - M);
    L += w * l;
    for (int64_t d = 0; d < D; ++d) A[d] += w * acc[d];
  }
}

// With a window W, row r (position pos_r) sees [lo_r, pos_r], lo_r = pos_r - W + 1:
// chunks before the first row's lo are not visited, and in the chunk that
// holds lo_r the row walks [lo_r, X_r) (X_r: the boundary of the chunk walk's
// tile holding lo_r, attn::tile_end_at), then the chunk walk's tiles from X_r.
// Rows with lo_r at or before the chunk's start walk it from the start. A
// tile a row does not see is an exact no-op for it, so each row's bits still
// depend only on its position, q, C and the rows it sees.
void run_prefill(const float* q, const KvLayerView& kv, const PageTableView& p, int64_t Hq, float scale, int64_t C,
                 int64_t W, const std::vector<PrefillTile>& tiles, float* out) {
  if (tiles.empty()) return;
  const int64_t D = kv.head_dim, G = Hq / kv.n_kv_heads, R = attn::kQTile * G;
  const int64_t nthreads = num_threads();
  // Split when the tiles are too few for the threads (B = 1 decode: one tile a
  // kv head) and the partial states stay small (<= 64 MiB): each tile into
  // `pieces` items, >= 4 items a thread and, where a few more pieces do it, a
  // multiple of the thread count (3 kv heads on 2 threads: 12 items, not 9).
  const int64_t nt = int64_t(tiles.size());
  int64_t pieces = 1, split_floats = 0;
  if (nthreads > 1 && nt < 4 * nthreads) {
    pieces = (4 * nthreads + nt - 1) / nt;
    for (int64_t p2 = pieces; p2 < pieces + nthreads; ++p2)
      if (nt * p2 % nthreads == 0) {
        pieces = p2;
        break;
      }
    for (const PrefillTile& t : tiles) split_floats += (t.nc - t.cf) * t.nq * G * (D + 2);
    if (split_floats > (int64_t(16) << 20)) pieces = 1;
  }
  const bool split = pieces > 1;
  std::vector<PrefillItem> items;
  std::vector<int64_t> first(tiles.size()), per(tiles.size());  // a tile's first item, chunks an item
  int64_t off = 0;
  for (size_t t = 0; t < tiles.size(); ++t) {
    const int64_t cf = tiles[t].cf, nc = tiles[t].nc - cf, rows = tiles[t].nq * G;
    per[t] = split ? (nc + std::min(pieces, nc) - 1) / std::min(pieces, nc) : nc;
    first[t] = int64_t(items.size());
    for (int64_t c0 = cf; c0 < cf + nc; c0 += per[t]) {
      const int64_t c1 = std::min(cf + nc, c0 + per[t]);
      items.push_back({int64_t(t), c0, c1, off});
      if (split) off += (c1 - c0) * rows * (D + 2);
    }
  }
  std::vector<float> part(static_cast<size_t>(off));
  const AttendFn fn = kAttend.pick();
#pragma omp parallel num_threads(int(std::min <int64_t>(nthreads, int64_t(items.size()))))
  {
    const size_t ns = size_t(attn::scratch_floats(D, int(R), 1));
    const size_t nr = static_cast<size_t>(R), nrd = static_cast<size_t>(R * D);
    std::vector<float> qs(nrd), m(nr), l(nr), acc(nrd), scratch(ns), M(nr), L(nr), A(nrd);
    std::vector<int64_t> limit(static_cast<size_t>(R));
#pragma omp for schedule(static, 1)
    for (int64_t i = 0; i < int64_t(items.size()); ++i) {
      const PrefillItem& it = items[size_t(i)];
      const PrefillTile& w = tiles[size_t(it.tile)];
      const int64_t rows = w.nq * G;
      for (int64_t t = 0; t < w.nq; ++t)
        for (int64_t g = 0; g < G; ++g) {
          limit[size_t(t * G + g)] = w.pos0 + t;
          const float* src = q + ((w.t0 + t) * Hq + w.h * G + g) * D;
          float* dst = qs.data() + (t * G + g) * D;
          for (int64_t d = 0; d < D; ++d) dst[d] = src[d] * scale;
        }
      std::fill(L.begin(), L.begin() + rows, 0.0f);
      for (int64_t c = it.c0; c < it.c1; ++c) {
        // the chunk's rows: those at positions >= its start (a suffix of the
        // tile) whose window starts before its end, [r0, rb)
        const int64_t k0 = c * C, kend = std::min(k0 + C, w.pos0 + w.nq);
        const int64_t r0 = std::max<int64_t>(0, k0 - w.pos0) * G;
        const int64_t rb = W ? std::clamp<int64_t>(k0 + C + W - 1 - w.pos0, 0, w.nq) * G : rows;
        std::fill(m.begin() + r0, m.begin() + rows, -INFINITY);
        std::fill(l.begin() + r0, l.begin() + rows, 0.0f);
        std::fill(acc.begin() + r0 * D, acc.begin() + rows * D, 0.0f);
        const auto run = [&](int64_t ra, int64_t rz, int64_t a, int64_t z) {  // rows [ra, rz) over [a, z)
          if (rz <= ra || z <= a) return;
          Item ki{qs.data() + ra * D, limit.data() + ra, int(rz - ra),       a, z, p.indices + p.indptr[w.b], w.h, 1,
                  m.data() + ra,      l.data() + ra,     acc.data() + ra * D};
          fn(kv, ki, scratch.data());
        };
        // rows [r0, ra) see the chunk from k0; each later one from its lo, inside it
        int64_t ra = rb, J = k0;
        const auto lo_of = [&](int64_t r) { return w.pos0 + r / G - W + 1; };
        if (W)
          for (int64_t r = r0; r < rb; r += G)
            if (lo_of(r) > k0) {
              ra = std::min(ra, r);
              J = std::max(J, attn::tile_end_at(kv, k0, k0 + C, lo_of(r)));
            }
        J = std::min(J, kend);
        run(r0, ra, k0, J);
        for (int64_t r = ra; r < rb; r += G) {
          const int64_t X = std::min(attn::tile_end_at(kv, k0, k0 + C, lo_of(r)), kend);
          run(r, r + G, lo_of(r), X);
          run(r, r + G, X, J);
        }
        run(r0, rb, J, kend);
        for (int64_t r = r0; r < rows; ++r) {
          if (split) {
            float* o = part.data() + it.part + ((c - it.c0) * rows + r) * (D + 2);
            o[0] = m[size_t(r)], o[1] = l[size_t(r)];
            std::copy(acc.begin() + r * D, acc.begin() + (r + 1) * D, o + 2);
          } else {
            fold(M[size_t(r)], L[size_t(r)], A.data() + r * D, m[size_t(r)], l[size_t(r)], acc.data() + r * D, D);
          }
        }
      }
      if (!split)
        for (int64_t r = 0; r < rows; ++r) {
          float* o = out + ((w.t0 + r / G) * Hq + w.h * G + r % G) * D;
          for (int64_t d = 0; d < D; ++d) o[d] = (L[size_t(r)] == 0 ? 0.0f : A[size_t(r * D + d)]) / L[size_t(r)];
        }
    }
  }
  if (!split) return;
    // Each row folds its chunks 0 .. pos / C in order, from whichever items ran them.
#pragma omp parallel for num_threads(int(nthreads)) schedule(static)
  for (int64_t t = 0; t < int64_t(tiles.size()); ++t) {
    const PrefillTile& w = tiles[size_t(t)];
    const int64_t rows = w.nq * G;
    std::vector<float> A(static_cast<size_t>(D));
    for (int64_t r = 0; r < rows; ++r) {
      float M = -INFINITY, L = 0;
      for (int64_t c = w.cf; c <= (w.pos0 + r / G) / C; ++c) {
        const PrefillItem& it = items[size_t(first[size_t(t)] + (c - w.cf) / per[size_t(t)])];
        const float* o = part.data() + it.part + ((c - it.c0) * rows + r) * (D + 2);
        fold(M, L, A.data(), o[0], o[1], o + 2, D);
      }
      float* dst = out + ((w.t0 + r / G) * Hq + w.h * G + r % G) * D;
      for (int64_t d = 0; d < D; ++d) dst[d] = (L == 0 ? 0.0f : A[size_t(d)]) / L;
    }
  }
}

int cpu_splits(int64_t work, int64_t max_len) {
  const int64_t want = (4 * int64_t(num_threads()) + work - 1) / work;  // aim at >= 4 items per thread
  return int(std::clamp<int64_t>(std::min(want, max_len / 256), 1, 64));
}
}  // namespace

// The kv heads of one decode item. A head's rows of a block are one run of
// block_tokens rows, and a block's heads are stored one after another, so an
// item that holds every head of its sequence reads each block as one run
// (attention_kernel.hpp). That pays when a head's run is short (a 16-token
// block of f32 Llama-3-8B rows: 8 KiB): `llmk bench attention --only
// llama3,B1,ctx8192` (paged f32 decode and its "read" row). With long runs
// (a contiguous cache, blocks of hundreds of tokens) items of one head read
// one long run each, which measured faster than nh runs in turn.
int64_t attention_decode_heads_per_item(const KvLayerView& kv) {
  check_kv_shape("attention_decode_heads_per_item", kv);  // the run's bytes below stay far from overflow
  constexpr int64_t kShortRun = int64_t(64) << 10;
  const int64_t run = kv.block_tokens *
                      std::max(kv_row_bytes(kv.k_type, kv.head_dim), kv_row_bytes(kv.v_type, kv.head_dim));
  return run < kShortRun ? kv.n_kv_heads : 1;
}

const char* decode_cuda_kernel_name(DecodeCudaKernel k) {
  switch (k) {
    case DecodeCudaKernel::automatic: return "automatic";
    case DecodeCudaKernel::lane_per_element: return "lane_per_element";
    case DecodeCudaKernel::token_tiles: return "token_tiles";
    case DecodeCudaKernel::token_tiles_mma: return "token_tiles_mma";
  }
  return "unknown";
}

// The tile kernels copy K rows to shared memory 16 bytes at a time, and read
// an int4 V group's scale and min (and its quants) as 32-bit words: kv.v may be
// only 2-byte aligned at the API (kv_type_align), which a GPU faults on.
bool decode_cuda_token_tiles_fit(const KvLayerView& kv) {
  const int64_t krow = kv_row_bytes(kv.k_type, kv.head_dim), bt = kv.block_tokens, tile = attn::kDecodeTile;
  return kv.k_type == kv.v_type && (kv.k_type == KvType::int8 || kv.k_type == KvType::int4) &&
         reinterpret_cast<uintptr_t>(kv.k) % 16 == 0 &&
         (kv.v_type != KvType::int4 || reinterpret_cast<uintptr_t>(kv.v) % 4 == 0) && bt * krow % 16 == 0 &&
         (bt % tile == 0 || tile % bt == 0);
}

DecodeCudaKernel decode_cuda_kernel_pick(const KvLayerView& kv) {
  return decode_cuda_token_tiles_fit(kv) ? DecodeCudaKernel::token_tiles_mma : DecodeCudaKernel::lane_per_element;
}

int attention_decode_splits(const KvLayerView& kv, const PageTableView& pages, int64_t max_kv_len) {
  // attention_decode's own checks of the counts the split count divides by
  const char* fn = "attention_decode_splits";
  check_kv_shape(fn, kv);
  LLMK_CHECK_ARG(pages.num_seqs >= 1, fn, "pages.num_seqs", pages.num_seqs, "must be >= 1");
  LLMK_CHECK_ARG(max_kv_len >= 0, fn, "max_kv_len", max_kv_len, "must be >= 0");
#ifdef LLMK_HAVE_CUDA
  if (kv.device == Device::cuda) return attn::decode_cuda_splits(pages.num_seqs * kv.n_kv_heads, max_kv_len);
#endif
  return cpu_splits(pages.num_seqs * kv.n_kv_heads / attention_decode_heads_per_item(kv), max_kv_len);
}

void attention_decode(const float* q, const KvLayerView& kv, const PageTableView& p, int64_t Hq, float scale,
                      float* out, const AttentionOptions& opt) {
  const char* fn = "attention_decode";
  const int64_t max_len = validate_common(fn, q, kv, p, Hq, scale, out);
  LLMK_CHECK_ARG(opt.splits >= 0 && opt.splits <= 1024, fn, "opt.splits", opt.splits, "must be in [0, 1024]");
  LLMK_CHECK_ARG(opt.window >= 0, fn, "opt.window", opt.window, "must be >= 0 (0: no window)");
  LLMK_CHECK_ARG(opt.prefill_chunk >= 16 && opt.prefill_chunk <= (int64_t(1) << 30) && opt.prefill_chunk % 16 == 0, fn,
                 "opt.prefill_chunk", opt.prefill_chunk, "must be a multiple of 16 in [16, 2^30]");
  if (kv.device == Device::cuda) {
#ifdef LLMK_HAVE_CUDA
    // device tables are not read on the host: the caller states the longest context
    LLMK_CHECK_ARG(opt.max_kv_len >= 0, fn, "opt.max_kv_len", opt.max_kv_len, "must be >= 0");
    const int64_t len = opt.max_kv_len ? opt.max_kv_len : 32768;
    LLMK_CHECK_ARG(kv.n_kv_heads * ((Hq / kv.n_kv_heads + 7) / 8) <= 65535, fn, "kv.n_kv_heads", kv.n_kv_heads,
                   "times the CTAs a kv head takes (one per 8 query heads) must be <= 65535 (a grid dimension)");
    LLMK_CHECK_ARG(p.num_seqs <= std::numeric_limits<int32_t>::max() / Hq, fn, "pages.num_seqs", p.num_seqs,
                   "times n_heads = " + std::to_string(Hq) + " must be < 2^31 (the grid of the split merge)");
    LLMK_CHECK_ARG(double(kv.num_blocks) * double(kv.n_kv_heads) * double(kv.block_tokens) < 4294967296.0, fn,
                   "kv.num_blocks", kv.num_blocks,
                   "times n_kv_heads x block_tokens must be < 2^32 (the device kernel's 32-bit pool rows)");
    const int kernel = int(opt.cuda_decode);
    LLMK_CHECK_ARG(kernel >= 0 && kernel <= int(DecodeCudaKernel::token_tiles_mma), fn, "opt.cuda_decode", kernel,
                   "must be a DecodeCudaKernel");
    const DecodeCudaKernel run = opt.cuda_decode == DecodeCudaKernel::automatic ? decode_cuda_kernel_pick(kv)
                                                                                : opt.cuda_decode;
    LLMK_CHECK_ARG(run == DecodeCudaKernel::lane_per_element || decode_cuda_token_tiles_fit(kv), fn, "opt.cuda_decode",
                   std::string(decode_cuda_kernel_name(run)),
                   "needs K and V both int8 or both int4, kv.k 16-byte aligned, block_tokens x row bytes a multiple "
                   "of 16 and block_tokens dividing 32 or a multiple of 32");
    const int ns = opt.splits ? opt.splits
                              : attention_decode_splits(kv, p, opt.window ? std::min(len, opt.window) : len);
    attn::decode_cuda(q, kv, p, Hq, scale, out, ns, opt.window, run, opt.stream);
    return;
#else
    throw_invalid_argument(fn, "kv.device", "cuda", "this llmk was built without CUDA");
#endif
  }
  for (int64_t b = 0; b < p.num_seqs; ++b)
    LLMK_CHECK_ARG(kv_len_of(p, b, kv.block_tokens) >= 1, fn, "pages", "sequence " + std::to_string(b) + " empty",
                   "every decoded sequence needs >= 1 cached token (append the new token first)");
  const int64_t H = kv.n_kv_heads, G = Hq / H, D = kv.head_dim;
  LLMK_CHECK_ARG(!ranges_overlap(out, p.num_seqs * Hq * D * 4, q, p.num_seqs * Hq * D * 4), fn, "out", out,
                 "must not overlap q");
  const int64_t nh = attention_decode_heads_per_item(kv), HG = H / nh;  // HG head groups a sequence
  const int64_t W = opt.window;
  const int64_t ns = opt.splits ? opt.splits : cpu_splits(p.num_seqs * HG, W ? std::min(W, max_len) : max_len);
  std::vector<Work> work;  // (b, head group c, split s) at (b * HG + c) * ns + s
  for (int64_t b = 0; b < p.num_seqs; ++b) {
    // the window's positions [lo, len), split from the tile boundary a at or before lo;
    // the first split walks [lo, kx) first: run_prefill's rule, in the walk from the
    // start g0 of lo's prefill chunk (so one split equals a one-token prefill within a chunk)
    const int64_t len = kv_len_of(p, b, kv.block_tokens), lo = W ? std::max<int64_t>(0, len - W) : 0;
    const int64_t g0 = lo / opt.prefill_chunk * opt.prefill_chunk;
    const int64_t a = lo / kTile * kTile, kx = lo > 0 ? attn::tile_end_at(kv, g0, g0 + opt.prefill_chunk, lo) : 0;
    const int64_t chunk = ((len - a + ns - 1) / ns + kTile - 1) / kTile * kTile;  // tile-aligned split length
    for (int64_t c = 0; c < HG; ++c)
      for (int64_t s = 0; s < ns; ++s) {
        const int64_t k0 = std::min(len, std::max(lo, a + s * chunk)), k1 = std::min(len, a + (s + 1) * chunk);
        work.push_back({b, c * nh, nh, b, len - 1, k0, std::max(k0, k1), std::clamp(kx, k0, std::max(k0, k1))});
      }
  }
  std::vector<float> part(work.size() * size_t(nh * G * (D + 2))), qrot;
  run_items(rotated_queries(q, p.num_seqs * Hq, kv, qrot), kv, p, Hq, scale, work, part.data());
  // query head hq = h * G + g (h = c * nh + j) of sequence b, split s: part row
  // (((b * HG + c) * ns + s) * nh + j) * G + g; the splits of one head are nh * G rows apart
#pragma omp parallel for num_threads(num_threads()) schedule(static)
  for (int64_t bq = 0; bq < p.num_seqs * Hq; ++bq) {
    const int64_t b = bq / Hq, h = bq % Hq / G, g = bq % G, c = h / nh, j = h % nh;
    const int64_t row = (((b * HG + c) * ns) * nh + j) * G + g;
    merge(part.data() + row * (D + 2), ns, nh * G * (D + 2), D, out + bq * D);
  }
}

void attention_prefill(const float* q, const int64_t* qo_indptr, const KvLayerView& kv, const PageTableView& p,
                       int64_t Hq, float scale, float* out, const AttentionOptions& opt) {
  const char* fn = "attention_prefill";
  validate_common(fn, q, kv, p, Hq, scale, out);
  LLMK_CHECK_ARG(qo_indptr != nullptr, fn, "qo_indptr", qo_indptr, "must not be null");
  LLMK_CHECK_ARG(opt.window >= 0, fn, "opt.window", opt.window, "must be >= 0 (0: no window)");
  if (kv.device == Device::cuda) {
    LLMK_CHECK_ARG(opt.window == 0, fn, "opt.window", opt.window,
                   "must be 0 for CUDA tensors: the device prefill has no window");
#ifdef LLMK_HAVE_CUDA
    // device tables are not read on the host: the caller states qo_indptr[B]
    LLMK_CHECK_ARG(opt.num_tokens >= 0, fn, "opt.num_tokens", opt.num_tokens,
                   "must be qo_indptr[B] (>= 0) for CUDA tensors: the host does not read device tables");
    attention_prefill_cuda(q, qo_indptr, opt.num_tokens, kv, p, Hq, scale, out, opt.stream);
    return;
#else
    throw_invalid_argument(fn, "kv.device", "cuda", "this llmk was built without CUDA");
#endif
  }
  LLMK_CHECK_ARG(qo_indptr[0] == 0, fn, "qo_indptr[0]", qo_indptr[0], "must be 0");
  LLMK_CHECK_ARG(opt.prefill_chunk >= 16 && opt.prefill_chunk <= (int64_t(1) << 30) && opt.prefill_chunk % 16 == 0, fn,
                 "opt.prefill_chunk", opt.prefill_chunk, "must be a multiple of 16 in [16, 2^30]");
  const int64_t H = kv.n_kv_heads, D = kv.head_dim, C = opt.prefill_chunk, W = opt.window;
  std::vector<PrefillTile> tiles;
  for (int64_t b = 0; b < p.num_seqs; ++b) {
    const int64_t qo = qo_indptr[b + 1] - qo_indptr[b], len = kv_len_of(p, b, kv.block_tokens);
    LLMK_CHECK_ARG(qo >= 0 && qo <= len, fn, "qo_indptr[" + std::to_string(b + 1) + "]", qo_indptr[b + 1],
                   "sequence " + std::to_string(b) + " has " + std::to_string(qo) + " new tokens but " +
                       std::to_string(len) + " cached (need 0 <= new <= cached)");
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < qo; i += attn::kQTile) {
        const int64_t nq = std::min<int64_t>(attn::kQTile, qo - i), pos0 = len - qo + i;
        const int64_t cf = W ? std::max<int64_t>(0, pos0 - W + 1) / C
                             : 0;  // chunks before the first row's window: unseen
        tiles.push_back({b, h, qo_indptr[b] + i, nq, pos0, cf, (pos0 + nq - 1) / C + 1});
      }
  }
  const int64_t T = qo_indptr[p.num_seqs];
  LLMK_CHECK_ARG(!ranges_overlap(out, T * Hq * D * 4, q, T * Hq * D * 4), fn, "out", out, "must not overlap q");
  std::vector<float> qrot;
  run_prefill(rotated_queries(q, T * Hq, kv, qrot), kv, p, Hq, scale, C, W, tiles, out);
}

}  // namespace llmk
