// matmul against its double oracle, for every weight type, every SIMD path this
// CPU has, thread counts 1 and 2, row counts M = 1..9 (the tile is 4) and
// N/K straddling 1023/1024/1025 (K a multiple of 32 for block formats), with
// misaligned x, padded strides and a sentinel after y.
//
// Tolerance, per output y[m, n] = sum_k x_k w_k:
//  - quantized W: x is quantized per 32-block to q * d16, q = round(x / d),
//    d = amax/127 and d16 = f16(d) (as llama.cpp does), so
//    |x_k - q_k d16| <= d/2 + 127 d 2^-11 and the exact product of the
//    quantized operands differs from the oracle by at most
//    sum_b d_b (1/2 + 127/2048) * sum_{k in b} |w_k|; Q4_0/Q4_1 also use
//    s16 = f16(d * sum q) in place of d16 * sum q: |s16 - d16 sum q| <=
//    |sum q| d 2^-10, times |m| (Q4_1) or 8 d_w (Q4_0) per block;
//  - f32 accumulation of K terms (per-lane chains, per-block scale products):
//    at most (K + 8) * eps_f32 * sum_k |x_k w_k| (the standard gamma_K bound,
//    a few extra roundings for the scales and the final sums).
// The first bound is loose (worst case over signs), so quantized results are
// also checked against a tight oracle: the double product of the test's own
// quantization of x (same rule) with W, within the rounding bound alone.
#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "llmk/cpu_features.hpp"
#include "llmk/matmul.hpp"
#include "llmk/parallel.hpp"
#include "model/matmul_decode.hpp"
#include "model/quant_blocks.hpp"
#include "tests/common/testutil.hpp"

namespace {
using namespace llmk;

// Random weights in type t: float types from N(0, 1); blocks of random bytes (so every
// code and integer sub-scale occurs) with random f16 scales (d, and m / dmin where the
// type has one) in place of the bytes that hold them.
std::vector<uint8_t> random_weights(WType t, int64_t N, int64_t K, int64_t row_bytes, uint64_t seed) {
  std::vector<uint8_t> buf(size_t(N * row_bytes), 0x5a);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0, 1);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_int_distribution<int> byte(0, 255), q8(-127, 127);
  const WTypeTraits& tr = wtype_traits(t);
  // Byte offsets of the f16 scales in a block, and the scale's magnitude (K-quants
  // multiply d by an integer sub-scale of up to 6 or 8 bits).
  std::vector<size_t> halves;
  float unit = 1;
  switch (t) {
    case WType::q8_0:
    case WType::q4_0:
    case WType::q5_0: halves = {0}; break;
    case WType::q4_1:
    case WType::q5_1: halves = {0, 2}; break;
    case WType::q2_k: halves = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}, unit = 1.0f / 16; break;
    case WType::q3_k: halves = {offsetof(BlockQ3_K, d)}, unit = 1.0f / 32; break;
    case WType::q4_k:
    case WType::q5_k: halves = {0, 2}, unit = 1.0f / 64; break;
    case WType::q6_k: halves = {offsetof(BlockQ6_K, d)}, unit = 1.0f / 128; break;
    default: break;
  }
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* r = buf.data() + n * row_bytes;
    for (int64_t k = 0; k < K; ++k) {
      if (t == WType::f32) reinterpret_cast<float*>(r)[k] = nd(g);
      if (t == WType::f16) reinterpret_cast<f16*>(r)[k] = from_f32<f16>(nd(g));
      if (t == WType::bf16) reinterpret_cast<bf16*>(r)[k] = from_f32<bf16>(nd(g));
    }
    for (int64_t b = 0; b < K / tr.block_elems && tr.quantized(); ++b) {
      uint8_t* blk = r + b * tr.block_bytes;
      for (int i = 0; i < tr.block_bytes; ++i) blk[i] = uint8_t(byte(g));
      if (t == WType::q8_0)  // ggml's Q8_0 codes are -127..127
        for (auto& v : reinterpret_cast<BlockQ8_0*>(blk)->qs) v = int8_t(q8(g));
      for (size_t k = 0; k < halves.size(); ++k) {
        // Q4_1 / Q5_1 minimum: negative, as a block's minimum mostly is
        const float v = (k == 1 && tr.block_elems == 32 ? -8.0f : 1.0f) * scale(g) * unit;
        const uint16_t h = f32_to_f16_bits(v);
        std::memcpy(blk + halves[k], &h, 2);
      }
    }
  }
  return buf;
}

