// Attention over a cache that stores K Hadamard-rotated (KvCacheConfig::k_rotate):
//  - f32: equal to attention without rotation within the derived bound of
//    the two transforms' f32 rounding, on every SIMD path, every head_dim
//    (one transform of 64/128/256, blocks of 16/32 for 80/96), decode (split
//    and not) and prefill; and bitwise equal to a plain cache holding H k
//    queried with H q (the entry rotation is exactly hadamard_transform);
//    the caller's q is never written;
//  - int4 K on rows with outlier channels (a few channels 20-50x larger, as
//    real K caches have): the score and output errors with rotation fall
//    below those without, by the margin the quantization-step model predicts.
#include <cmath>
#include <cstring>

#include "llmk/parallel.hpp"
#include "tests/attention/attn_fixture.hpp"
#include "tests/kv/hadamard_bound.hpp"

using namespace llmk;
using test::Filled;

namespace {
struct Shape {
  int64_t Hq, Hkv, D;
};
constexpr double kTol = 1e-5;  // the kernels' f32 tolerance against the oracle (test_attention.cpp)

// Largest score change the f32 rounding of the rotations can make, over every
// query of q [rows, D] (rows of head h read kv head h / G) and every K row of
// f.k: |q~ . k~ - q . k| <= sum_i eq_i (|k~_i| + ek_i) + (|q~_i| + eq_i) ek_i.
double rotation_delta(const Filled& f, const std::vector<float>& q, const Shape& s, float scale) {
  const int64_t blk = kv_rotation_block(s.D), G = s.Hq / s.Hkv, B = int64_t(f.seqs.size());
  const int64_t rows_q = int64_t(q.size()) / s.D;
  std::vector<double> eq(size_t(s.D)), ek(size_t(s.D));
  double worst = 0;
  for (int64_t r = 0; r < rows_q; ++r) {
    const int64_t b = r / s.Hq % B, hk = r % s.Hq / G;
    std::vector<float> qr(q.begin() + r * s.D, q.begin() + (r + 1) * s.D);
    test::hadamard_error_bounds(qr.data(), s.D, blk, eq.data());
    hadamard_transform(qr.data(), 1, s.D, blk);
    for (int64_t t = f.kv_indptr[size_t(b)]; t < f.kv_indptr[size_t(b) + 1]; ++t) {
      std::vector<float> kr(f.k.begin() + (t * s.Hkv + hk) * s.D, f.k.begin() + (t * s.Hkv + hk + 1) * s.D);
      test::hadamard_error_bounds(kr.data(), s.D, blk, ek.data());
      hadamard_transform(kr.data(), 1, s.D, blk);
      double d = 0;
      for (size_t i = 0; i < size_t(s.D); ++i)
        d += eq[i] * (std::fabs(double(kr[i])) + ek[i]) + (std::fabs(double(qr[i])) + eq[i]) * ek[i];
      worst = std::max(worst, double(scale) * d);
    }
  }
  return worst;
}
}  // namespace

