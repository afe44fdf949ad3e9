// Attention over the paged cache against the double-precision oracle over a
// dense cache: every SIMD path, several thread counts and split counts, MHA /
// GQA / MQA, head_dim 64..256, every storage type (fused dequantization
// checked against the oracle over the dequantized rows), varlen prefill with
// poisoned slots, cached vs non-cached over many steps (recompute and a dense
// contiguous cache), paged vs contiguous bitwise, prefix reuse bitwise equal
// to a cold prefill, and the quantized-cache error within its analytic bound;
// the last three also with Hadamard-rotated K (k_rotate).
#include <cmath>
#include <cstring>
#include <random>

#include "llmk/parallel.hpp"
#include "tests/attention/attn_fixture.hpp"
#include "tests/kv/hadamard_bound.hpp"

using namespace llmk;
using test::Filled;

namespace {
struct Shape {
  int64_t Hq, Hkv, D;
};
constexpr Shape kShapes[] = {{9, 3, 64}, {8, 8, 80}, {8, 1, 96}, {4, 2, 128}, {2, 1, 256}};

class ThreadCount {  // restores the thread count
 public:
  explicit ThreadCount(int n) : prev_(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(prev_); }

 private:
  int prev_;
};

// Oracle for decode over the fixture's dequantized rows: one query per sequence.
std::vector<double> decode_oracle(const Filled& f, const float* q, const Shape& s, bool quantized_rows) {
  const int64_t B = int64_t(f.seqs.size());
  std::vector<int64_t> qo(static_cast<size_t>(B + 1));
  for (int64_t b = 0; b <= B; ++b) qo[size_t(b)] = b;
  std::vector<double> out(static_cast<size_t>(B * s.Hq * s.D));
  const auto& k = quantized_rows ? f.kq : f.k;
  const auto& v = quantized_rows ? f.vq : f.v;
  attention_reference(q, qo.data(), k.data(), v.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D,
                      1.0 / std::sqrt(double(s.D)), out.data());
  return out;
}

// Decode's qo_indptr over B sequences: one query each.
std::vector<int64_t> decode_qo(int64_t B) {
  std::vector<int64_t> qo(static_cast<size_t>(B + 1));
  for (int64_t b = 0; b <= B; ++b) qo[size_t(b)] = b;
  return qo;
}

using test::pv_bound_for;

// f32 accumulation over D <= 256 products and <= 1025 positions of N(0,1)
// data: the observed error is ~1e-6; 1e-5 abs + rel is the bar.
constexpr double kTol = 1e-5;
}  // namespace

TEST(Attention, DecodeMatchesOracleEveryPathTypeAndShape) {
  const std::pair<KvType, KvType> types[] = {{KvType::f32, KvType::f32},   {KvType::f16, KvType::f16},
                                             {KvType::bf16, KvType::bf16}, {KvType::int8, KvType::int8},
                                             {KvType::int4, KvType::int4}, {KvType::int8, KvType::int4}};
  for (const Shape& s : kShapes)
    for (auto [kt, vt] : types) {
      KvCacheConfig cfg;
      cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = kt, cfg.v_type = vt;
      const std::vector<int64_t> lens = s.D == 64 ? std::vector<int64_t>{1, 17, 1023, 1025}
                                                  : std::vector<int64_t>{1, 16, 255, 300};
      const Filled f = test::make_filled(cfg, lens, uint64_t(s.D) * 31 + int(kt) * 5 + int(vt));
      const int64_t B = int64_t(lens.size()), n = B * s.Hq * s.D;
      std::vector<float> q(static_cast<size_t>(n));
      test::fill_normal(q.data(), q.size(), 99);
      // against a quantized K the kernel uses int8 queries: the oracle gets them too
      const auto qk = kv_type_quantized(kt)
                          ? test::quantized_queries(q.data(), B * s.Hq, s.D, float(1 / std::sqrt(double(s.D))))
                          : q;
      const auto want = decode_oracle(f, qk.data(), s, true);
      const auto vb = test::pv_rounding_bound(qk.data(), decode_qo(B).data(), f, s.Hq, 1 / std::sqrt(double(s.D)));
      for (SimdLevel lvl : test::simd_levels())
        for (int threads : {1, 3})
          for (int splits : {1, 3, 0}) {
            ScopedSimdLimit lim(lvl);
            ThreadCount tc(threads);
            test::Guarded<float> out(size_t(n), 4);
            AttentionOptions opt;
            opt.splits = splits;
            attention_decode(q.data(), f.cache->layer(0), f.pages.view(), s.Hq, float(1 / std::sqrt(double(s.D))),
                             out.data(), opt);
            ASSERT_TRUE(out.guard_intact());
            ASSERT_TRUE(test::all_close(out.data(), want.data(), size_t(n), kTol, kTol,
                                        std::string(simd_name(lvl)) + " " + kv_type_name(kt) + "/" + kv_type_name(vt) +
                                            " D=" + std::to_string(s.D) + " Hq=" + std::to_string(s.Hq) +
                                            " splits=" + std::to_string(splits),
                                        pv_bound_for(lvl, vb)));
          }
    }
}

namespace {
// Decode and prefill of one layout (kv heads, head_dim, block_tokens, K and V
// types) at each of `levels` the detected level reaches, in order: 3 sequences
// of 1, 37 and 300 positions, prefill over their last 1, 9 and 20 tokens.
struct LevelRuns {
  std::vector<std::vector<float>> dec, pre;
  std::string what;
};
LevelRuns run_levels(const Shape& s, int64_t bt, KvType kt, KvType vt, uint64_t seed,
                     std::initializer_list<SimdLevel> levels) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = kt, cfg.v_type = vt, cfg.block_tokens = bt;
  const std::vector<int64_t> lens = {1, 37, 300}, qlens = {1, 9, 20};
  const Filled f = test::make_filled(cfg, lens, seed);
  const int64_t B = int64_t(lens.size()), n = B * s.Hq * s.D;
  std::vector<int64_t> qo(static_cast<size_t>(B + 1), 0);
  for (int64_t b = 0; b < B; ++b) qo[size_t(b + 1)] = qo[size_t(b)] + qlens[size_t(b)];
  const int64_t np = qo[size_t(B)] * s.Hq * s.D;
  std::vector<float> q(static_cast<size_t>(np));
  test::fill_normal(q.data(), q.size(), 98);
  const float scale = float(1 / std::sqrt(double(s.D)));
  LevelRuns r;
  for (SimdLevel lvl : levels) {
    if (lvl > detected_simd_level()) break;
    ScopedSimdLimit lim(lvl);
    r.dec.emplace_back(size_t(n));
    r.pre.emplace_back(size_t(np));
    attention_decode(q.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, r.dec.back().data());
    attention_prefill(q.data(), qo.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, r.pre.back().data());
  }
  r.what = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) + " D=" + std::to_string(s.D) + " block " +
           std::to_string(bt);
  return r;
}
// Runs i and j of r are the same bits.
void expect_same_bits(const LevelRuns& r, size_t i, size_t j, const std::string& label) {
  EXPECT_EQ(0, std::memcmp(r.dec[i].data(), r.dec[j].data(), r.dec[i].size() * 4)) << label << "decode " << r.what;
  EXPECT_EQ(0, std::memcmp(r.pre[i].data(), r.pre[j].data(), r.pre[i].size() * 4)) << label << "prefill " << r.what;
}
constexpr Shape kBitShapes[] = {{9, 3, 64}, {8, 8, 80}, {8, 2, 128}, {8, 1, 256}};
}  // namespace

// AVX-512 VNNI scores quantized K a tile at a time (16 keys transposed in
// registers, vpdpbusd against broadcast query dwords) where AVX-512 takes
// two keys at a time with maddubs + madd and horizontal sums: the same exact
// integer dot per group and the same f32 steps after it, so decode and
// prefill must keep the AVX-512 bits, for int8 and int4 K with each V type,
// groups of 1, 3, 4 and 8 rows (prefill: 1, 9 and 20 query tokens), head_dim 64 /
// 80 / 128 / 256, and blocks of 16 and 7 tokens (tiles of 1..16 keys).
// Level avx512vbmi must keep the VNNI bits too, except over an int4 V (its
// 8-bit P.V weights: the oracle tests bound that).
TEST(Attention, VnniKeepsTheAvx512Bits) {
  if (detected_simd_level() < SimdLevel::avx512vnni) GTEST_SKIP() << "skipped: no AVX-512 VNNI on this CPU";
  for (const Shape& s : kBitShapes)
    for (int64_t bt : {16, 7})
      for (KvType kt : {KvType::int8, KvType::int4})
        for (KvType vt : {KvType::f32, KvType::int8, KvType::int4}) {
          const LevelRuns r = run_levels(s, bt, kt, vt, uint64_t(s.D) + int(kt) * 7 + int(vt),
                                         {SimdLevel::avx512, SimdLevel::avx512vnni, SimdLevel::avx512vbmi});
          expect_same_bits(r, 0, 1, "");
          if (r.dec.size() == 3 && vt != KvType::int4)  // avx512vbmi differs from VNNI only in P.V over int4 V
            expect_same_bits(r, 1, 2, "vbmi ");
        }
}