// Per element of row n, the magnitude of the parts the kernels add up (code * scale,
// the offset, Q2_K's min; matmul_decode.hpp), and the offset each 32-chunk applies
// through the activation's s (0 where the type has none).
void parts_of_row(const WeightView& w, int64_t n, std::vector<double>& parts, std::vector<double>& offs) {
  parts.assign(size_t(w.cols), 0.0);
  offs.assign(size_t(w.cols / kQBlock + 1), 0.0);
  const char* r = static_cast<const char*>(w.data) + n * w.row_bytes;
  const auto run = [&](auto* wb) {
    using B = std::remove_const_t<std::remove_pointer_t<decltype(wb)>>;
    using D = mm::Decode<B>;
    typename D::Scales sc{};
    int8_t q[32];
    for (int64_t c = 0; c < w.cols / kQBlock; ++c) {
      D::scales(wb[c / D::kChunks], sc);
      D::codes(wb[c / D::kChunks], int(c % D::kChunks), q);
      const int cc = int(c % D::kChunks);
      if constexpr (D::kOffset) offs[size_t(c)] = std::fabs(double(sc.fo[cc]));
      for (int l = 0; l < 32; ++l) {
        double p = std::fabs(double(sc.fw[cc][l / 16]) * q[l]);
        if constexpr (D::kOffset) p += std::fabs(double(sc.fo[cc]));
        if constexpr (D::kMins) p += std::fabs(double(sc.fm) * sc.m[cc][l / 16]);
        parts[size_t(c * kQBlock + l)] = p;
      }
    }
  };
  switch (w.type) {
    case WType::q8_0: return run(reinterpret_cast<const BlockQ8_0*>(r));
    case WType::q4_0: return run(reinterpret_cast<const BlockQ4_0*>(r));
    case WType::q4_1: return run(reinterpret_cast<const BlockQ4_1*>(r));
    case WType::q5_0: return run(reinterpret_cast<const BlockQ5_0*>(r));
    case WType::q5_1: return run(reinterpret_cast<const BlockQ5_1*>(r));
    case WType::q2_k: return run(reinterpret_cast<const BlockQ2_K*>(r));
    case WType::q3_k: return run(reinterpret_cast<const BlockQ3_K*>(r));
    case WType::q4_k: return run(reinterpret_cast<const BlockQ4_K*>(r));
    case WType::q5_k: return run(reinterpret_cast<const BlockQ5_K*>(r));
    case WType::q6_k: return run(reinterpret_cast<const BlockQ6_K*>(r));
    default: {
      std::vector<float> row(size_t(w.cols));
      dequantize_row(w, n, row.data());
      for (int64_t k = 0; k < w.cols; ++k) parts[size_t(k)] = std::fabs(double(row[size_t(k)]));
    }
  }
}

// random_weights and their view (rows of row_bytes; the view points into buf).
struct RandomWeights {
  std::vector<uint8_t> buf;
  WeightView view;
  RandomWeights(WType t, int64_t N, int64_t K, int64_t row_bytes, uint64_t seed)
      : buf(random_weights(t, N, K, row_bytes, seed)), view{buf.data(), t, N, K, row_bytes} {}
  RandomWeights(const RandomWeights&) = delete;
  RandomWeights& operator=(const RandomWeights&) = delete;
};

