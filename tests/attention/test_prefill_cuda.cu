// attention_prefill_cuda against the double oracle (attention_reference over
// the fixture's dequantized rows; the kernel keeps f32 queries) for every
// storage type (and a mixed K/V pair), head_dim 64/80/96/128/256 (and the
// partly filled lane layouts 16/48/112/160/192), MHA / GQA /
// MQA and every CTA row count the launcher may pick; varlen batches whose new
// tokens straddle the block size and 1023/1024/1025, random cached prefixes
// over randomly placed blocks (make_filled), prefix-only and empty sequences;
// a leak test (another sequence's or a future token's K/V set to NaN must not
// move any output it may not see); equality with the CPU prefill to a derived
// bound; named argument errors (PrefillCudaArgs runs without a device). Suites
// *CudaSanitize* run small shapes under compute-sanitizer (scripts/gpu-check).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "tests/attention/attn_fixture.hpp"

using namespace llmk;
using test::DeviceGuarded;
using test::Filled;

namespace {
template <class T>
struct Dev {  // a device copy of a host vector
  T* p = nullptr;
  explicit Dev(const std::vector<T>& h) {
    if (cudaMalloc(&p, std::max<size_t>(1, h.size()) * sizeof(T)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc");
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
};

struct Shape {
  int64_t Hq, Hkv, D;
};

std::vector<uint8_t> pool_bytes(const void* pool, KvType t, const KvLayerView& hv) {
  const auto* p = static_cast<const uint8_t*>(pool);
  return {p, p + hv.num_blocks * hv.n_kv_heads * hv.block_tokens * kv_row_bytes(t, hv.head_dim)};
}

struct OnDevice {  // the fixture's pools (possibly edited) and page table on the device
  Dev<uint8_t> k, v;
  Dev<int64_t> indptr;
  Dev<int32_t> indices, last_len;
  KvLayerView kv;
  PageTableView pages;
  OnDevice(const Filled& f, const std::vector<uint8_t>& kb, const std::vector<uint8_t>& vb)
      : k(kb), v(vb), indptr(f.pages.indptr), indices(f.pages.indices), last_len(f.pages.last_len) {
    kv = f.cache->layer(0);
    kv.k = k.p, kv.v = v.p, kv.device = Device::cuda;
    pages = {indptr.p, indices.p, last_len.p, int64_t(f.seqs.size()), Device::cuda};
  }
  explicit OnDevice(const Filled& f)
      : OnDevice(f, pool_bytes(f.cache->layer(0).k, f.cache->layer(0).k_type, f.cache->layer(0)),
                 pool_bytes(f.cache->layer(0).v, f.cache->layer(0).v_type, f.cache->layer(0))) {}
};

// A varlen batch: sequence b has prefix[b] cached tokens and qo_len[b] new ones.
struct Batch {
  Filled f;
  std::vector<int64_t> qo;  // [B+1]
  std::vector<float> q;     // [T, Hq, D]
  int64_t T = 0;
};

// shape_k edits the K rows (every sequence's tokens in turn, [token][Hkv][D])
// before they are cached (make_filled).
Batch make_batch(const Shape& s, KvType kt, KvType vt, int64_t bt, const std::vector<int64_t>& qo_len,
                 const std::vector<int64_t>& prefix, uint64_t seed, bool k_rotate = false,
                 const std::function<void(std::vector<float>&)>& shape_k = {}) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = kt, cfg.v_type = vt, cfg.block_tokens = bt;
  cfg.k_rotate = k_rotate;
  std::vector<int64_t> lens;
  Batch x;
  x.qo = {0};
  for (size_t b = 0; b < qo_len.size(); ++b) {
    lens.push_back(prefix[b] + qo_len[b]);
    x.qo.push_back(x.qo.back() + qo_len[b]);
  }
  x.f = test::make_filled(cfg, lens, seed, shape_k);
  x.T = x.qo.back();
  x.q.resize(size_t(x.T * s.Hq * s.D));
  test::fill_normal(x.q.data(), x.q.size(), seed + 3);
  return x;
}

std::vector<double> oracle(const Batch& x, const Shape& s, double scale) {
  std::vector<double> want(x.q.size());
  attention_reference(x.q.data(), x.qo.data(), x.f.kq.data(), x.f.vq.data(), x.f.kv_indptr.data(),
                      int64_t(x.f.seqs.size()), s.Hq, s.Hkv, s.D, scale, want.data());
  return want;
}

// Runs every configuration the launcher may pick, then its own choice (0),
// each into a fresh output pre-filled with NaN (an unwritten element fails)
// and followed by a sentinel guard. Returns (cta_rows, output) pairs.
std::vector<std::pair<int, std::vector<float>>> run_all(const Batch& x, const OnDevice& d, const Shape& s,
                                                        float scale) {
  Dev<float> dq(x.q);
  Dev<int64_t> dqo(x.qo);
  std::vector<int> cfgs = attention_prefill_cuda_configs(d.kv, s.Hq, x.T, d.pages.num_seqs);
  cfgs.push_back(0);
  std::vector<std::pair<int, std::vector<float>>> outs;
  for (int c : cfgs) {
    DeviceGuarded<float> out(x.q.size());
    cudaMemset(out.data(), 0xFF, x.q.size() * sizeof(float));
    attention_prefill_cuda(dq.p, dqo.p, x.T, d.kv, d.pages, s.Hq, scale, out.data(), nullptr, c);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "cta_rows " << c;
    EXPECT_TRUE(out.guard_intact()) << "cta_rows " << c;
    outs.emplace_back(c, out.download());
  }
  return outs;
}

// f32 accumulation against the double oracle: scores of D <= 256 products
// (error ~ sqrt(D) * 2^-24 * |q||k| ~ 1e-6) and weights over <= ~1400 keys;
// the observed error is ~1e-6 and 1e-5 abs + rel is the issue's bar. A leak
// (a poisoned slot, NaN / 1e4, or a future key of weight ~1/len) misses it.
constexpr double kTol = 1e-5;

void check(const Shape& s, KvType kt, KvType vt, int64_t bt, const std::vector<int64_t>& qo_len,
           const std::vector<int64_t>& prefix, double scale_mul, uint64_t seed) {
  const Batch x = make_batch(s, kt, vt, bt, qo_len, prefix, seed);
  const double scale = scale_mul / std::sqrt(double(s.D));
  const auto want = oracle(x, s, double(float(scale)));
  const OnDevice d(x.f);
  for (const auto& [c, got] : run_all(x, d, s, float(scale)))
    ASSERT_TRUE(test::all_close(got.data(), want.data(), want.size(), kTol, kTol,
                                std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) + " D=" + std::to_string(s.D) +
                                    " Hq=" + std::to_string(s.Hq) + "/" + std::to_string(s.Hkv) +
                                    " bt=" + std::to_string(bt) + " cta_rows=" + std::to_string(c)));
}

constexpr std::pair<KvType, KvType> kTypes[] = {{KvType::f32, KvType::f32},   {KvType::f16, KvType::f16},
                                                {KvType::bf16, KvType::bf16}, {KvType::int8, KvType::int8},
                                                {KvType::int4, KvType::int4}, {KvType::int8, KvType::int4}};
}  // namespace

TEST(PrefillCuda, EveryTypeShapeAndConfig) {
  LLMK_REQUIRE_CUDA();
  // GQA 9/3, MHA, MQA 32/1, GQA 32/8, GQA 4/2 at head_dim 256
  const Shape shapes[] = {{9, 3, 64}, {8, 8, 80}, {32, 1, 96}, {32, 8, 128}, {4, 2, 256}};
  std::mt19937_64 rng(11);
  for (const Shape& s : shapes)
    for (auto [kt, vt] : kTypes) {
      // new tokens straddle the block (16) and a CTA's rows; random cached
      // prefixes; a prefix-only sequence (0 new) and an empty one (0 + 0)
      const std::vector<int64_t> qo_len = {1, 15, 16, 17, 0, 40, 0, 3};
      std::vector<int64_t> prefix;
      for (int64_t n : qo_len) prefix.push_back(int64_t(rng() % 50));
      prefix[6] = 0;
      check(s, kt, vt, 16, qo_len, prefix, 1.0, uint64_t(s.D * 7 + s.Hq + int(kt) * 3 + int(vt)));
    }
}

// The register layouts a lane's share of the head only partly fills (D = 16
// and 48: 2 elements a lane; 112: 4; 160 and 192: 8), as decode is tested.
TEST(PrefillCuda, PartialLaneHeadDims) {
  LLMK_REQUIRE_CUDA();
  for (const Shape& s : {Shape{4, 2, 16}, Shape{6, 3, 48}, Shape{8, 2, 112}, Shape{4, 1, 160}, Shape{2, 2, 192}})
    for (auto [kt, vt] : {std::pair{KvType::f32, KvType::f32}, std::pair{KvType::int8, KvType::int4}})
      check(s, kt, vt, 16, {1, 17, 40, 0}, {5, 0, 33, 12}, 1.0, uint64_t(s.D * 5 + int(kt)));
}

// As AttentionCuda.KeysScoredMinusInfinityGetWeightZero, for prefill: keys
// whose score is -inf (K element 0 = -inf, query element 0 = 1) get weight 0
// under every CTA row count: the first 40 cached keys of sequence 0 (whole
// tiles of them), and every key of sequence 1, whose queries see only such
// keys and give NaN, as the oracle.
TEST(PrefillCuda, KeysScoredMinusInfinityGetWeightZero) {
  LLMK_REQUIRE_CUDA();
  const Shape s{4, 2, 64};
  const auto minus_inf = [](std::vector<float>& k) {
    for (int64_t j = 0; j < 107; ++j)
      if (j < 40 || j >= 100)
        for (int64_t h = 0; h < 2; ++h) k[size_t((j * 2 + h) * 64)] = -INFINITY;
  };
  for (KvType kt : {KvType::f32, KvType::f16, KvType::bf16}) {
    Batch x = make_batch(s, kt, KvType::f32, 16, {40, 7}, {60, 0}, 31 + int(kt), false, minus_inf);
    for (int64_t r = 0; r < x.T * s.Hq; ++r) x.q[size_t(r * s.D)] = 1.0f;
    const float scale = 0.125f;
    const auto want = oracle(x, s, scale);
    for (int64_t i = 0; i < 7 * s.Hq * s.D; ++i) ASSERT_TRUE(std::isnan(want[size_t(40 * s.Hq * s.D + i)]));
    const OnDevice d(x.f);
    for (const auto& [c, got] : run_all(x, d, s, scale))
      ASSERT_TRUE(test::all_close(got.data(), want.data(), want.size(), kTol, kTol,
                                  std::string(kv_type_name(kt)) + " cta_rows=" + std::to_string(c)));
  }
}

TEST(PrefillCuda, LongVarlenStraddlingPowersOfTwo) {
  LLMK_REQUIRE_CUDA();
  // 1023/1024/1025 new tokens over cached prefixes, an odd block size, and a
  // softmax scale other than 1/sqrt(D)
  // (emulated: the mixed int8 / int4 cache only)
  for (auto [kt, vt] : {kTypes[5], kTypes[0], kTypes[4]}) {
    check({9, 3, 64}, kt, vt, 16, {1023, 1, 1024, 1025, 0}, {0, 1000, 31, 250, 7}, 1.3, 5 + int(kt));
    if (test::kCudaEmulated) break;
  }
  check({4, 1, 128}, KvType::bf16, KvType::bf16, 7, {1025, 17}, {200, 1024}, 0.8, 9);
}

namespace {
// Sets every value of a cache row to NaN (for int8 / int4 through the f16 scale).
void poison_row(KvType t, uint8_t* row, int64_t D) {
  const uint16_t h_nan = 0x7E00, bf_nan = 0x7FC0;
  for (int64_t i = 0; i < D; ++i) {
    switch (t) {
      case KvType::f32: reinterpret_cast<float*>(row)[i] = NAN; break;
      case KvType::f16: std::memcpy(row + 2 * i, &h_nan, 2); break;
      case KvType::bf16: std::memcpy(row + 2 * i, &bf_nan, 2); break;
      case KvType::int8: reinterpret_cast<BlockQ8*>(row)[i / 32].d = h_nan; break;
      case KvType::int4: reinterpret_cast<BlockQ4*>(row)[i / 32].d = h_nan; break;
    }
  }
}

void check_no_leak(const Shape& s, KvType t, int64_t bt) {
  const std::vector<int64_t> qo_len = {5, 17, 1, 33, 0, 40}, prefix = {3, 0, 20, 16, 9, 1};
  const Batch x = make_batch(s, t, t, bt, qo_len, prefix, 77 + int(t));
  const float scale = float(1 / std::sqrt(double(s.D)));
  const OnDevice clean(x.f);
  const auto before = run_all(x, clean, s, scale);
  // the last token of every sequence: a future token for each earlier query
  // of its sequence, another sequence's token for every other query
  const KvLayerView hv = x.f.cache->layer(0);
  auto kb = pool_bytes(hv.k, t, hv), vb = pool_bytes(hv.v, t, hv);
  const int64_t row_bytes = kv_row_bytes(t, s.D);
  for (size_t b = 0; b < qo_len.size(); ++b) {
    const int64_t last = x.f.pages.indices[size_t(x.f.pages.indptr[b + 1] - 1)], off = x.f.pages.last_len[b] - 1;
    for (int64_t h = 0; h < s.Hkv; ++h) {
      const int64_t row = kv_pool_row(last, s.Hkv, h, bt, off);
      poison_row(t, kb.data() + row * row_bytes, s.D);
      poison_row(t, vb.data() + row * row_bytes, s.D);
    }
  }
  const OnDevice poisoned(x.f, kb, vb);
  const auto after = run_all(x, poisoned, s, scale);
  ASSERT_EQ(before.size(), after.size());
  const int64_t row = s.Hq * s.D;  // floats per token
  for (size_t c = 0; c < before.size(); ++c)
    for (size_t b = 0; b < qo_len.size(); ++b)
      for (int64_t i = 0; i < qo_len[b]; ++i) {
        const int64_t t0 = (x.qo[b] + i) * row;
        const float* g0 = before[c].second.data() + t0;
        const float* g1 = after[c].second.data() + t0;
        if (i + 1 < qo_len[b]) {  // must not see the poisoned token: bitwise unchanged
          ASSERT_EQ(0, std::memcmp(g0, g1, size_t(row) * sizeof(float)))
              << kv_type_name(t) << " cta_rows=" << before[c].first << " seq " << b << " token " << i;
        } else {  // sees it: NaN everywhere, which shows the poison reached the kernel
          for (int64_t e = 0; e < row; ++e)
            ASSERT_TRUE(std::isnan(g1[e])) << kv_type_name(t) << " seq " << b << " element " << e;
        }
      }
}
}  // namespace

TEST(PrefillCuda, NoLeakOfOtherSequencesOrFutureTokens) {
  LLMK_REQUIRE_CUDA();
  for (KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4}) {
    check_no_leak({9, 3, 64}, t, 16);
    check_no_leak({8, 1, 80}, t, 5);
  }
}