// The avxvnni level scores quantized K with vpdpbusd and sums P.V over an int8
// V with vpdpwssd where AVX2 takes vpmaddubsw / vpmaddwd + vpaddd: the same
// integer sums, so decode and prefill must keep the AVX2 bits for every K and
// V type pair with a quantized side, over the shapes and blocks above.
TEST(Attention, AvxVnniKeepsTheAvx2Bits) {
  if (detected_simd_level() < SimdLevel::avxvnni || !cpu_has_vnni256())
    GTEST_SKIP() << "skipped: no 256-bit VNNI on this CPU (or LLMK_SIMD below avxvnni)";
  const KvType types[] = {KvType::f32, KvType::f16, KvType::int8, KvType::int4};
  for (const Shape& s : kBitShapes)
    for (int64_t bt : {16, 7})
      for (KvType kt : types)
        for (KvType vt : types) {
          if (!kv_type_quantized(kt) && !kv_type_quantized(vt)) continue;
          const LevelRuns r = run_levels(s, bt, kt, vt, uint64_t(s.D) + int(kt) * 5 + int(vt),
                                         {SimdLevel::avx2, SimdLevel::avxvnni});
          expect_same_bits(r, 0, 1, "");
        }
}

namespace {
// The layout of one random attention case: Hkv 1..8 with groups 1..8 (MHA,
// GQA, MQA), head_dim 16..256 in steps of 16, K and V types drawn apart,
// blocks of 1..32 tokens.
struct RandomLayout {
  Shape s;
  KvCacheConfig cfg;
};
RandomLayout random_layout(std::mt19937_64& g) {
  const KvType kinds[] = {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4};
  const int64_t groups[] = {1, 2, 3, 4, 8}, blocks[] = {1, 3, 7, 16, 32}, kv_heads[] = {1, 2, 3, 4, 8};
  RandomLayout r;
  const int64_t Hkv = kv_heads[g() % 5];
  r.s = Shape{Hkv * groups[g() % 5], Hkv, 16 * (1 + int64_t(g() % 16))};
  r.cfg.n_kv_heads = Hkv, r.cfg.head_dim = r.s.D, r.cfg.k_type = kinds[g() % 5], r.cfg.v_type = kinds[g() % 5];
  r.cfg.block_tokens = blocks[g() % 5];
  return r;
}
}  // namespace

// Random decode cases against the oracle, drawn across the knobs together:
// a random_layout, 1..5 sequences of 1..400 tokens, splits 0 / 1 / 2 / 5,
// 1..3 threads, every SIMD level. A fixed seed: a failure names its case.
TEST(Attention, DecodeRandomizedAgainstOracle) {
  std::mt19937_64 g(20261201);
  const int splits_of[] = {0, 1, 2, 5};
  const std::vector<SimdLevel> levels = test::simd_levels();
  for (int it = 0; it < 40; ++it) {
    const auto [s, cfg] = random_layout(g);
    const int64_t Hq = s.Hq, Hkv = s.Hkv, D = s.D;
    const KvType kt = cfg.k_type, vt = cfg.v_type;
    std::vector<int64_t> lens(1 + g() % 5);
    for (auto& n : lens) n = 1 + int64_t(g() % 400);
    const Filled f = test::make_filled(cfg, lens, g());
    const int64_t B = int64_t(lens.size()), n = B * Hq * D;
    std::vector<float> q(static_cast<size_t>(n));
    test::fill_normal(q.data(), q.size(), g());
    const float scale = float(1 / std::sqrt(double(D)));
    const auto qk = kv_type_quantized(kt) ? test::quantized_queries(q.data(), B * Hq, D, scale) : q;
    const auto want = decode_oracle(f, qk.data(), s, true);
    const auto vb = test::pv_rounding_bound(qk.data(), decode_qo(B).data(), f, Hq, double(scale));
    const SimdLevel lvl = levels[g() % levels.size()];
    const int threads = 1 + int(g() % 3), splits = splits_of[g() % 4];
    ScopedSimdLimit lim(lvl);
    ThreadCount tc(threads);
    test::Guarded<float> out(size_t(n), 4);
    AttentionOptions opt;
    opt.splits = splits;
    attention_decode(q.data(), f.cache->layer(0), f.pages.view(), Hq, scale, out.data(), opt);
    ASSERT_TRUE(out.guard_intact());
    std::string lens_s;
    for (int64_t l : lens) lens_s += " " + std::to_string(l);
    ASSERT_TRUE(test::all_close(out.data(), want.data(), size_t(n), kTol, kTol,
                                "case " + std::to_string(it) + ": " + simd_name(lvl) + " " + kv_type_name(kt) + "/" +
                                    kv_type_name(vt) + " Hq " + std::to_string(Hq) + " Hkv " + std::to_string(Hkv) +
                                    " D " + std::to_string(D) + " bt " + std::to_string(cfg.block_tokens) + " lens" +
                                    lens_s + " splits " + std::to_string(splits) + " threads " +
                                    std::to_string(threads),
                                pv_bound_for(lvl, vb)));
  }
}

// Random varlen prefill cases against the oracle (the causal mask over each
// sequence's cached prefix and new tokens): the same knobs as decode above,
// 0..60 new tokens after a 0..200-token prefix (prefix-only sequences
// included, at least one new token a batch), context chunks of 16, 64 or 1024
// positions.
TEST(Attention, PrefillRandomizedAgainstOracle) {
  std::mt19937_64 g(20261202);
  const int64_t chunks[] = {16, 64, 1024};
  const std::vector<SimdLevel> levels = test::simd_levels();
  for (int it = 0; it < 30; ++it) {
    const auto [s, cfg] = random_layout(g);
    const int64_t Hq = s.Hq, Hkv = s.Hkv, D = s.D;
    const KvType kt = cfg.k_type, vt = cfg.v_type;
    const int64_t B = 1 + int64_t(g() % 4);
    std::vector<int64_t> lens, qo = {0};
    for (int64_t b = 0; b < B; ++b) {
      const int64_t prefix = int64_t(g() % 201), fresh = b == 0 ? 1 + int64_t(g() % 60) : int64_t(g() % 61);
      lens.push_back(prefix + fresh);
      qo.push_back(qo.back() + fresh);
    }
    const Filled f = test::make_filled(cfg, lens, g());
    const int64_t T = qo.back(), n = T * Hq * D;
    std::vector<float> q(static_cast<size_t>(n));
    test::fill_normal(q.data(), q.size(), g());
    const float scale = float(1 / std::sqrt(double(D)));
    const auto qk = kv_type_quantized(kt) ? test::quantized_queries(q.data(), T * Hq, D, scale) : q;
    std::vector<double> want(static_cast<size_t>(n));
    attention_reference(qk.data(), qo.data(), f.kq.data(), f.vq.data(), f.kv_indptr.data(), B, Hq, Hkv, D,
                        double(scale), want.data());
    const auto vb = test::pv_rounding_bound(qk.data(), qo.data(), f, Hq, double(scale));
    const SimdLevel lvl = levels[g() % levels.size()];
    const int threads = 1 + int(g() % 3);
    ScopedSimdLimit lim(lvl);
    ThreadCount tc(threads);
    test::Guarded<float> out(size_t(n), 4);
    AttentionOptions opt;
    opt.prefill_chunk = chunks[g() % 3];
    attention_prefill(q.data(), qo.data(), f.cache->layer(0), f.pages.view(), Hq, scale, out.data(), opt);
    ASSERT_TRUE(out.guard_intact());
    std::string lens_s;
    for (int64_t b = 0; b < B; ++b)
      lens_s += " " + std::to_string(lens[size_t(b)] - (qo[size_t(b) + 1] - qo[size_t(b)])) + "+" +
                std::to_string(qo[size_t(b) + 1] - qo[size_t(b)]);
    ASSERT_TRUE(test::all_close(out.data(), want.data(), size_t(n), kTol, kTol,
                                "case " + std::to_string(it) + ": " + simd_name(lvl) + " " + kv_type_name(kt) + "/" +
                                    kv_type_name(vt) + " Hq " + std::to_string(Hq) + " Hkv " + std::to_string(Hkv) +
                                    " D " + std::to_string(D) + " bt " + std::to_string(cfg.block_tokens) +
                                    " prefix+new" + lens_s + " chunk " + std::to_string(opt.prefill_chunk) +
                                    " threads " + std::to_string(threads),
                                pv_bound_for(lvl, vb)));
  }
}

TEST(Attention, PrefillVarlenMatchesOracleNoLeak) {
  for (const Shape& s : {kShapes[0], kShapes[3]})
    for (KvType t : {KvType::f32, KvType::f16, KvType::int8}) {
      KvCacheConfig cfg;
      cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = cfg.v_type = t;
      // new tokens per sequence and their cached prefixes
      const std::vector<int64_t> qo_len = {1, 7, 20, 33, 9}, prefix = {0, 5, 0, 40, 16};
      std::vector<int64_t> lens, qo = {0};
      for (size_t b = 0; b < qo_len.size(); ++b) {
        lens.push_back(prefix[b] + qo_len[b]);
        qo.push_back(qo.back() + qo_len[b]);
      }
      const Filled f = test::make_filled(cfg, lens, 7 + int(t));
      const int64_t T = qo.back(), n = T * s.Hq * s.D;
      std::vector<float> q(static_cast<size_t>(n));
      test::fill_normal(q.data(), q.size(), 5);
      std::vector<double> want(static_cast<size_t>(n));
      const auto qk = kv_type_quantized(t)
                          ? test::quantized_queries(q.data(), T * s.Hq, s.D, float(1 / std::sqrt(double(s.D))))
                          : q;
      attention_reference(qk.data(), qo.data(), f.kq.data(), f.vq.data(), f.kv_indptr.data(), int64_t(lens.size()),
                          s.Hq, s.Hkv, s.D, 1 / std::sqrt(double(s.D)), want.data());
      const auto vb = test::pv_rounding_bound(qk.data(), qo.data(), f, s.Hq, 1 / std::sqrt(double(s.D)));
      for (SimdLevel lvl : test::simd_levels())
        for (int threads : {1, 2}) {
          ScopedSimdLimit lim(lvl);
          ThreadCount tc(threads);
          test::Guarded<float> out(static_cast<size_t>(n));
          attention_prefill(q.data(), qo.data(), f.cache->layer(0), f.pages.view(), s.Hq,
                            float(1 / std::sqrt(double(s.D))), out.data());
          ASSERT_TRUE(out.guard_intact());
          // Any leak (another sequence's poisoned slot, or a future token with
          // weight ~1/len) moves an output far beyond 1e-5 (and beyond the
          // int8 V weights' rounding bound, ~1e-5 here).
          ASSERT_TRUE(test::all_close(out.data(), want.data(), size_t(n), kTol, kTol,
                                      std::string(simd_name(lvl)) + " " + kv_type_name(t), pv_bound_for(lvl, vb)));
        }
    }
}