void check_case(WType t, int64_t M, int64_t N, int64_t K) {
  const int64_t row_bytes = wtype_row_bytes(t, K) + 4;  // padded rows
  const RandomWeights rw(t, N, K, row_bytes, uint64_t(M * 7919 + N * 31 + K));
  const WeightView& w = rw.view;
  const int64_t ldx = K + 3, ldy = N + 2;
  test::Guarded<float> x(size_t(M * ldx), 4);
  test::fill_normal(x.data(), x.size(), uint64_t(K + N), 0.0, 1.0);
  std::vector<double> ref(size_t(M * ldy));
  matmul_ref(x.data(), ldx, w, ref.data(), ldy, M);
  // Tolerance per output (see the file comment), from the weights' parts row by row.
  std::vector<double> wrow, offs;
  std::vector<double> tol(size_t(M * ldy));
  for (int64_t n = 0; n < N; ++n) {
    parts_of_row(w, n, wrow, offs);
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x.data() + m * ldx;
      double abs_sum = 0, qerr = 0;
      for (int64_t k = 0; k < K; ++k) abs_sum += std::fabs(double(xr[k]) * wrow[size_t(k)]);
      for (int64_t b = 0; b < K / kQBlock && wtype_is_quantized(t); ++b) {
        double amax = 0, wsum = 0;
        for (int j = 0; j < kQBlock; ++j) {
          amax = std::max(amax, std::fabs(double(xr[b * kQBlock + j])));
          wsum += wrow[size_t(b * kQBlock + j)];
        }
        qerr += (amax / 127.0) * (0.5 + 127.0 / 2048) * wsum * (1 + 1e-6);  // 1e-6: d is computed in f32
      }
      tol[size_t(m * ldy + n)] = qerr + double(K + 8) * test::eps_of<float>() * abs_sum;
    }
  }
  // Tight oracle for block formats: x quantized here, product in double.
  std::vector<double> tight(size_t(M * ldy)), tight_tol(size_t(M * ldy));
  if (wtype_is_quantized(t)) {
    std::vector<float> xq(size_t(M * ldx));
    std::vector<double> sterm(static_cast<size_t>(M * (K / kQBlock)));  // bound on |s16 - d16 sum q| per block
    for (int64_t m = 0; m < M; ++m)
      for (int64_t b = 0; b < K / kQBlock; ++b) {
        const float* xb = x.data() + m * ldx + b * kQBlock;
        float amax = 0;
        for (int j = 0; j < kQBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f, id = d > 0 ? 127.0f / amax : 0.0f;
        const float d16 = f16_bits_to_f32(f32_to_f16_bits(d));
        double qsum = 0;
        for (int j = 0; j < kQBlock; ++j) {
          xq[size_t(m * ldx + b * kQBlock + j)] = std::nearbyint(xb[j] * id) * d16;
          qsum += std::nearbyint(xb[j] * id);
        }
        sterm[size_t(m * (K / kQBlock) + b)] = std::fabs(qsum) * d * std::ldexp(1.0, -10);
      }
    matmul_ref(xq.data(), ldx, w, tight.data(), ldy, M);
    for (int64_t n = 0; n < N; ++n) {
      parts_of_row(w, n, wrow, offs);
      for (int64_t m = 0; m < M; ++m) {
        double abs_sum = 0;
        for (int64_t k = 0; k < K; ++k) abs_sum += std::fabs(double(xq[size_t(m * ldx + k)]) * wrow[size_t(k)]);
        double s_err = 0;  // the s16 term's error, weighted by the chunk's offset (|m|, 8 d_w, dmin m_c, ...)
        for (int64_t b = 0; b < K / kQBlock; ++b) s_err += offs[size_t(b)] * sterm[size_t(m * (K / kQBlock) + b)];
        tight_tol[size_t(m * ldy + n)] = double(K + 8) * test::eps_of<float>() * abs_sum + s_err;
      }
    }
  }
  for (SimdLevel level : test::simd_levels())
    for (int threads : {1, 2}) {
      ScopedSimdLimit lim(level);
      set_num_threads(threads);
      test::Guarded<float> y(size_t(M * ldy));
      for (size_t i = 0; i < y.size(); ++i) y[i] = -777.0f;
      matmul(x.data(), ldx, w, y.data(), ldy, M);
      ASSERT_TRUE(y.guard_intact()) << wtype_name(t) << " " << simd_name(level);
      int bad = 0;
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < ldy; ++n) {
          const size_t i = size_t(m * ldy + n);
          if (n >= N) {
            EXPECT_EQ(y[i], -777.0f) << "padding written at m=" << m << " n=" << n;
            continue;
          }
          const double err = std::fabs(double(y[i]) - ref[i]);
          const bool tight_ok = !wtype_is_quantized(t) || std::fabs(double(y[i]) - tight[i]) <= tight_tol[i];
          if (!(err <= tol[i] && tight_ok) && bad++ < 5)
            ADD_FAILURE() << wtype_name(t) << " " << simd_name(level) << " threads " << threads << " M" << M << " N"
                          << N << " K" << K << " at [" << m << "," << n << "]: " << y[i] << " vs " << ref[i] << " tol "
                          << tol[i] << " (tight oracle " << tight[i] << " tol " << tight_tol[i] << ")";
        }
      }
      ASSERT_EQ(bad, 0);
    }
  set_num_threads(2);
}