// The CPU prefill and the CUDA one on the same cache. Each is within kTol
// (abs + rel) of the oracle over the same dequantized rows, so for f32 / f16
// / bf16 K they differ by <= 2 kTol (1 + |x|). Against an int8 / int4 K the CPU
// quantizes x = q * scale per 32-group, moving each score by at most
// delta = sum_g amax_g(x) / 127 * (1/2 + 1e-4) * max_j sum_{i in g} |k_ji|
// (half a step plus f32 rounding, docs/kv_cache.md);
// scores moved by <= delta move softmax weights by a factor in
// [e^-2delta, e^2delta], hence an output by <= (e^(2 delta) - 1) max_j |v_j|.
// On AVX-512 the CPU's P.V over an int8 / int4 V takes 16-bit (8-bit: level
// avx512vbmi, int4 V) integer weights, which adds up to test::pv_rounding_bound
// (attn_fixture.hpp).
// As Attention.UnderflowedWeightOfAVisibleKeyStillMultipliesItsV on the CPU:
// a visible key of weight 0 (underflow) still multiplies its V (inf: NaN out);
// the kernel once skipped every key of weight 0, not only the invisible ones.
TEST(PrefillCuda, UnderflowedWeightOfAVisibleKeyStillMultipliesItsV) {
  LLMK_REQUIRE_CUDA();
  KvCacheConfig cfg;
  cfg.n_kv_heads = 1, cfg.head_dim = 64;
  Batch x;
  x.f = test::make_filled(
      cfg, {2}, 3,
      [](std::vector<float>& k) {
        for (size_t i = 0; i < 128; ++i) k[i] = i < 64 ? 0.0f : 3.125f;
      },
      [](std::vector<float>& v) { v[0] = INFINITY; });
  x.qo = {0, 1};
  x.q.assign(64, 1.0f);  // scores 0 and 200
  x.T = 1;
  const OnDevice d(x.f);
  for (const auto& [c, got] : run_all(x, d, Shape{1, 1, 64}, 1.0f)) {
    EXPECT_TRUE(std::isnan(got[0])) << "cta_rows " << c << ": " << got[0];
    for (int64_t e = 1; e < 64; ++e) EXPECT_EQ(got[size_t(e)], x.f.v[size_t(64 + e)]) << "cta_rows " << c << " " << e;
  }
}