TEST(Attention, DecodeEqualsPrefillOfOneToken) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = 2, cfg.head_dim = 64;
  const Filled f = test::make_filled(cfg, {5, 40, 77}, 3);
  std::vector<float> q(3 * 4 * 64), a(q.size()), b(q.size());
  test::fill_normal(q.data(), q.size(), 1);
  const int64_t qo[] = {0, 1, 2, 3};
  AttentionOptions one;
  one.splits = 1;
  attention_decode(q.data(), f.cache->layer(0), f.pages.view(), 4, 0.125f, a.data(), one);
  attention_prefill(q.data(), qo, f.cache->layer(0), f.pages.view(), 4, 0.125f, b.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// The P.V of every V type (dequantized in registers, 4 query rows at a time,
// then 3, 2 or 1) and the tile walk over blocks of other sizes: prefill (8 x G
// rows per item, each masked at its own position) and decode (1 and 3 splits)
// against the oracle on every SIMD path, with group sizes 1..5, head_dim
// 64..256, mixed K/V types, and blocks of 5, 16 and 24 tokens (tiles that end
// inside a block, or with it; the next-tile prefetch crosses every boundary).
// Free slots are poisoned (fixture), outputs guarded by sentinels.
TEST(Attention, EveryVTypeGroupAndBlockSize) {
  struct Case {
    Shape s;
    KvType kt, vt;
    int64_t bt;
  };
  const Case cases[] = {{{4, 4, 80}, KvType::f32, KvType::bf16, 5},    {{6, 3, 96}, KvType::f16, KvType::int4, 24},
                        {{9, 3, 64}, KvType::int4, KvType::f16, 16},   {{8, 2, 128}, KvType::bf16, KvType::int8, 5},
                        {{5, 1, 256}, KvType::int8, KvType::int4, 24}, {{8, 2, 128}, KvType::int4, KvType::int4, 16},
                        {{4, 4, 80}, KvType::int8, KvType::int8, 24},  {{6, 3, 96}, KvType::f32, KvType::f32, 5}};
  for (const Case& c : cases) {
    const Shape& s = c.s;
    KvCacheConfig cfg;
    cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = c.kt, cfg.v_type = c.vt, cfg.block_tokens = c.bt;
    const std::vector<int64_t> qo_len = {1, 9, 17}, prefix = {30, 0, 16};
    std::vector<int64_t> lens, qo = {0}, qd = {0, 1, 2, 3};
    for (size_t b = 0; b < qo_len.size(); ++b)
      lens.push_back(prefix[b] + qo_len[b]), qo.push_back(qo.back() + qo_len[b]);
    const Filled f = test::make_filled(cfg, lens, uint64_t(s.D) + 7 * uint64_t(c.bt) + int(c.vt));
    const int64_t B = 3, T = qo.back(), n = T * s.Hq * s.D, nd = B * s.Hq * s.D;
    const float scale = float(1 / std::sqrt(double(s.D)));
    std::vector<float> q(static_cast<size_t>(n));
    test::fill_normal(q.data(), q.size(), 21);
    const auto qk = kv_type_quantized(c.kt) ? test::quantized_queries(q.data(), T * s.Hq, s.D, scale) : q;
    std::vector<double> want(static_cast<size_t>(n)), want_d(static_cast<size_t>(nd));
    attention_reference(qk.data(), qo.data(), f.kq.data(), f.vq.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D,
                        1 / std::sqrt(double(s.D)), want.data());
    attention_reference(qk.data(), qd.data(), f.kq.data(), f.vq.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D,
                        1 / std::sqrt(double(s.D)), want_d.data());
    const auto vb = test::pv_rounding_bound(qk.data(), qo.data(), f, s.Hq, 1 / std::sqrt(double(s.D)));
    const auto vbd = test::pv_rounding_bound(qk.data(), qd.data(), f, s.Hq, 1 / std::sqrt(double(s.D)));
    const std::string what = std::string(kv_type_name(c.kt)) + "/" + kv_type_name(c.vt) + " D=" + std::to_string(s.D) +
                             " G=" + std::to_string(s.Hq / s.Hkv) + " bt=" + std::to_string(c.bt);
    for (SimdLevel lvl : test::simd_levels())
      for (int threads : {1, 2}) {
        ScopedSimdLimit lim(lvl);
        ThreadCount tc(threads);
        test::Guarded<float> out(static_cast<size_t>(n));
        attention_prefill(q.data(), qo.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, out.data());
        ASSERT_TRUE(out.guard_intact());
        ASSERT_TRUE(test::all_close(out.data(), want.data(), size_t(n), kTol, kTol,
                                    std::string("prefill ") + simd_name(lvl) + " " + what, pv_bound_for(lvl, vb)));
        for (int splits : {1, 3}) {
          test::Guarded<float> od(static_cast<size_t>(nd));
          AttentionOptions opt;
          opt.splits = splits;
          attention_decode(q.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, od.data(), opt);
          ASSERT_TRUE(od.guard_intact());
          ASSERT_TRUE(test::all_close(od.data(), want_d.data(), size_t(nd), kTol, kTol,
                                      std::string("decode ") + simd_name(lvl) + " " + what +
                                          " splits=" + std::to_string(splits),
                                      pv_bound_for(lvl, vbd)));
        }
      }
  }
}

// Decode items hold every kv head of a sequence when a head's run of a block is
// short (16-token blocks), one head when it is long (blocks of 1024 tokens of
// 1 KiB f32 rows): both item shapes against the oracle, and bitwise equal to
// each other for the same splits (tiles of 16 align in both layouts, and a
// head's arithmetic never depends on the other heads of its item).
TEST(Attention, DecodeItemsOfEveryHeadAndOfOneHeadAgree) {
  const Shape s{6, 3, 256};
  for (KvType t : {KvType::f32, KvType::int8}) {
    KvCacheConfig cfg;
    cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = cfg.v_type = t;
    const std::vector<int64_t> lens = {1, 300, 1000};
    cfg.block_tokens = 16;
    const Filled paged = test::make_filled(cfg, lens, 77);
    cfg.block_tokens = 1024;
    const Filled dense = test::make_filled(cfg, lens, 77);
    ASSERT_EQ(attention_decode_heads_per_item(paged.cache->layer(0)), s.Hkv);
    ASSERT_EQ(attention_decode_heads_per_item(dense.cache->layer(0)), 1);
    const int64_t B = int64_t(lens.size()), n = B * s.Hq * s.D;
    const float scale = float(1 / std::sqrt(double(s.D)));
    std::vector<float> q(static_cast<size_t>(n));
    test::fill_normal(q.data(), q.size(), 5);
    const auto qk = kv_type_quantized(t) ? test::quantized_queries(q.data(), B * s.Hq, s.D, scale) : q;
    const auto want = decode_oracle(paged, qk.data(), s, true);
    const auto vb = test::pv_rounding_bound(qk.data(), decode_qo(B).data(), paged, s.Hq, double(scale));
    for (int threads : {1, 2})
      for (int splits : {1, 3}) {
        ThreadCount tc(threads);
        AttentionOptions opt;
        opt.splits = splits;
        test::Guarded<float> a(static_cast<size_t>(n)), c(static_cast<size_t>(n));
        attention_decode(q.data(), paged.cache->layer(0), paged.pages.view(), s.Hq, scale, a.data(), opt);
        attention_decode(q.data(), dense.cache->layer(0), dense.pages.view(), s.Hq, scale, c.data(), opt);
        ASSERT_TRUE(a.guard_intact() && c.guard_intact());
        const std::string what = std::string(kv_type_name(t)) + " splits=" + std::to_string(splits);
        ASSERT_TRUE(test::all_close(a.data(), want.data(), size_t(n), kTol, kTol, "every head " + what,
                                    pv_bound_for(simd_level(), vb)));
        ASSERT_TRUE(test::all_close(c.data(), want.data(), size_t(n), kTol, kTol, "one head " + what,
                                    pv_bound_for(simd_level(), vb)));
        ASSERT_EQ(0, std::memcmp(a.data(), c.data(), size_t(n) * 4)) << what;
      }
  }
}

// A NaN in one cached K or V row (sequence 1, kv head 1, one token) makes
// exactly the outputs that attend to it NaN (decode and prefill, every storage
// type, split or not): the query heads of that kv head in sequence 1, from the
// token's position on. Every other output is bitwise equal to a run without
// the NaN, so a NaN never crosses into another sequence, head or earlier
// position (a row that may not see a position must not even multiply its V by 0);
// prefill also in context chunks of 16, whose fold must not spread it either.
TEST(Attention, NanInOneKvRowReachesOnlyTheRowsThatSeeIt) {
  for (bool in_v : {false, true}) {
    SCOPED_TRACE(in_v ? "NaN in V" : "NaN in K");
    const Shape s{6, 3, 64};
    const std::vector<int64_t> lens = {40, 50, 30};
    const int64_t nan_tok = 21, nan_head = 1, G = s.Hq / s.Hkv;  // rows of positions 20 and 21 share a 4-row block
    for (KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4}) {
      KvCacheConfig cfg;
      cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = cfg.v_type = t;
      const Filled clean = test::make_filled(cfg, lens, 41);
      const auto poison = [&](std::vector<float>& x) {
        x[size_t(((lens[0] + nan_tok) * s.Hkv + nan_head) * s.D + 5)] = NAN;
      };
      const Filled dirty = in_v ? test::make_filled(cfg, lens, 41, {}, poison)
                                : test::make_filled(cfg, lens, 41, poison);
      // NaN in K: every element of a row that sees the token; in V: element 5
      // (float types) or its whole 32-group (int8/int4: the group reads back NaN)
      const auto nan_expected = [&](int64_t b, int64_t h, int64_t pos, int64_t d) {
        return b == 1 && h / G == nan_head && pos >= nan_tok &&
               (!in_v || (kv_type_quantized(t) ? d / 32 == 0 : d == 5));
      };
      const int64_t B = 3, T = 90;  // prefill: the last 30, 40, 20 tokens of each sequence
      const std::vector<int64_t> qo = {0, 30, 70, 90};
      std::vector<float> q(static_cast<size_t>(T * s.Hq * s.D));
      test::fill_normal(q.data(), q.size(), 8);
      const float scale = 0.125f;
      for (int splits : {1, 2}) {
        AttentionOptions opt;
        opt.splits = splits;
        std::vector<float> a(static_cast<size_t>(B * s.Hq * s.D)), c(a.size());
        attention_decode(q.data(), clean.cache->layer(0), clean.pages.view(), s.Hq, scale, a.data(), opt);
        attention_decode(q.data(), dirty.cache->layer(0), dirty.pages.view(), s.Hq, scale, c.data(), opt);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < s.Hq; ++h)
            for (int64_t d = 0; d < s.D; ++d) {
              const size_t i = size_t((b * s.Hq + h) * s.D + d);
              const std::string what = std::string(kv_type_name(t)) + " decode b=" + std::to_string(b) +
                                       " h=" + std::to_string(h) + " splits=" + std::to_string(splits);
              if (nan_expected(b, h, lens[size_t(b)] - 1, d)) ASSERT_TRUE(std::isnan(c[i])) << what;
              else ASSERT_EQ(0, std::memcmp(&a[i], &c[i], 4)) << what;
            }
      }
      for (int64_t chunk : {int64_t(1024), int64_t(16)}) {  // one context chunk, and chunks of 16 (folded)
        AttentionOptions opt;
        opt.prefill_chunk = chunk;
        std::vector<float> a(q.size()), c(q.size());
        attention_prefill(q.data(), qo.data(), clean.cache->layer(0), clean.pages.view(), s.Hq, scale, a.data(), opt);
        attention_prefill(q.data(), qo.data(), dirty.cache->layer(0), dirty.pages.view(), s.Hq, scale, c.data(), opt);
        for (int64_t r = 0; r < T; ++r) {
          const int64_t b = r < 30   ? 0
                            : r < 70 ? 1
                                     : 2,
                        pos = lens[size_t(b)] - (qo[size_t(b) + 1] - qo[size_t(b)]) + (r - qo[size_t(b)]);
          for (int64_t h = 0; h < s.Hq; ++h)
            for (int64_t d = 0; d < s.D; ++d) {
              const size_t i = size_t((r * s.Hq + h) * s.D + d);
              const std::string what = std::string(kv_type_name(t)) + " prefill row " + std::to_string(r) + " pos " +
                                       std::to_string(pos) + " h=" + std::to_string(h) + " chunk " +
                                       std::to_string(chunk);
              if (nan_expected(b, h, pos, d)) ASSERT_TRUE(std::isnan(c[i])) << what;
              else ASSERT_EQ(0, std::memcmp(&a[i], &c[i], 4)) << what;
            }
        }
      }
    }
  }
}