const std::vector<std::tuple<int64_t, int64_t, int64_t>> kFloatShapes = {{1, 1, 1},       {1, 1025, 1023},
                                                                         {1, 1023, 1025}, {3, 1024, 1024},
                                                                         {4, 33, 1025},   {5, 1025, 7},
                                                                         {9, 31, 1023}};
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kQuantShapes = {{1, 1, 32},      {1, 1025, 992},
                                                                         {1, 1023, 1056}, {2, 1024, 1024},
                                                                         {4, 33, 1056},   {5, 1025, 64},
                                                                         {9, 31, 992}};
// K-quants: K in whole 256-value super-blocks, straddling 1024.
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kSuperShapes = {{1, 1, 256},     {1, 1025, 768},
                                                                         {1, 1023, 1280}, {2, 1024, 1024},
                                                                         {4, 33, 1280},   {5, 1025, 256},
                                                                         {9, 31, 768}};

class MatmulTypes : public ::testing::TestWithParam<WType> {};

TEST_P(MatmulTypes, MatchesDoubleOracle) {
  const WType t = GetParam();
  const auto& shapes = wtype_traits(t).block_elems == kSuperBlock ? kSuperShapes
                       : wtype_is_quantized(t)                    ? kQuantShapes
                                                                  : kFloatShapes;
  for (const auto& [M, N, K] : shapes) check_case(t, M, N, K);
}

INSTANTIATE_TEST_SUITE_P(All, MatmulTypes,
                         ::testing::Values(WType::f32, WType::f16, WType::bf16, WType::q8_0, WType::q4_0, WType::q4_1,
                                           WType::q5_0, WType::q5_1, WType::q2_k, WType::q3_k, WType::q4_k, WType::q5_k,
                                           WType::q6_k),
                         [](const auto& info) { return std::string(wtype_name(info.param)); });

// A row's result must not depend on the thread count nor on the rows batched
// with it (the engine relies on this: batched == one-by-one, bit for bit).
TEST(Matmul, ThreadsAndBatchDoNotChangeBits) {
  const int64_t M = 5, N = 1025, K = 1024;
  for (WType t :
       {WType::f32, WType::bf16, WType::q8_0, WType::q4_1, WType::q5_0, WType::q2_k, WType::q4_k, WType::q6_k})
    for (SimdLevel level : test::simd_levels()) {
      ScopedSimdLimit lim(level);
      const RandomWeights rw(t, N, K, wtype_row_bytes(t, K), 3);
      const WeightView& w = rw.view;
      std::vector<float> x(size_t(M * K)), y1(size_t(M * N)), y2(size_t(M * N));
      test::fill_normal(x.data(), x.size(), 5);
      set_num_threads(1);
      matmul(x.data(), K, w, y1.data(), N, M);
      set_num_threads(2);
      matmul(x.data(), K, w, y2.data(), N, M);
      EXPECT_EQ(y1, y2) << wtype_name(t) << " " << simd_name(level);
      for (int64_t m = 0; m < M; ++m) {  // each row alone
        std::vector<float> y(static_cast<size_t>(N));
        matmul(x.data() + m * K, K, w, y.data(), N, 1);
        EXPECT_TRUE(std::equal(y.begin(), y.end(), y2.begin() + m * N)) << wtype_name(t) << " row " << m;
      }
    }
}