TEST(AttentionRotated, F32EqualsUnrotatedAndPreRotatedBitwise) {
  const Shape shapes[] = {{9, 3, 64}, {8, 8, 80}, {8, 1, 96}, {4, 2, 128}, {2, 1, 256}};
  for (const Shape& s : shapes) {
    KvCacheConfig cfg;
    cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_rotate = true;
    const std::vector<int64_t> lens = {1, 17, 300};
    const Filled f = test::make_filled(cfg, lens, uint64_t(s.D) + 5);
    const int64_t B = int64_t(lens.size()), n = B * s.Hq * s.D;
    const float scale = float(1 / std::sqrt(double(s.D)));
    std::vector<float> q(static_cast<size_t>(n));
    test::fill_normal(q.data(), q.size(), 21);
    const std::vector<float> q0 = q;
    std::vector<int64_t> qo(static_cast<size_t>(B + 1));
    for (int64_t b = 0; b <= B; ++b) qo[size_t(b)] = b;
    std::vector<double> want(static_cast<size_t>(n));
    attention_reference(q.data(), qo.data(), f.k.data(), f.v.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D, scale,
                        want.data());
    // the scores move by at most delta, the probabilities by e^(+-2 delta):
    // |out - out'| <= (e^(2 delta) - 1) max |v|, on top of the kernel's own tolerance
    double vmax = 0;
    for (float x : f.v) vmax = std::max(vmax, double(std::fabs(x)));
    const double extra = std::expm1(2 * rotation_delta(f, q, s, scale)) * vmax;
    // the same pools read as a plain cache of rotated rows, with the queries rotated by the caller
    KvLayerView plain = f.cache->layer(0);
    ASSERT_TRUE(plain.k_rotated);
    plain.k_rotated = false;
    std::vector<float> qh = q;
    hadamard_transform(qh.data(), B * s.Hq, s.D, kv_rotation_block(s.D));
    for (SimdLevel lvl : test::simd_levels())
      for (int splits : {1, 0}) {
        ScopedSimdLimit lim(lvl);
        AttentionOptions opt;
        opt.splits = splits;
        test::Guarded<float> out(static_cast<size_t>(n), 4), pre(static_cast<size_t>(n));
        attention_decode(q.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, out.data(), opt);
        attention_decode(qh.data(), plain, f.pages.view(), s.Hq, scale, pre.data(), opt);
        ASSERT_TRUE(out.guard_intact());
        ASSERT_EQ(0, std::memcmp(q.data(), q0.data(), q.size() * 4)) << "q was written";
        const std::string what = std::string(simd_name(lvl)) + " D=" + std::to_string(s.D) +
                                 " splits=" + std::to_string(splits);
        ASSERT_TRUE(test::all_close(out.data(), want.data(), size_t(n), kTol + extra, kTol, what));
        ASSERT_EQ(0, std::memcmp(out.data(), pre.data(), size_t(n) * 4)) << what;
        // prefill of one token per sequence: the same rows
        test::Guarded<float> pf(static_cast<size_t>(n));
        attention_prefill(q.data(), qo.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, pf.data());
        ASSERT_TRUE(pf.guard_intact());
        ASSERT_TRUE(test::all_close(pf.data(), want.data(), size_t(n), kTol + extra, kTol, "prefill " + what));
      }
  }
}