// Many decode steps with random block placement: the paged cache against the
// recomputed oracle over the whole prefix (1e-5) and against a dense
// contiguous cache (one max-length block per sequence, as in llama2.c) run
// through the same kernel: bitwise equal. Also with K stored Hadamard-rotated
// (k_rotate): then the oracle sees the rotated q and K rows the kernel sees.
// A key the row may see whose weight underflows to 0 (score 200 below the
// max) still has its V multiplied in: an inf there gives NaN (0 x inf), in
// prefill and decode alike; only keys the row may not see are skipped.
// tests/attention/test_prefill_cuda.cu asserts the same of the CUDA prefill.
TEST(Attention, UnderflowedWeightOfAVisibleKeyStillMultipliesItsV) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = 1, cfg.head_dim = 64;
  const Filled f = test::make_filled(
      cfg, {2}, 3,
      [](std::vector<float>& k) {
        for (size_t i = 0; i < 128; ++i) k[i] = i < 64 ? 0.0f : 3.125f;
      },
      [](std::vector<float>& v) { v[0] = INFINITY; });
  const std::vector<float> q(64, 1.0f);  // scores 0 (key 0) and 64 x 3.125 = 200 (key 1)
  const int64_t qo[] = {0, 1};
  std::vector<float> a(64), b(64);
  attention_prefill(q.data(), qo, f.cache->layer(0), f.pages.view(), 1, 1.0f, a.data());
  attention_decode(q.data(), f.cache->layer(0), f.pages.view(), 1, 1.0f, b.data());
  for (const auto* o : {&a, &b}) {
    EXPECT_TRUE(std::isnan((*o)[0])) << (o == &a ? "prefill" : "decode") << " " << (*o)[0];
    for (int64_t d = 1; d < 64; ++d) EXPECT_EQ((*o)[size_t(d)], f.v[size_t(64 + d)]) << d;  // all weight on key 1
  }
}

// Keys whose score is -inf (an -inf in an f32 / f16 / bf16 K row against a
// positive query element) get weight 0, as in the reference, also when they
// fill a row's first tiles (positions 0-39 of sequence 0) or a whole decode
// split; a row that sees only such keys (sequence 1, and sequence 0's first 40
// prefill rows) is NaN, 0 / 0, as the reference's softmax. The softmax step
// once computed exp(-inf - -inf) = NaN for a tile whose scores were all -inf
// with none finite before it, and turned the whole row NaN.
TEST(Attention, KeysScoredMinusInfinityGetWeightZero) {
  const Shape s{4, 2, 64};
  const std::vector<int64_t> lens = {100, 37};
  for (KvType kt : {KvType::f32, KvType::f16, KvType::bf16}) {
    KvCacheConfig cfg;
    cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = kt;
    const Filled f = test::make_filled(cfg, lens, 17, [&](std::vector<float>& k) {
      for (int64_t j = 0; j < 137; ++j)
        if (j < 40 || j >= 100)
          for (int64_t h = 0; h < s.Hkv; ++h) k[size_t((j * s.Hkv + h) * s.D)] = -INFINITY;
    });
    const int64_t T = 137, B = 2;
    std::vector<float> q(size_t(T * s.Hq * s.D));
    test::fill_normal(q.data(), q.size(), 18);
    for (int64_t t = 0; t < T * s.Hq; ++t) q[size_t(t * s.D)] = 1.0f;  // element 0 > 0: scores -inf
    const float scale = float(1 / std::sqrt(double(s.D)));
    const int64_t qo_all[] = {0, 100, 137};
    std::vector<double> want_p(q.size());
    attention_reference(q.data(), qo_all, f.kq.data(), f.vq.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D, scale,
                        want_p.data());
    // decode: the last token of each sequence
    std::vector<float> qd(size_t(B * s.Hq * s.D));
    std::copy(q.begin() + 99 * s.Hq * s.D, q.begin() + 100 * s.Hq * s.D, qd.begin());
    std::copy(q.begin() + 136 * s.Hq * s.D, q.end(), qd.begin() + s.Hq * s.D);
    const auto want_d = decode_oracle(f, qd.data(), s, true);
    EXPECT_FALSE(std::isnan(want_d[0]));
    EXPECT_TRUE(std::isnan(want_d[size_t(s.Hq * s.D)]));
    for (SimdLevel lvl : test::simd_levels())
      for (int splits : {1, 3, 0}) {
        ScopedSimdLimit lim(lvl);
        const std::string what = std::string(simd_name(lvl)) + " " + kv_type_name(kt) + " splits " +
                                 std::to_string(splits);
        test::Guarded<float> out(qd.size(), 4);
        AttentionOptions opt;
        opt.splits = splits;
        attention_decode(qd.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, out.data(), opt);
        ASSERT_TRUE(out.guard_intact());
        EXPECT_TRUE(test::all_close(out.data(), want_d.data(), qd.size(), kTol, kTol, "decode " + what));
        if (splits != 1) continue;
        test::Guarded<float> pre(q.size(), 4);
        attention_prefill(q.data(), qo_all, f.cache->layer(0), f.pages.view(), s.Hq, scale, pre.data());
        ASSERT_TRUE(pre.guard_intact());
        EXPECT_TRUE(test::all_close(pre.data(), want_p.data(), q.size(), kTol, kTol, "prefill " + what));
      }
  }
}