// AVX-512 VNNI replaces the quantized tile's maddubs + madd by vpdpbusd: the
// same integer sums, so every output must keep its AVX-512 bits (and the
// AVX2 ones: the AVX-512 quantized tile is the AVX2 one), for every quantized
// type, a tile of 1..4 rows and K with a partial last chunk.
TEST(Matmul, VnniKeepsTheAvx2Bits) {
  if (detected_simd_level() < SimdLevel::avx512vnni) GTEST_SKIP() << "skipped: no AVX-512 VNNI on this CPU";
  for (int i = int(WType::q8_0); i < kWTypeCount; ++i)
    for (int64_t M : {1, 3, 4, 7}) {
      const WType t = WType(i);
      const int64_t N = 67, K = wtype_traits(t).block_elems == kSuperBlock ? 1280 : 1056;
      const RandomWeights rw(t, N, K, wtype_row_bytes(t, K), 9);
      std::vector<float> x(size_t(M * K));
      test::fill_normal(x.data(), x.size(), 10 + uint64_t(M));
      std::vector<std::vector<float>> ys;
      for (SimdLevel level : {SimdLevel::avx2, SimdLevel::avx512, SimdLevel::avx512vnni}) {
        ScopedSimdLimit lim(level);
        ys.emplace_back(size_t(M * N));
        matmul(x.data(), K, rw.view, ys.back().data(), N, M);
      }
      EXPECT_EQ(ys[0], ys[1]) << wtype_name(t) << " M " << M << ": avx512 vs avx2";
      EXPECT_EQ(ys[1], ys[2]) << wtype_name(t) << " M " << M << ": avx512vnni vs avx512";
    }
}

// A NaN or an infinity in x makes exactly the outputs of its row NaN (or inf
// for the float weights), for quantized weights too (x's block is quantized
// with a NaN scale, not converted to int), and no other row changes.
TEST(Matmul, NonFiniteInputReachesOnlyItsRow) {
  const int64_t M = 3, N = 67;
  for (int i = 0; i < kWTypeCount; ++i)
    for (float bad : {NAN, INFINITY})
      for (SimdLevel level : test::simd_levels()) {
        const WType t = WType(i);
        const int64_t K = wtype_traits(t).block_elems == kSuperBlock ? 512 : 96;
        ScopedSimdLimit lim(level);
        const RandomWeights rw(t, N, K, wtype_row_bytes(t, K), 4);
        const WeightView& w = rw.view;
        std::vector<float> x(size_t(M * K)), y0(size_t(M * N)), y1(size_t(M * N));
        test::fill_normal(x.data(), x.size(), 6);
        matmul(x.data(), K, w, y0.data(), N, M);
        x[size_t(1 * K + 40)] = bad;
        matmul(x.data(), K, w, y1.data(), N, M);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const size_t i = size_t(m * N + n);
            if (m == 1) EXPECT_FALSE(std::isfinite(y1[i])) << wtype_name(t) << " " << simd_name(level) << " n=" << n;
            else EXPECT_EQ(y0[i], y1[i]) << wtype_name(t) << " " << simd_name(level) << " row " << m;
          }
      }
}