TEST(PrefillCuda, MatchesCpuPrefill) {
  LLMK_REQUIRE_CUDA();
  const Shape s{8, 2, 128};
  for (auto [kt, vt] : kTypes) {
    const std::vector<int64_t> qo_len = {30, 1, 64, 0}, prefix = {10, 70, 0, 5};
    const Batch x = make_batch(s, kt, vt, 16, qo_len, prefix, 31 + int(kt) * 2 + int(vt));
    const float scale = float(1 / std::sqrt(double(s.D)));
    std::vector<float> cpu(x.q.size());
    attention_prefill(x.q.data(), x.qo.data(), x.f.cache->layer(0), x.f.pages.view(), s.Hq, scale, cpu.data());
    const auto qk = kv_type_quantized(kt) ? test::quantized_queries(x.q.data(), x.T * s.Hq, s.D, scale) : x.q;
    const auto vb = test::pv_rounding_bound(qk.data(), x.qo.data(), x.f, s.Hq, scale);
    const double* pvb = test::pv_bound_for(simd_level(), vb);
    // per sequence and kv head: max_j sum_{i in g} |k_ji| per group g, max |v|
    const int64_t D = s.D, Hkv = s.Hkv, G = s.Hq / Hkv, ng = (D + 31) / 32;
    const OnDevice d(x.f);
    for (const auto& [c, got] : run_all(x, d, s, scale))
      for (size_t b = 0; b < qo_len.size(); ++b)
        for (int64_t h = 0; h < Hkv; ++h) {
          std::vector<double> ksum(size_t(ng), 0.0);
          double vmax = 0;
          for (int64_t j = x.f.kv_indptr[b]; j < x.f.kv_indptr[b + 1]; ++j)
            for (int64_t g = 0; g < ng; ++g) {
              double a = 0;
              for (int64_t e = g * 32; e < std::min(D, g * 32 + 32); ++e) {
                a += std::fabs(x.f.kq[size_t((j * Hkv + h) * D + e)]);
                vmax = std::max(vmax, double(std::fabs(x.f.vq[size_t((j * Hkv + h) * D + e)])));
              }
              ksum[size_t(g)] = std::max(ksum[size_t(g)], a);
            }
          for (int64_t i = 0; i < qo_len[b]; ++i)
            for (int64_t hq = h * G; hq < (h + 1) * G; ++hq) {
              const int64_t at = ((x.qo[b] + i) * s.Hq + hq) * D;
              double delta = 0;
              if (kv_type_quantized(kt))
                for (int64_t g = 0; g < ng; ++g) {
                  double amax = 0;
                  for (int64_t e = g * 32; e < std::min(D, g * 32 + 32); ++e)
                    amax = std::max(amax, std::fabs(double(x.q[size_t(at + e)]) * scale));
                  delta += amax / 127 * (0.5 + 1e-4) * ksum[size_t(g)];
                }
              const double bound = std::expm1(2 * delta) * vmax;
              for (int64_t e = 0; e < D; ++e) {
                const double a = got[size_t(at + e)], w = cpu[size_t(at + e)];
                const double pv = pvb ? pvb[size_t(at + e)] : 0.0;
                ASSERT_LE(std::fabs(a - w), bound + pv + 2 * kTol * (1 + std::fabs(w)))
                    << kv_type_name(kt) << "/" << kv_type_name(vt) << " cta_rows=" << c << " seq " << b << " token "
                    << i << " head " << hq << " element " << e;
              }
            }
        }
  }
}