// int4 K with outlier channels. Rows are N(0, 1) except channels 9, 45 and 77,
// 50x, 35x and 20x larger: without rotation each of the groups 0-2 has a
// quantization step of ~ (range of the outlier) / 15, and every value of the
// group is rounded on that coarse grid; rotated, the outliers are spread over
// all 128 values (+-a / sqrt(128) each) and every group gets a moderate step.
// Score errors are measured on the stored rows (scale * (H q) . deq(H k) -
// scale * q . k; the kernel's own error is tested elsewhere), output errors on
// attention_decode against the exact oracle. The model of the step bound:
// each element's error is uniform in [-d_g/2, d_g/2], independent, so the
// expected squared score error is P = scale^2 sum_i q_i^2 d_g(i)^2 / 12 (q the
// query as scored: rotated or not; d_g the stored steps). The test asserts:
//  - the model, for both caches: the measured mean square MS within 25% of P.
//    Sampling: 1536 distinct K rows (x 4 query heads), so MS has a relative
//    standard error of ~ sqrt(2 / 1536) = 3.6%; the model's own bias (each
//    group's min is stored almost exactly, the f16 scale) is a few percent:
//    25% is > 5 standard errors above both;
//  - the predicted gain: P_rot <= P_plain / 2 on this data (a property of the
//    stored steps, i.e. of the step bound, not of any measured error);
//  - the measured gain with the margin both model checks leave:
//    MS_rot / MS_plain <= (1.25 / 0.75) P_rot / P_plain (< 0.84 given the above);
//  - end to end, the RMS output error of attention_decode falls too.
TEST(AttentionRotated, Int4OutlierChannelsErrorFalls) {
  const Shape s{8, 2, 128};
  const float scale = float(1 / std::sqrt(128.0));
  const std::vector<int64_t> lens = {256, 512};
  auto outliers = [&](std::vector<float>& k) {
    for (size_t r = 0; r < k.size() / size_t(s.D); ++r) {
      k[r * size_t(s.D) + 9] *= 50.0f;
      k[r * size_t(s.D) + 45] *= 35.0f;
      k[r * size_t(s.D) + 77] *= 20.0f;
    }
  };
  const int64_t B = int64_t(lens.size()), n = B * s.Hq * s.D;
  std::vector<float> q(static_cast<size_t>(n));
  test::fill_normal(q.data(), q.size(), 31);
  double ms[2], pred[2], out_err[2];
  std::vector<double> exact;
  for (int rotate = 0; rotate < 2; ++rotate) {
    KvCacheConfig cfg;
    cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = KvType::int4, cfg.v_type = KvType::f32;
    cfg.k_rotate = rotate;
    const Filled f = test::make_filled(cfg, lens, 41, outliers);
    std::vector<int64_t> qo(static_cast<size_t>(B + 1));
    for (int64_t b = 0; b <= B; ++b) qo[size_t(b)] = b;
    exact.assign(size_t(n), 0.0);
    attention_reference(q.data(), qo.data(), f.k.data(), f.v.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D, scale,
                        exact.data());
    std::vector<float> out(static_cast<size_t>(n));
    attention_decode(q.data(), f.cache->layer(0), f.pages.view(), s.Hq, scale, out.data());
    double oe = 0;
    for (int64_t i = 0; i < n; ++i) oe += (out[size_t(i)] - exact[size_t(i)]) * (out[size_t(i)] - exact[size_t(i)]);
    out_err[rotate] = std::sqrt(oe / double(n));
    double sum_e2 = 0, sum_p = 0;
    int64_t count = 0;
    std::vector<uint8_t> row(static_cast<size_t>(kv_row_bytes(KvType::int4, s.D)));
    std::vector<float> deq(static_cast<size_t>(s.D));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < s.Hq; ++h) {
        std::vector<float> qr(q.begin() + (b * s.Hq + h) * s.D, q.begin() + (b * s.Hq + h + 1) * s.D);
        if (rotate) hadamard_transform(qr.data(), 1, s.D, s.D);
        for (int64_t t = f.kv_indptr[size_t(b)]; t < f.kv_indptr[size_t(b) + 1]; ++t) {
          const float* k = f.k.data() + (t * s.Hkv + h / (s.Hq / s.Hkv)) * s.D;
          std::vector<float> kr(k, k + s.D);
          if (rotate) hadamard_transform(kr.data(), 1, s.D, s.D);
          kv_quantize_row(KvType::int4, kr.data(), s.D, row.data());
          kv_dequantize_row(KvType::int4, row.data(), s.D, deq.data());
          double got = 0, want = 0, p = 0;
          for (int64_t i = 0; i < s.D; ++i) {
            got += double(qr[size_t(i)]) * deq[size_t(i)];
            want += double(q[size_t((b * s.Hq + h) * s.D + i)]) * k[i];
            const double d = f16_bits_to_f32(reinterpret_cast<const BlockQ4*>(row.data())[i / 32].d);
            p += double(qr[size_t(i)]) * qr[size_t(i)] * d * d / 12;
          }
          sum_e2 += double(scale) * scale * (got - want) * (got - want);
          sum_p += double(scale) * scale * p;
          ++count;
        }
      }
    ms[rotate] = sum_e2 / double(count);
    pred[rotate] = sum_p / double(count);
  }
  for (int r = 0; r < 2; ++r)
    EXPECT_NEAR(ms[r] / pred[r], 1.0, 0.25)
        << (r ? "rotated" : "plain") << ": measured mean square score error " << ms[r] << ", model " << pred[r];
  EXPECT_LE(pred[1], pred[0] / 2) << "the stored steps predict no gain from the rotation";
  EXPECT_LE(ms[1] / ms[0], 1.25 / 0.75 * pred[1] / pred[0]) << "rotated MS " << ms[1] << ", plain MS " << ms[0];
  EXPECT_LT(out_err[1], out_err[0]) << "RMS output error: rotated " << out_err[1] << ", plain " << out_err[0];
  std::printf(
      "int4 K, outlier channels: RMS score error %.4f -> %.4f rotated (model %.4f -> %.4f), "
      "RMS output error %.4f -> %.4f\n",
      std::sqrt(ms[0]), std::sqrt(ms[1]), std::sqrt(pred[0]), std::sqrt(pred[1]), out_err[0], out_err[1]);
}