// The AVX2 activation quantizer writes the scalar one's bytes (model/quant_blocks.hpp):
// 31 / 32 / 33 blocks (992 / 1024 / 1056 values) of normal values at magnitudes
// from 1e-30 to 1e30, exact rounding ties (x * 127 / amax = k + 0.5), zeros and
// -0, subnormals, an amax so small that 127 / amax is infinite, and blocks with a
// NaN, +inf or -inf; a sentinel block after the output must stay untouched.
TEST(Matmul, ActivationQuantizerAvx2WritesTheScalarBytes) {
  if (simd_level() < SimdLevel::avx2) GTEST_SKIP() << "skipped: no AVX2 on this CPU";
  for (int64_t nb : {31, 32, 33}) {
    std::vector<float> x(static_cast<size_t>(nb * kQBlock));
    test::fill_normal(x.data(), x.size(), uint64_t(nb));
    std::mt19937 g{static_cast<uint32_t>(nb)};
    for (int64_t b = 0; b < nb; ++b) {
      float* xb = x.data() + b * kQBlock;
      const float mag = std::pow(10.0f, float(int(g() % 61) - 30));
      for (int j = 0; j < kQBlock; ++j) xb[j] *= mag;
      switch (b % 10) {
        case 1:  // amax 127: id = 1, and every value a tie k + 0.5 or an integer
          for (int j = 0; j < kQBlock; ++j) xb[j] = float(int(j % 9) - 4) + (j % 2 ? 0.5f : 0.0f);
          xb[5] = -127.0f;
          break;
        case 2:
          std::fill(xb, xb + kQBlock, 0.0f);
          xb[3] = -0.0f;
          break;
        case 3:
          for (int j = 0; j < kQBlock; ++j) xb[j] = float(j - 16) * 1e-40f;
          break;  // subnormals
        case 4:
          std::fill(xb, xb + kQBlock, 0.0f);
          xb[7] = 1e-45f;
          break;  // 127 / amax = inf
        case 5: xb[int(g() % 32)] = NAN; break;
        case 6: xb[int(g() % 32)] = INFINITY; break;
        case 7: xb[int(g() % 32)] = -INFINITY; break;
        default: break;
      }
    }
    std::vector<ActQ8> a(static_cast<size_t>(nb + 1)), c(a.size());
    std::memset(a.data(), 0xab, a.size() * sizeof(ActQ8));
    std::memset(c.data(), 0xab, c.size() * sizeof(ActQ8));
    mm::quantize_act_scalar(x.data(), nb, a.data());
    mm::quantize_act_avx2(x.data(), nb, c.data());
    for (int64_t b = 0; b < nb; ++b)
      ASSERT_EQ(0, std::memcmp(&a[size_t(b)], &c[size_t(b)], sizeof(ActQ8))) << "block " << b << " of " << nb;
    const std::vector<uint8_t> sentinel(sizeof(ActQ8), 0xab);
    EXPECT_EQ(0, std::memcmp(&a[size_t(nb)], sentinel.data(), sizeof(ActQ8)));
    EXPECT_EQ(0, std::memcmp(&c[size_t(nb)], sentinel.data(), sizeof(ActQ8)));
    EXPECT_TRUE(std::isnan(a[5].d) && std::isnan(c[6].s)) << "non-finite blocks";
    EXPECT_EQ(a[1].d, f16_bits_to_f32(f32_to_f16_bits(1.0f))) << "amax 127";
  }
}

// The oracle's double weights (matmul_decode.hpp's reading of the blocks) round to the
// reference dequantizer's f32 (which tests/gguf and python/tests/test_ggml_quants.py hold
// bitwise to the gguf package) within the f32 roundings of its two or three operations.
TEST(Matmul, OracleWeightsAreTheReferenceDequantizers) {
  for (int i = int(WType::q8_0); i < kWTypeCount; ++i) {
    const WType t = WType(i);
    const int64_t N = 5, K = 1024;
    const RandomWeights rw(t, N, K, wtype_row_bytes(t, K), 11);
    std::vector<double> w64(static_cast<size_t>(K)), parts, offs;
    std::vector<float> w32(static_cast<size_t>(K));
    for (int64_t n = 0; n < N; ++n) {
      dequantize_row_f64(rw.view, n, w64.data());
      wtype_traits(t).to_float(static_cast<const char*>(rw.view.data) + n * rw.view.row_bytes, w32.data(), K);
      parts_of_row(rw.view, n, parts, offs);
      for (int64_t k = 0; k < K; ++k)
        ASSERT_LE(std::fabs(w64[size_t(k)] - w32[size_t(k)]), 3 * test::eps_of<float>() * parts[size_t(k)])
            << wtype_name(t) << " row " << n << " element " << k;
    }
  }
}