TEST(Attention, CachedVsNonCachedOverManySteps) {
  for (bool rotate : {false, true}) {
    SCOPED_TRACE(rotate ? "k_rotate" : "plain");
    const int64_t B = 3, Hq = 6, Hkv = 2, D = 64, steps = rotate ? 60 : 150, max_len = 160;
    KvCacheConfig paged;
    paged.n_kv_heads = Hkv, paged.head_dim = D, paged.k_rotate = rotate;
    paged.budget_bytes = 256 * kv_block_bytes(paged);
    KvCacheConfig dense = paged;
    dense.block_tokens = max_len;
    dense.budget_bytes = B * kv_block_bytes(dense);
    KvCache pc(paged), dc(dense);
    std::mt19937_64 rng(8);
    std::vector<int64_t> ps, ds;
    for (int b = 0; b < B; ++b) ps.push_back(pc.add_sequence()), ds.push_back(dc.add_sequence());
    std::vector<std::vector<float>> ks(B), vs(B);  // per sequence [len, Hkv, D]
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<float> q(static_cast<size_t>(B * Hq * D));
      test::fill_normal(q.data(), q.size(), 1000 + uint64_t(step));
      for (int64_t b = 0; b < B; ++b) {
        if (rng() % 4 == 0 && step > 0) {  // a dummy sequence grabs a block now and then: random placement
          const int64_t d = pc.add_sequence();
          std::vector<int64_t> sl;
          pc.append(d, std::vector<int32_t>(size_t(1 + rng() % 20), 3), &sl);
          if (rng() % 2) pc.free_sequence(d);
        }
        std::vector<float> kv(static_cast<size_t>(2 * Hkv * D));
        test::fill_normal(kv.data(), kv.size(), uint64_t(step * 10 + b));
        const int32_t tok[] = {int32_t(step)};
        std::vector<int64_t> s1, s2;
        ASSERT_EQ(pc.append(ps[size_t(b)], tok, &s1), KvStatus::ok);
        ASSERT_EQ(dc.append(ds[size_t(b)], tok, &s2), KvStatus::ok);
        pc.write(0, s1, kv.data(), kv.data() + Hkv * D);
        dc.write(0, s2, kv.data(), kv.data() + Hkv * D);
        ks[size_t(b)].insert(ks[size_t(b)].end(), kv.begin(), kv.begin() + Hkv * D);
        vs[size_t(b)].insert(vs[size_t(b)].end(), kv.begin() + Hkv * D, kv.end());
      }
      std::vector<float> kall, vall;
      std::vector<int64_t> kvp = {0}, qo = {0};
      for (int64_t b = 0; b < B; ++b) {
        kall.insert(kall.end(), ks[size_t(b)].begin(), ks[size_t(b)].end());
        vall.insert(vall.end(), vs[size_t(b)].begin(), vs[size_t(b)].end());
        kvp.push_back(kvp.back() + step + 1);
        qo.push_back(b + 1);
      }
      std::vector<double> want(q.size());
      std::vector<float> qr = q;
      if (rotate) {
        hadamard_transform(kall.data(), int64_t(kall.size()) / D, D, D);
        hadamard_transform(qr.data(), B * Hq, D, D);
      }
      attention_reference(qr.data(), qo.data(), kall.data(), vall.data(), kvp.data(), B, Hq, Hkv, D, 0.125,
                          want.data());
      const PageTable pt = pc.page_table(ps), dt = dc.page_table(ds);
      for (int splits : {1, 2}) {
        AttentionOptions opt;
        opt.splits = splits;
        std::vector<float> a(q.size()), c(q.size());
        attention_decode(q.data(), pc.layer(0), pt.view(), Hq, 0.125f, a.data(), opt);
        attention_decode(q.data(), dc.layer(0), dt.view(), Hq, 0.125f, c.data(), opt);
        ASSERT_TRUE(test::all_close(a.data(), want.data(), a.size(), kTol, kTol, "step " + std::to_string(step)));
        ASSERT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4)) << "paged != contiguous at step " << step;
      }
    }
  }
}

// A prompt prefilled cold, in chunks, and over a reused cached prefix (also
// after its owner was freed): the rows of the same tokens are bitwise equal.
// f32, and int4 K with Hadamard-rotated K (k_rotate).
TEST(Attention, PrefixReuseIsBitwiseEqualToColdPrefill) {
  for (bool rotate : {false, true}) {
    SCOPED_TRACE(rotate ? "int4 K, k_rotate" : "f32");
    const int64_t Hq = 4, Hkv = 2, D = 64, n = 45;
    KvCacheConfig cfg;
    cfg.n_kv_heads = Hkv, cfg.head_dim = D, cfg.k_rotate = rotate;
    if (rotate) cfg.k_type = KvType::int4;
    cfg.budget_bytes = 32 * kv_block_bytes(cfg);
    KvCache c(cfg);
    std::vector<int32_t> prompt(n);
    for (int64_t i = 0; i < n; ++i) prompt[size_t(i)] = int32_t(1000 + 37 * i % 101);
    std::vector<float> k(static_cast<size_t>(n * Hkv * D)), v(k.size()), q(static_cast<size_t>(n * Hq * D));
    test::fill_normal(k.data(), k.size(), 1);  // K/V of the prompt (what the model would produce)
    test::fill_normal(v.data(), v.size(), 2);
    test::fill_normal(q.data(), q.size(), 3);
    auto prefill = [&](int64_t seq, int64_t from, int64_t to) {  // tokens [from, to) are new
      std::vector<int64_t> slots;
      EXPECT_EQ(c.append(seq, std::span(prompt).subspan(size_t(from), size_t(to - from)), &slots), KvStatus::ok);
      c.write(0, slots, k.data() + from * Hkv * D, v.data() + from * Hkv * D);
      const int64_t ids[] = {seq}, qo[] = {0, to - from};
      const PageTable pt = c.page_table(ids);
      std::vector<float> out(static_cast<size_t>((to - from) * Hq * D));
      attention_prefill(q.data() + from * Hq * D, qo, c.layer(0), pt.view(), Hq, 0.125f, out.data());
      return out;
    };
    const int64_t a = c.add_sequence();
    const auto cold = prefill(a, 0, n);
    // chunked prefill of the same prompt
    const int64_t ch = c.add_sequence();
    std::vector<float> chunked;
    for (int64_t i = 0; i < n; i += 10) {
      const auto part = prefill(ch, i, std::min(n, i + 10));
      chunked.insert(chunked.end(), part.begin(), part.end());
    }
    EXPECT_EQ(0, std::memcmp(cold.data(), chunked.data(), cold.size() * 4));
    for (bool free_owner : {false, true}) {
      if (free_owner) c.free_sequence(a), c.free_sequence(ch);
      const int64_t b = c.add_sequence();
      const int64_t reused = c.reuse_prefix(b, std::span(prompt).first(size_t(n - 1)));
      ASSERT_EQ(reused, 32);
      const auto warm = prefill(b, reused, n);
      EXPECT_EQ(0, std::memcmp(cold.data() + reused * Hq * D, warm.data(), warm.size() * 4)) << free_owner;
      c.free_sequence(b);
    }
  }
}