// A cache that stores H k (k_rotate) must be scored with H q: the oracle uses
// the unrotated rows, equal in exact arithmetic; the rotations add a few f32
// roundings to each score (~1e-6 here), inside kTol. Scoring the unrotated q
// against H k gives unrelated weights and misses it by far.
TEST(PrefillCuda, RotatedKeysAreScoredWithRotatedQueries) {
  LLMK_REQUIRE_CUDA();
  for (int64_t D : {64, 80, 128}) {
    const Shape s{8, 2, D};
    const Batch x = make_batch(s, KvType::f32, KvType::f32, 16, {30, 1, 17}, {10, 40, 0}, 77 + uint64_t(D), true);
    const double scale = 1 / std::sqrt(double(D));
    const auto want = oracle(x, s, double(float(scale)));
    const OnDevice d(x.f);
    ASSERT_TRUE(d.kv.k_rotated);
    for (const auto& [c, got] : run_all(x, d, s, float(scale)))
      ASSERT_TRUE(test::all_close(got.data(), want.data(), want.size(), kTol, kTol,
                                  "rotated K, D=" + std::to_string(D) + " cta_rows=" + std::to_string(c)));
  }
}

TEST(PrefillCuda, NoNewTokensWritesNothing) {
  LLMK_REQUIRE_CUDA();
  const Shape s{4, 2, 64};
  const Batch x = make_batch(s, KvType::f32, KvType::f32, 16, {0, 0}, {20, 0}, 3);
  const OnDevice d(x.f);
  Dev<int64_t> dqo(x.qo);
  DeviceGuarded<float> out(0);
  attention_prefill_cuda(nullptr, dqo.p, 0, d.kv, d.pages, s.Hq, 0.125f, out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(out.guard_intact());
}

TEST(PrefillCudaSanitize, Small) {
  LLMK_REQUIRE_CUDA();
  check({4, 2, 64}, KvType::f32, KvType::f32, 16, {3, 0, 20}, {5, 9, 0}, 1.0, 1);
  check({12, 1, 80}, KvType::int4, KvType::int8, 8, {2, 33}, {1, 0}, 1.0, 2);
  check({2, 2, 256}, KvType::bf16, KvType::f16, 16, {17}, {40}, 1.0, 3);
  check_no_leak({4, 2, 64}, KvType::int4, 16);
}

// Argument errors name the argument; all are raised before the device is
// touched (so this suite also runs where no GPU is present), except cta_rows.
TEST(PrefillCudaArgs, BadArgumentsAreNamed) {
  int64_t i64[3] = {0, 1, 2};
  int32_t i32[2] = {0, 1};
  float f[4] = {};
  KvLayerView kv;
  kv.k = f, kv.v = f, kv.num_blocks = 1, kv.n_kv_heads = 2, kv.head_dim = 64, kv.device = Device::cuda;
  const PageTableView pages{i64, i32, i32, 2, Device::cuda};
  auto expect = [&](const std::string& arg, auto call) {
    const std::string m = test::invalid_argument_message(call);
    EXPECT_NE(m.find("'" + arg + "'"), std::string::npos) << arg << ": " << m;
  };
  auto run = [&](KvLayerView k, PageTableView p, int64_t Hq, int64_t T, float scale, const int64_t* qo) {
    attention_prefill_cuda(f, qo, T, k, p, Hq, scale, f);
  };
  KvLayerView cpu = kv;
  cpu.device = Device::cpu;
  expect("kv.device", [&] { run(cpu, pages, 4, 1, 1.0f, i64); });
  PageTableView hp = pages;
  hp.device = Device::cpu;
  expect("pages.device", [&] { run(kv, hp, 4, 1, 1.0f, i64); });
  KvLayerView d72 = kv;
  d72.head_dim = 72;
  expect("kv.head_dim", [&] { run(d72, pages, 4, 1, 1.0f, i64); });
  expect("n_heads", [&] { run(kv, pages, 3, 1, 1.0f, i64); });
  expect("scale", [&] { run(kv, pages, 4, 1, NAN, i64); });
  expect("num_tokens", [&] { run(kv, pages, 4, -1, 1.0f, i64); });
  expect("qo_indptr", [&] { run(kv, pages, 4, 1, 1.0f, nullptr); });
  PageTableView none = pages;
  none.num_seqs = 0;
  expect("pages.num_seqs", [&] { run(kv, none, 4, 1, 1.0f, i64); });
  // the device-generic entry needs qo_indptr[B] on the host
  expect("opt.num_tokens", [&] { attention_prefill(f, i64, kv, pages, 4, 1.0f, f); });
}

// attention_prefill on CUDA views (opt.num_tokens given) is attention_prefill_cuda.
TEST(PrefillCuda, GenericEntryCallsTheCudaKernel) {
  LLMK_REQUIRE_CUDA();
  const Shape s{8, 2, 64};
  const Batch x = make_batch(s, KvType::int8, KvType::int4, 16, {30, 1}, {10, 40}, 91);
  const OnDevice d(x.f);
  Dev<float> dq(x.q);
  Dev<int64_t> dqo(x.qo);
  DeviceGuarded<float> a(x.q.size()), b(x.q.size());
  attention_prefill_cuda(dq.p, dqo.p, x.T, d.kv, d.pages, s.Hq, 0.125f, a.data());
  AttentionOptions opt;
  opt.num_tokens = x.T;
  attention_prefill(dq.p, dqo.p, d.kv, d.pages, s.Hq, 0.125f, b.data(), opt);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(a.guard_intact());
  EXPECT_TRUE(b.guard_intact());
  EXPECT_EQ(a.download(), b.download());
}

TEST(PrefillCudaArgs, BadCtaRowsIsNamed) {
  LLMK_REQUIRE_CUDA();
  const Shape s{4, 2, 64};
  const Batch x = make_batch(s, KvType::f32, KvType::f32, 16, {3}, {2}, 4);
  const OnDevice d(x.f);
  Dev<float> dq(x.q);
  Dev<int64_t> dqo(x.qo);
  DeviceGuarded<float> out(x.q.size());
  EXPECT_THROW(attention_prefill_cuda(dq.p, dqo.p, x.T, d.kv, d.pages, s.Hq, 0.125f, out.data(), nullptr, 24),
               InvalidArgument);
}