TEST(Matmul, BadArgumentsNameThemselves) {
  std::vector<uint8_t> wb(4096);
  std::vector<float> x(64), y(64);
  const WeightView q{wb.data(), WType::q4_1, 2, 48, 60};
  EXPECT_THROW(matmul(x.data(), 48, q, y.data(), 2, 1), InvalidArgument);  // K % 32
  const WeightView f{wb.data(), WType::f32, 2, 16, 64};
  EXPECT_THROW(matmul(x.data(), 8, f, y.data(), 2, 1), InvalidArgument);   // ldx < K
  EXPECT_THROW(matmul(x.data(), 16, f, y.data(), 1, 1), InvalidArgument);  // ldy < N
  EXPECT_THROW(matmul(x.data(), 16, f, y.data(), 2, -1), InvalidArgument);
  EXPECT_THROW(matmul(nullptr, 16, f, y.data(), 2, 1), InvalidArgument);
  const WeightView small{wb.data(), WType::f32, 2, 16, 64};
  EXPECT_NO_THROW(matmul(x.data(), 16, small, y.data(), 2, 1));
  try {
    matmul(x.data(), 16, WeightView{wb.data(), WType::f16, 2, 16, 8}, y.data(), 2, 1);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("row_bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_wtype("q7_0"), InvalidArgument);
  EXPECT_EQ(parse_wtype("q5_0"), WType::q5_0);
  EXPECT_EQ(parse_wtype("q6_k"), WType::q6_k);
  // y written over x or W (still being read): named; y right after x: fine.
  for (auto [yp, what] :
       {std::pair<float*, const char*>{x.data() + 8, "must not overlap x"},
        std::pair<float*, const char*>{reinterpret_cast<float*>(wb.data()) + 20, "must not overlap w.data"}})
    try {
      matmul(x.data(), 16, small, yp, 2, 1);
      ADD_FAILURE() << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  EXPECT_NO_THROW(matmul(x.data(), 16, small, x.data() + 16, 2, 1));
}

// dequantize_row and its double form check W as matmul does: a row_bytes too
// small for the row (an over-read past the buffer), K not a multiple of 32 for
// a block type (out[32..] never written), null data, and out over W.
TEST(Matmul, DequantizeRowChecksTheWeight) {
  std::vector<uint8_t> wb(4096);
  std::vector<float> out(64, -7.0f);
  std::vector<double> out64(64, -7.0);
  const auto msg = [](auto&& fn) { return test::invalid_argument_message(fn); };
  const auto expect = [&](const WeightView& w, int64_t n, std::initializer_list<const char*> pieces) {
    const std::string m = msg([&] { dequantize_row(w, n, out.data()); });
    const std::string m64 = msg([&] { dequantize_row_f64(w, n, out64.data()); });
    for (const char* p : pieces) {
      EXPECT_NE(m.find(p), std::string::npos) << m << " lacks " << p;
      EXPECT_NE(m64.find(p), std::string::npos) << m64 << " lacks " << p;
    }
    EXPECT_NE(m.find("dequantize_row:"), std::string::npos) << m;
    EXPECT_NE(m64.find("dequantize_row_f64:"), std::string::npos) << m64;
    EXPECT_EQ(out[0], -7.0f);
    EXPECT_EQ(out64[0], -7.0);
  };
  expect(WeightView{wb.data(), WType::f32, 2, 8, 16}, 1, {"'w.row_bytes' = 16", "must be >= 32"});
  expect(WeightView{wb.data(), WType::q8_0, 1, 40, 68}, 0, {"'w.cols' = 40", "multiple of 32"});
  expect(WeightView{nullptr, WType::f32, 1, 8, 32}, 0, {"'w.data'", "must not be null"});
  expect(WeightView{wb.data(), WType::f32, 1, -8, 32}, 0, {"'w.rows/cols'", "1x-8"});
  expect(WeightView{wb.data(), WType::f32, 2, 8, 32}, 2, {"'n' = 2", "[0, 2)"});
  EXPECT_NE(msg([&] {
              dequantize_row_f64(WeightView{wb.data(), WType::f32, 2, 8, 32}, 0, nullptr);
            }).find("'out'"),
            std::string::npos);
  // out over any row of W (the one read, or one a later call reads) would change the weights.
  float* in_w = reinterpret_cast<float*>(wb.data()) + 12;
  EXPECT_NE(msg([&] {
              dequantize_row(WeightView{wb.data(), WType::f32, 2, 8, 32}, 0, in_w);
            }).find("must not overlap w.data"),
            std::string::npos);
  EXPECT_NO_THROW(dequantize_row(WeightView{wb.data(), WType::f32, 2, 8, 32}, 1, in_w + 4));  // right after W
}

}  // namespace