// Prefill in context chunks (AttentionOptions::prefill_chunk, here 32 so a
// 150-token prompt has 5): a row's bits depend only on its q, its position and
// the chunk size. The prompt prefilled cold (every tile runs and folds its own
// chunks), one token at a time (3 tiles: with 2 or 3 threads their chunks are
// dealt to several items and folded afterwards), in pieces of 10, and batched
// with another sequence, under 1, 2 and 3 threads, gives the same rows
// bitwise; the cold rows match the oracle; a chunk size changes the rows (it
// is really used), and a bad one is refused naming it.
TEST(Attention, PrefillChunksFoldToTheSameRowsWhoeverRunsThem) {
  for (KvType t : {KvType::f32, KvType::int8}) {
    SCOPED_TRACE(kv_type_name(t));
    const int64_t Hq = 9, Hkv = 3, D = 64, n = 150, other = 5;
    const float scale = 0.125f;
    KvCacheConfig cfg;
    cfg.n_kv_heads = Hkv, cfg.head_dim = D, cfg.k_type = cfg.v_type = t;
    cfg.budget_bytes = 64 * kv_block_bytes(cfg);
    KvCache c(cfg);
    std::vector<float> k(static_cast<size_t>(n * Hkv * D)), v(k.size()), q(static_cast<size_t>(n * Hq * D));
    test::fill_normal(k.data(), k.size(), 21);
    test::fill_normal(v.data(), v.size(), 22);
    test::fill_normal(q.data(), q.size(), 23);
    AttentionOptions opt;
    opt.prefill_chunk = 32;
    auto append = [&](int64_t seq, int64_t from, int64_t to) {
      std::vector<int64_t> slots;
      ASSERT_EQ(c.append(seq, std::vector<int32_t>(size_t(to - from), 7), &slots), KvStatus::ok);
      c.write(0, slots, k.data() + from * Hkv * D, v.data() + from * Hkv * D);
    };
    // rows [from, to) of seq, whose cache holds tokens [0, to)
    auto prefill = [&](int64_t seq, int64_t from, int64_t to, const AttentionOptions& o) {
      const int64_t ids[] = {seq}, qo[] = {0, to - from};
      const PageTable pt = c.page_table(ids);
      test::Guarded<float> out(static_cast<size_t>((to - from) * Hq * D));
      attention_prefill(q.data() + from * Hq * D, qo, c.layer(0), pt.view(), Hq, scale, out.data(), o);
      EXPECT_TRUE(out.guard_intact());
      return std::vector<float>(out.data(), out.data() + (to - from) * Hq * D);
    };
    const int64_t a = c.add_sequence();
    append(a, 0, n);
    std::vector<float> cold;
    for (int threads : {1, 2, 3}) {
      ThreadCount tc(threads);
      const auto rows = prefill(a, 0, n, opt);
      if (cold.empty()) cold = rows;
      ASSERT_EQ(0, std::memcmp(cold.data(), rows.data(), cold.size() * 4)) << "cold, threads " << threads;
    }
    // against the oracle (int8 K: with the queries quantized as the kernel does)
    const auto qk = kv_type_quantized(t) ? test::quantized_queries(q.data(), n * Hq, D, scale) : q;
    std::vector<float> kd(k.size()), vd(v.size());
    for (int64_t r = 0; r < n * Hkv; ++r) {  // the rows as stored
      std::vector<uint8_t> row(static_cast<size_t>(kv_row_bytes(t, D)));
      kv_quantize_row(t, k.data() + r * D, D, row.data());
      kv_dequantize_row(t, row.data(), D, kd.data() + r * D);
      kv_quantize_row(t, v.data() + r * D, D, row.data());
      kv_dequantize_row(t, row.data(), D, vd.data() + r * D);
    }
    std::vector<double> want(cold.size());
    const int64_t qo_all[] = {0, n}, kv_all[] = {0, n};
    attention_reference(qk.data(), qo_all, kd.data(), vd.data(), kv_all, 1, Hq, Hkv, D, scale, want.data());
    const auto vb = test::pv_rounding_bound(qk.data(), qo_all, kd.data(), v.data(), kv_all, 1, Hq, Hkv, D, scale, t);
    ASSERT_TRUE(test::all_close(cold.data(), want.data(), cold.size(), kTol, kTol, "cold vs oracle",
                                pv_bound_for(simd_level(), vb)));
    {
      AttentionOptions whole;  // the default chunk (1024) covers the prompt: other rounding, same values
      const auto rows = prefill(a, 0, n, whole);
      EXPECT_NE(0, std::memcmp(cold.data(), rows.data(), cold.size() * 4)) << "prefill_chunk had no effect";
      ASSERT_TRUE(test::all_close(rows.data(), want.data(), rows.size(), kTol, kTol, "one chunk vs oracle",
                                  pv_bound_for(simd_level(), vb)));
    }
    for (int threads : {1, 2, 3}) {
      ThreadCount tc(threads);
      const int64_t s = c.add_sequence();
      for (int64_t i = 0; i < n; ++i) {  // one token at a time, as the engine decodes
        append(s, i, i + 1);
        const auto row = prefill(s, i, i + 1, opt);
        ASSERT_EQ(0, std::memcmp(cold.data() + i * Hq * D, row.data(), row.size() * 4))
            << "token " << i << ", threads " << threads;
      }
      c.free_sequence(s);
      const int64_t p = c.add_sequence();
      for (int64_t i = 0; i < n; i += 10) {  // in pieces of 10
        append(p, i, std::min(n, i + 10));
        const auto rows = prefill(p, i, std::min(n, i + 10), opt);
        ASSERT_EQ(0, std::memcmp(cold.data() + i * Hq * D, rows.data(), rows.size() * 4))
            << "piece at " << i << ", threads " << threads;
      }
      c.free_sequence(p);
    }
    // batched: the last 3 rows of the prompt next to another sequence's 5-token prompt
    const int64_t b = c.add_sequence(), o = c.add_sequence();
    append(b, 0, n);
    append(o, 0, other);
    std::vector<float> qb(static_cast<size_t>((3 + other) * Hq * D));
    std::copy(q.begin() + (n - 3) * Hq * D, q.begin() + n * Hq * D, qb.begin());
    std::copy(q.begin(), q.begin() + other * Hq * D, qb.begin() + 3 * Hq * D);
    const int64_t ids[] = {b, o}, qo[] = {0, 3, 3 + other};
    const PageTable pt = c.page_table(ids);
    std::vector<float> out(qb.size());
    attention_prefill(qb.data(), qo, c.layer(0), pt.view(), Hq, scale, out.data(), opt);
    EXPECT_EQ(0, std::memcmp(cold.data() + (n - 3) * Hq * D, out.data(), 3 * Hq * D * 4)) << "batched";
    for (int64_t bad : {int64_t(0), int64_t(8), int64_t(40), (int64_t(1) << 30) + 16}) {
      AttentionOptions o2;
      o2.prefill_chunk = bad;
      std::vector<float> sink(static_cast<size_t>(Hq * D));
      try {
        const int64_t one[] = {a}, qo1[] = {0, 1};
        attention_prefill(q.data(), qo1, c.layer(0), c.page_table(one).view(), Hq, scale, sink.data(), o2);
        ADD_FAILURE() << "prefill_chunk " << bad << " accepted";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("opt.prefill_chunk"), std::string::npos) << e.what();
      }
    }
  }
}

// Quantized cache vs f32 cache on the same data, against the analytic bound:
// with per-element errors ek (K) and ev (V) (kv_error_bound), every score moves
// by at most delta = scale * max_t sum_i |q_i| ek_ti, so each probability by
// a factor within e^(+-2 delta), and |out_i - out'_i| <= max_t ev_ti + (e^(2 delta) - 1) max_t |v_ti|.
// Against an int8/int4 K the kernel also quantizes x = scale * q per 32-group g
// to int8 (dq_g = amax_g / 127, |x'_i - x_i| <= dq_g / 2 plus f32 rounding of
// x * 127 / amax and of dq, < 1e-4 dq_g in all), so
// s' - s = sum_i (x'_i - x_i) k'_i + scale sum_i q_i (k'_i - k_i) adds
// sum_g dq_g (1/2 + 1e-4) sum_{i in g} (|k_i| + ek_i) to delta.
// With k_rotate the cache quantizes r = H k and scores H q: since
// (H q) . (H k) = q . k, the same bound holds with q, k replaced by the rotated
// rows (the step bound applies to the rotated vector), plus the f32 rounding
// of the two transforms (eq, er <= hadamard_error_bound per element):
// |q~ . r~ - q . k| <= sum_i eq_i (|r~_i| + er_i) + (|q~_i| + eq_i) er_i.
// On AVX2 and AVX-512 an int8/int4 V adds the weights' rounding (test::pv_rounding_bound),
// its probabilities taken exact here and widened by e^(2 delta).
TEST(Attention, QuantizedCacheWithinAnalyticBound) {
  const Shape s{8, 2, 128};
  const float scale = float(1 / std::sqrt(128.0));
  for (bool rotate : {false, true})
    for (auto [kt, vt] : {std::pair{KvType::int8, KvType::int8}, std::pair{KvType::int4, KvType::int4},
                          std::pair{KvType::f16, KvType::int4}, std::pair{KvType::bf16, KvType::bf16}}) {
      KvCacheConfig cfg;
      cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = kt, cfg.v_type = vt, cfg.k_rotate = rotate;
      const std::vector<int64_t> lens = {64, 200};
      const Filled f = test::make_filled(cfg, lens, 11);
      std::vector<float> q(static_cast<size_t>(2 * s.Hq * s.D));
      test::fill_normal(q.data(), q.size(), 12);
      std::vector<float> out(q.size());
      attention_decode(q.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, out.data());
      const auto exact = decode_oracle(f, q.data(), s, false);  // the f32 rows, not rotated
      // the integer P.V weights' rounding, with the exact probabilities (the
      // kernel's are within a factor e^(2 delta) of them: applied below)
      const auto vb = test::pv_rounding_bound(q.data(), decode_qo(2).data(), f.k.data(), f.v.data(), f.kv_indptr.data(),
                                              2, s.Hq, s.Hkv, s.D, scale, vt);
      const double* pv = pv_bound_for(simd_level(), vb);
      std::vector<double> eq(static_cast<size_t>(s.D), 0.0), er(eq.size(), 0.0);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < s.Hq; ++h) {
          const int64_t hk = h / (s.Hq / s.Hkv);
          std::vector<float> qr(q.begin() + (b * s.Hq + h) * s.D, q.begin() + (b * s.Hq + h + 1) * s.D);
          if (rotate) {
            test::hadamard_error_bounds(qr.data(), s.D, s.D, eq.data());
            hadamard_transform(qr.data(), 1, s.D, s.D);
          }
          double delta = 0;
          std::vector<double> evmax(static_cast<size_t>(s.D), 0), vmax(static_cast<size_t>(s.D), 0);
          std::vector<double> dq(static_cast<size_t>(s.D / 32), 0);  // the query's group scales (see above)
          for (int64_t i = 0; i < s.D; ++i)
            dq[size_t(i / 32)] = std::max(dq[size_t(i / 32)], std::fabs(double(qr[size_t(i)] * scale)) / 127);
          for (int64_t t = f.kv_indptr[size_t(b)]; t < f.kv_indptr[size_t(b) + 1]; ++t) {
            std::vector<float> kr(f.k.begin() + (t * s.Hkv + hk) * s.D, f.k.begin() + (t * s.Hkv + hk + 1) * s.D);
            if (rotate) {
              test::hadamard_error_bounds(kr.data(), s.D, s.D, er.data());
              hadamard_transform(kr.data(), 1, s.D, s.D);
            }
            const float* vr = f.v.data() + (t * s.Hkv + hk) * s.D;
            std::vector<uint8_t> kqr(static_cast<size_t>(kv_row_bytes(kt, s.D))),
                vqr(static_cast<size_t>(kv_row_bytes(vt, s.D)));
            kv_quantize_row(kt, kr.data(), s.D, kqr.data());
            kv_quantize_row(vt, vr, s.D, vqr.data());
            double ds = 0, dx = 0;
            for (int64_t i = 0; i < s.D; ++i) {
              const size_t u = size_t(i);
              const double ek = kv_error_bound(kt, kr.data(), s.D, kqr.data(), i), ak = std::fabs(double(kr[u]));
              ds += std::fabs(double(qr[u])) * ek;
              ds += eq[u] * (ak + er[u]) + (std::fabs(double(qr[u])) + eq[u]) * er[u];  // 0 unless rotated
              if (kv_type_quantized(kt)) dx += dq[size_t(i / 32)] * (0.5 + 1e-4) * (ak + ek);
              evmax[u] = std::max(evmax[u], kv_error_bound(vt, vr, s.D, vqr.data(), i));
              vmax[u] = std::max(vmax[u], std::fabs(double(vr[i])));
            }
            delta = std::max(delta, scale * ds + dx);
          }
          for (int64_t i = 0; i < s.D; ++i) {
            const size_t o = size_t((b * s.Hq + h) * s.D + i);
            const double bound = evmax[size_t(i)] + std::expm1(2 * delta) * vmax[size_t(i)] + kTol +
                                 (pv ? std::exp(2 * delta) * pv[o] : 0.0);
            ASSERT_LE(std::fabs(out[o] - exact[o]), bound) << kv_type_name(kt) << "/" << kv_type_name(vt) << " b" << b
                                                           << " h" << h << " i" << i << " rotate " << rotate;
          }
        }
    }
}

TEST(Attention, BadArgumentsAreNamed) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = 2, cfg.head_dim = 64;
  const Filled f = test::make_filled(cfg, {5, 9}, 1);
  std::vector<float> q(2 * 4 * 64), out(q.size());
  const KvLayerView L = f.cache->layer(0);
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  EXPECT_NE(msg([&] { attention_decode(q.data(), L, f.pages.view(), 3, 0.1f, out.data()); }).find("'n_heads' = 3"),
            std::string::npos);
  EXPECT_NE(msg([&] { attention_decode(nullptr, L, f.pages.view(), 4, 0.1f, out.data()); }).find("'q'"),
            std::string::npos);
  EXPECT_NE(msg([&] { attention_decode(q.data(), L, f.pages.view(), 4, NAN, out.data()); }).find("'scale'"),
            std::string::npos);
  PageTable bad = f.pages;
  bad.indices[0] = int32_t(L.num_blocks);
  EXPECT_NE(msg([&] { attention_decode(q.data(), L, bad.view(), 4, 0.1f, out.data()); }).find("pages.indices[0]"),
            std::string::npos);
  bad = f.pages;
  bad.last_len[1] = 17;
  EXPECT_NE(msg([&] { attention_decode(q.data(), L, bad.view(), 4, 0.1f, out.data()); }).find("pages.last_len[1]"),
            std::string::npos);
  const int64_t qo[] = {0, 6, 7};  // 6 new tokens, 5 cached
  EXPECT_NE(msg([&] { attention_prefill(q.data(), qo, L, f.pages.view(), 4, 0.1f, out.data()); }).find("qo_indptr[1]"),
            std::string::npos);
  KvLayerView odd = L;
  odd.head_dim = 72;
  EXPECT_NE(msg([&] { attention_decode(q.data(), odd, f.pages.view(), 4, 0.1f, out.data()); }).find("kv.head_dim"),
            std::string::npos);
  // a pool not aligned to its elements (f32: 4 bytes), decode and prefill
  KvLayerView shifted = L;
  shifted.v = static_cast<const uint8_t*>(L.v) + 2;
  EXPECT_NE(msg([&] { attention_decode(q.data(), shifted, f.pages.view(), 4, 0.1f, out.data()); }).find("'kv.v'"),
            std::string::npos);
  const int64_t qo1[] = {0, 1, 2};
  EXPECT_NE(msg([&] { attention_prefill(q.data(), qo1, shifted, f.pages.view(), 4, 0.1f, out.data()); }).find("'kv.v'"),
            std::string::npos);
  // out written over q (still being read): named, decode and prefill.
  EXPECT_NE(msg([&] {
              attention_decode(q.data(), L, f.pages.view(), 4, 0.1f, q.data() + 64);
            }).find("must not overlap q"),
            std::string::npos);
  const int64_t qo2[] = {0, 1, 2};
  EXPECT_NE(msg([&] {
              attention_prefill(q.data(), qo2, L, f.pages.view(), 4, 0.1f, q.data());
            }).find("must not overlap q"),
            std::string::npos);
}

// The split count of an empty batch or of a view without kv heads is an error
// (attention_decode's own checks), not a division by zero.
TEST(Attention, DecodeSplitsOfAnEmptyBatchAreNamed) {
  KvCacheConfig cfg;
  cfg.head_dim = 64;
  const Filled f = test::make_filled(cfg, {5, 9}, 1);
  const KvLayerView L = f.cache->layer(0);
  EXPECT_GE(attention_decode_splits(L, f.pages.view(), 9), 1);
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  EXPECT_NE(msg([] { attention_decode_splits(KvLayerView{}, PageTableView{}, 0); }).find("'pages.num_seqs' = 0"),
            std::string::npos);
  KvLayerView none = L;
  none.n_kv_heads = 0;
  EXPECT_NE(msg([&] { attention_decode_splits(none, f.pages.view(), 9); }).find("'kv.n_kv_heads' = 0"),
            std::string::npos);
  EXPECT_NE(msg([&] { attention_decode_splits(L, f.pages.view(), -1); }).find("'max_kv_len' = -1"), std::string::npos);
  KvLayerView huge = L;  // block_tokens x row bytes would overflow in the item choice
  huge.block_tokens = int64_t(1) << 60;
  EXPECT_NE(msg([&] { attention_decode_heads_per_item(huge); }).find("'kv.block_tokens'"), std::string::npos);
  EXPECT_NE(msg([&] { attention_decode_splits(huge, f.pages.view(), 9); }).find("'kv.block_tokens'"),
            std::string::npos);
}

// The oracle checks its arguments as attention_prefill does: no kv heads, or
// more new tokens than cached ones, are named.
TEST(Attention, ReferenceBadArgumentsAreNamed) {
  const int64_t Hq = 2, D = 16;
  std::vector<float> q(2 * Hq * D, 1.0f), k(3 * Hq * D, 1.0f), v(k.size(), 1.0f);
  std::vector<double> out(q.size(), -1.0);
  const int64_t qo[] = {0, 2}, kv[] = {0, 3}, kv_short[] = {0, 1};
  attention_reference(q.data(), qo, k.data(), v.data(), kv, 1, Hq, Hq, D, 0.25, out.data());
  EXPECT_EQ(out, std::vector<double>(q.size(), 1.0));
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  EXPECT_NE(msg([&] {
              attention_reference(q.data(), qo, k.data(), v.data(), kv, 1, Hq, 0, D, 0.25, out.data());
            }).find("'n_kv_heads' = 0"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              attention_reference(q.data(), qo, k.data(), v.data(), kv, 1, Hq, 3, D, 0.25, out.data());
            }).find("'n_heads' = 2"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              attention_reference(q.data(), qo, k.data(), v.data(), kv_short, 1, Hq, Hq, D, 0.25, out.data());
            }).find("'qo_indptr[1]' = 2"),
            std::string::npos);
  EXPECT_THROW(attention_reference(q.data(), qo, k.data(), v.data(), kv, 0, Hq, Hq, D, 0.25, out.data()),
               InvalidArgument);
  EXPECT_THROW(attention_reference(q.data(), qo, k.data(), v.data(), kv, 1, Hq, Hq, 0, 0.25, out.data()),
               InvalidArgument);
  EXPECT_THROW(attention_reference(nullptr, qo, k.data(), v.data(), kv, 1, Hq, Hq, D, 0.25, out.data()),
               InvalidArgument);
}

// Sliding window (AttentionOptions::window): the query at position p sees the
// keys at k with p - window < k <= p. Every K and V row of a sequence before
// its first query's window is NaN (poison_before): reading one (its score, or
// its V times a weight of 0) makes the row NaN, which the oracle comparison
// catches; a leak of a poisoned-free position just outside a later row's
// window moves that row by ~1 / window, far past the tolerance.
namespace {
// NaN in sequence b's rows [0, cut[b]) of the dense rows x [total, H, D].
std::function<void(std::vector<float>&)> poison_before(std::vector<int64_t> lens, std::vector<int64_t> cut,
                                                       int64_t HD) {
  return [lens, cut, HD](std::vector<float>& x) {
    int64_t r0 = 0;
    for (size_t b = 0; b < lens.size(); ++b) {
      std::fill(x.begin() + r0 * HD, x.begin() + (r0 + cut[b]) * HD, NAN);
      r0 += lens[b];
    }
  };
}

struct WindowCase {
  Shape s;
  KvCacheConfig cfg;
  std::vector<int64_t> lens, qo;  // qo: qo_indptr (decode: one query a sequence)
  int64_t window;
};

// A case's cache (the rows before each sequence's first window NaN), queries
// and windowed oracle, built once; run() runs one path (decode: qo_len 1
// each, splits; else prefill with chunk) and compares, naming it `what`.
struct WindowRun {
  const WindowCase& w;
  Filled f;
  std::vector<float> q;
  std::vector<double> want;
  test::PvBounds vb;
  float scale;
  WindowRun(const WindowCase& wc, uint64_t seed) : w(wc) {
    const Shape& s = w.s;
    const int64_t B = int64_t(w.lens.size()), T = w.qo.back();
    std::vector<int64_t> cut;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t first = w.lens[size_t(b)] - (w.qo[size_t(b) + 1] - w.qo[size_t(b)]);  // the first query's position
      cut.push_back(std::max<int64_t>(0, first - w.window + 1));
    }
    const auto poison = poison_before(w.lens, cut, s.Hkv * s.D);
    f = test::make_filled(w.cfg, w.lens, seed, poison, poison);
    q.resize(size_t(T * s.Hq * s.D));
    test::fill_normal(q.data(), q.size(), seed + 7);
    scale = float(1 / std::sqrt(double(s.D)));
    const auto qk = kv_type_quantized(w.cfg.k_type) ? test::quantized_queries(q.data(), T * s.Hq, s.D, scale) : q;
    want.resize(q.size());
    attention_reference(qk.data(), w.qo.data(), f.kq.data(), f.vq.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D,
                        double(scale), want.data(), w.window);
    vb = test::pv_rounding_bound(qk.data(), w.qo.data(), f, s.Hq, double(scale), w.window);
  }
  void run(bool decode, int splits, int64_t chunk, SimdLevel lvl, int threads, const std::string& what) const {
    ScopedSimdLimit lim(lvl);
    ThreadCount tc(threads);
    test::Guarded<float> out(q.size(), 4);
    AttentionOptions opt;
    opt.window = w.window;
    opt.splits = splits;
    opt.prefill_chunk = chunk;
    if (decode) attention_decode(q.data(), f.cache->layer(0), f.pages.view(), w.s.Hq, scale, out.data(), opt);
    else attention_prefill(q.data(), w.qo.data(), f.cache->layer(0), f.pages.view(), w.s.Hq, scale, out.data(), opt);
    ASSERT_TRUE(out.guard_intact()) << what;
    ASSERT_TRUE(test::all_close(out.data(), want.data(), q.size(), kTol, kTol, what, pv_bound_for(lvl, vb)));
  }
};
}  // namespace

// Every SIMD level x 1..3 threads x K/V type, windows and lengths straddling
// the 16-token blocks and 32-position tiles; decode with 0, 1 and 3 splits,
// prefill (a cached prefix plus new tokens) with chunks of 16 and 1024.
TEST(Attention, WindowMatchesOracleEveryPathAndThreadCount) {
  const std::vector<int64_t> lens = {1, 17, 33, 97, 150};
  for (KvType t : {KvType::f32, KvType::f16, KvType::int8, KvType::int4})
    for (int64_t bt : {int64_t(5), int64_t(16)})
      for (int64_t W : {int64_t(1), int64_t(17), int64_t(33)}) {
        WindowCase w;
        w.s = Shape{6, 2, 64};
        w.cfg.n_kv_heads = 2, w.cfg.head_dim = 64, w.cfg.k_type = w.cfg.v_type = t, w.cfg.block_tokens = bt;
        w.lens = lens;
        w.window = W;
        const std::string base = std::string(kv_type_name(t)) + " bt " + std::to_string(bt) + " window " +
                                 std::to_string(W);
        WindowCase wp = w;
        w.qo = decode_qo(int64_t(lens.size()));
        wp.qo = {0};
        for (int64_t n : lens) wp.qo.push_back(wp.qo.back() + std::min<int64_t>(n, 1 + n / 3));  // the last third new
        const WindowRun dec(w, 11), pre(wp, 12);
        for (SimdLevel lvl : test::simd_levels())
          for (int threads : {1, 2, 3}) {
            const std::string at = base + " " + simd_name(lvl) + " threads " + std::to_string(threads);
            for (int splits : {0, 1, 3})
              dec.run(true, splits, 1024, lvl, threads, "decode " + at + " splits " + std::to_string(splits));
            for (int64_t chunk : {int64_t(16), int64_t(1024)})
              pre.run(false, 0, chunk, lvl, threads, "prefill " + at + " chunk " + std::to_string(chunk));
          }
      }
}

// Random windowed cases, every knob drawn at once: a random_layout, 1..4
// sequences of up to 300 tokens (up to 60 new), a window of 1..120,
// decode splits 0 / 1 / 2 / 5 or prefill chunks of 16 / 64 / 1024, 1..3
// threads, every SIMD level. A fixed seed: a failure names its case.
TEST(Attention, WindowRandomizedAgainstOracle) {
  std::mt19937_64 g(20261205);
  const int splits_of[] = {0, 1, 2, 5};
  const int64_t chunks[] = {16, 64, 1024};
  const std::vector<SimdLevel> levels = test::simd_levels();
  for (int it = 0; it < 30; ++it) {
    WindowCase w;
    const RandomLayout r = random_layout(g);
    w.s = r.s, w.cfg = r.cfg;
    w.window = 1 + int64_t(g() % 120);
    const bool decode = g() % 2;
    const int64_t B = 1 + int64_t(g() % 4);
    w.qo = {0};
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = 1 + int64_t(g() % 300), fresh = decode ? 1 : 1 + int64_t(g() % std::min<int64_t>(len, 60));
      w.lens.push_back(len);
      w.qo.push_back(w.qo.back() + fresh);
    }
    const SimdLevel lvl = levels[g() % levels.size()];
    const int threads = 1 + int(g() % 3), splits = splits_of[g() % 4];
    const int64_t chunk = chunks[g() % 3];
    std::string lens_s;
    for (int64_t l : w.lens) lens_s += " " + std::to_string(l);
    WindowRun(w, g()).run(decode, splits, chunk, lvl, threads,
                          "case " + std::to_string(it) +
                              (decode ? " decode splits " + std::to_string(splits)
                                      : " prefill chunk " + std::to_string(chunk)) +
                              ": " + simd_name(lvl) + " " + kv_type_name(w.cfg.k_type) + "/" +
                              kv_type_name(w.cfg.v_type) + " Hq " + std::to_string(w.s.Hq) + " Hkv " +
                              std::to_string(w.s.Hkv) + " D " + std::to_string(w.s.D) + " bt " +
                              std::to_string(w.cfg.block_tokens) + " window " + std::to_string(w.window) + " lens" +
                              lens_s + " threads " + std::to_string(threads));
  }
}

// A windowed row's bits depend on its position, q, the chunk size and the rows
// it sees, never on the query rows batched with it: a 150-token prompt
// prefilled cold, in pieces of 10 (every piece starts a new tile of queries,
// so each row's window starts at another place in its tile), one token at a
// time, and over a reused prefix gives the same rows; decode with one split
// equals a one-token prefill.
TEST(Attention, WindowedPrefixReuseAndPiecesAreBitwiseEqual) {
  for (KvType t : {KvType::f32, KvType::int8, KvType::int4})
    for (int64_t W : {int64_t(0), int64_t(7), int64_t(40)})
      for (int64_t chunk : {int64_t(32), int64_t(1024)}) {
        SCOPED_TRACE(std::string(kv_type_name(t)) + " window " + std::to_string(W) + " chunk " + std::to_string(chunk));
        const int64_t Hq = 4, Hkv = 2, D = 64, n = 150;
        KvCacheConfig cfg;
        cfg.n_kv_heads = Hkv, cfg.head_dim = D, cfg.k_type = cfg.v_type = t;
        cfg.budget_bytes = 64 * kv_block_bytes(cfg);
        KvCache c(cfg);
        std::vector<int32_t> prompt(n);
        for (int64_t i = 0; i < n; ++i) prompt[size_t(i)] = int32_t(1000 + 37 * i % 101);
        std::vector<float> k(static_cast<size_t>(n * Hkv * D)), v(k.size()), q(static_cast<size_t>(n * Hq * D));
        test::fill_normal(k.data(), k.size(), 1);
        test::fill_normal(v.data(), v.size(), 2);
        test::fill_normal(q.data(), q.size(), 3);
        AttentionOptions opt;
        opt.window = W, opt.prefill_chunk = chunk;
        auto prefill = [&](int64_t seq, int64_t from, int64_t to) {  // tokens [from, to) are new
          std::vector<int64_t> slots;
          EXPECT_EQ(c.append(seq, std::span(prompt).subspan(size_t(from), size_t(to - from)), &slots), KvStatus::ok);
          c.write(0, slots, k.data() + from * Hkv * D, v.data() + from * Hkv * D);
          const int64_t ids[] = {seq}, qo[] = {0, to - from};
          const PageTable pt = c.page_table(ids);
          std::vector<float> out(static_cast<size_t>((to - from) * Hq * D));
          attention_prefill(q.data() + from * Hq * D, qo, c.layer(0), pt.view(), Hq, 0.125f, out.data(), opt);
          if (to - from == 1 && chunk >= to) {  // decode with one split: the same bits
            std::vector<float> dec(out.size());
            AttentionOptions one = opt;
            one.splits = 1;
            attention_decode(q.data() + from * Hq * D, c.layer(0), pt.view(), Hq, 0.125f, dec.data(), one);
            EXPECT_EQ(0, std::memcmp(out.data(), dec.data(), out.size() * 4)) << "decode at " << from;
          }
          return out;
        };
        const int64_t a = c.add_sequence();
        const auto cold = prefill(a, 0, n);
        for (int64_t piece : {int64_t(10), int64_t(1)}) {
          const int64_t ch = c.add_sequence();
          std::vector<float> pieces;
          for (int64_t i = 0; i < n; i += piece) {
            const auto part = prefill(ch, i, std::min(n, i + piece));
            pieces.insert(pieces.end(), part.begin(), part.end());
          }
          EXPECT_EQ(0, std::memcmp(cold.data(), pieces.data(), cold.size() * 4)) << "pieces of " << piece;
          c.free_sequence(ch);
        }
        const int64_t b = c.add_sequence();
        const int64_t reused = c.reuse_prefix(b, std::span(prompt).first(size_t(n - 1)));
        ASSERT_EQ(reused, 144);
        const auto warm = prefill(b, reused, n);
        EXPECT_EQ(0, std::memcmp(cold.data() + reused * Hq * D, warm.data(), warm.size() * 4));
      }
}

TEST(Attention, NegativeWindowIsNamed) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = 1, cfg.head_dim = 64;
  const Filled f = test::make_filled(cfg, {5}, 3);
  std::vector<float> q(64), out(64);
  const int64_t qo[] = {0, 1};
  AttentionOptions opt;
  opt.window = -1;
  const auto dec = [&] { attention_decode(q.data(), f.cache->layer(0), f.pages.view(), 1, 0.125f, out.data(), opt); };
  const auto pre = [&] {
    attention_prefill(q.data(), qo, f.cache->layer(0), f.pages.view(), 1, 0.125f, out.data(), opt);
  };
  EXPECT_NE(test::invalid_argument_message(dec).find("'opt.window' = -1"), std::string::npos);
  EXPECT_NE(test::invalid_argument_message(pre).find("'opt.window' = -1"), std::string::npos);
  std::vector<double> ref(64);
  const int64_t kvp[] = {0, 5};
  EXPECT_NE(test::invalid_argument_message([&] {
              attention_reference(q.data(), qo, f.k.data(), f.v.data(), kvp, 1, 1, 1, 64, 0.125, ref.data(), -1);
            }).find("'window' = -1"),
            std::string::npos);
}
