// The Hadamard rotation of K (llmk/kv_quant.hpp): the double oracle is
// orthogonal, symmetric and its own inverse; the fast transform on every SIMD
// path matches it within the derived f32 rounding bound, is bitwise the same
// on every path, for each block size up to 1024 (rows straddling 1023/1024/1025
// are rejected with named errors), and writes nothing outside its rows; a
// KvCache with k_rotate stores exactly the rotated rows.
#include <cmath>
#include <cstring>
#include <vector>

#include "llmk/kv_cache.hpp"
#include "llmk/kv_quant.hpp"
#include "tests/common/testutil.hpp"
#include "tests/kv/hadamard_bound.hpp"

using namespace llmk;

TEST(Hadamard, ReferenceIsSymmetricOrthogonalAndAnInvolution) {
  for (int64_t b = 1; b <= 256; b *= 2) {
    // column j of the matrix = the transform of e_j
    std::vector<double> e(size_t(b * b), 0.0), m(size_t(b * b));
    for (int64_t j = 0; j < b; ++j) e[size_t(j * b + j)] = 1;
    hadamard_transform_reference(e.data(), m.data(), b, b, b);  // row j of m = M e_j = column j
    const double c = 1 / std::sqrt(double(b));
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j) {
        ASSERT_EQ(m[size_t(i * b + j)], m[size_t(j * b + i)]) << "symmetric, b=" << b;
        ASSERT_EQ(std::fabs(m[size_t(i * b + j)]), c) << "entries +-1/sqrt(b), b=" << b;
      }
    std::vector<double> mm(m.size());
    hadamard_transform_reference(m.data(), mm.data(), b, b, b);  // M M e_j
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j)  // sums of b terms of size 1/b in double: error < b * 2^-52
        ASSERT_NEAR(mm[size_t(i * b + j)], i == j ? 1.0 : 0.0, 1e-13) << "M M = I, b=" << b;
  }
}

TEST(Hadamard, FastMatchesReferenceOnEveryPathAndIsBitwiseTheSame) {
  struct Case {
    int64_t dim, block;
  };
  std::vector<Case> cases;
  for (int64_t b = 1; b <= 1024; b *= 2) cases.push_back({b, b}), cases.push_back({3 * b, b});
  for (int64_t d = 16; d <= 256; d += 16) cases.push_back({d, kv_rotation_block(d)});
  cases.push_back({24, 8});  // a row that is not a multiple of the AVX width: scalar path
  const int64_t rows = 3;
  for (const Case& cs : cases) {
    const size_t n = size_t(rows * cs.dim);
    std::vector<float> x(n);
    test::fill_normal(x.data(), n, uint64_t(cs.dim * 7 + cs.block));
    x[0] = 40.0f;  // an outlier channel
    std::vector<double> xd(x.begin(), x.end()), want(n);
    hadamard_transform_reference(xd.data(), want.data(), rows, cs.dim, cs.block);
    std::vector<float> first;
    for (SimdLevel lvl : test::simd_levels()) {
      ScopedSimdLimit lim(lvl);
      test::Guarded<float> g(n, 4);  // misaligned by 4 bytes
      std::copy(x.begin(), x.end(), g.data());
      hadamard_transform(g.data(), rows, cs.dim, cs.block);
      ASSERT_TRUE(g.guard_intact()) << simd_name(lvl) << " dim=" << cs.dim;
      for (size_t i = 0; i < n; ++i) {
        const size_t b0 = i / size_t(cs.block) * size_t(cs.block);
        double l1 = 0;
        for (size_t j = b0; j < b0 + size_t(cs.block); ++j) l1 += std::fabs(double(x[j]));
        ASSERT_LE(std::fabs(double(g[i]) - want[i]), test::hadamard_error_bound(l1, cs.block))
            << simd_name(lvl) << " dim=" << cs.dim << " block=" << cs.block << " i=" << i;
      }
      if (first.empty()) first.assign(g.data(), g.data() + n);
      ASSERT_EQ(0, std::memcmp(first.data(), g.data(), n * 4))
          << simd_name(lvl) << " differs from the scalar path, dim=" << cs.dim << " block=" << cs.block;
      // applying it twice gives x back within twice the bound (orthogonal: norms are kept)
      hadamard_transform(g.data(), rows, cs.dim, cs.block);
      for (size_t i = 0; i < n; ++i) {
        const size_t b0 = i / size_t(cs.block) * size_t(cs.block);
        double l1 = 0;  // sum |Hx| over the block <= sqrt(b) ||x||_2 <= sqrt(b) sum |x|
        for (size_t j = b0; j < b0 + size_t(cs.block); ++j) l1 += std::fabs(double(x[j]));
        const double bound = 2.01 * std::sqrt(double(cs.block)) * test::hadamard_error_bound(l1, cs.block);
        ASSERT_LE(std::fabs(double(g[i]) - double(x[i])), bound)
            << "involution " << simd_name(lvl) << " dim=" << cs.dim;
      }
    }
  }
}

TEST(Hadamard, BadSizesAreNamed) {
  std::vector<float> x(4096);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), 1, 1023, 1023); }).find("'block' = 1023"),
            std::string::npos);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), 1, 1025, 1025); }).find("'block' = 1025"),
            std::string::npos);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), 1, 1023, 1024); }).find("'dim' = 1023"),
            std::string::npos);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), 1, 1025, 1024); }).find("'dim' = 1025"),
            std::string::npos);
  EXPECT_NO_THROW(hadamard_transform(x.data(), 4, 1024, 1024));
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), 1, 1 << 17, 1 << 17); }).find("'block'"),
            std::string::npos);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), 1, 64, 0); }).find("'block' = 0"),
            std::string::npos);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(x.data(), -1, 64, 64); }).find("'rows' = -1"),
            std::string::npos);
  EXPECT_NE(test::invalid_argument_message([&] { hadamard_transform(nullptr, 1, 64, 64); }).find("'x'"),
            std::string::npos);
  std::vector<double> xd(64), yd(64);
  EXPECT_NE(test::invalid_argument_message([&] {
              hadamard_transform_reference(xd.data(), yd.data(), 1, 48, 32);
            }).find("'dim' = 48"),
            std::string::npos);
  // the cache's block: the largest power of two dividing head_dim
  EXPECT_EQ(kv_rotation_block(64), 64);
  EXPECT_EQ(kv_rotation_block(80), 16);
  EXPECT_EQ(kv_rotation_block(96), 32);
  EXPECT_EQ(kv_rotation_block(128), 128);
  EXPECT_EQ(kv_rotation_block(256), 256);
  EXPECT_EQ(kv_rotation_block(48), 16);
  for (int64_t d : {0, 8, 72, 255, 257, 272})
    EXPECT_NE(test::invalid_argument_message([&] { kv_rotation_block(d); }).find("'head_dim' = " + std::to_string(d)),
              std::string::npos);
}

// An f32 cache with k_rotate holds exactly hadamard_transform(k) (bitwise), V
// as given, and the caller's k is not modified.
TEST(Hadamard, CacheStoresRotatedKRows) {
  for (int64_t D : {64, 80, 96, 128}) {
    KvCacheConfig cfg;
    cfg.n_kv_heads = 3, cfg.head_dim = D, cfg.block_tokens = 4, cfg.k_rotate = true;
    cfg.budget_bytes = 4 * kv_block_bytes(cfg);
    KvCache c(cfg);
    const int64_t s = c.add_sequence();
    std::vector<int64_t> slots;
    ASSERT_EQ(c.append(s, std::vector<int32_t>(6, 1), &slots), KvStatus::ok);
    const size_t n = size_t(6 * 3 * D);
    std::vector<float> k(n), v(n);
    test::fill_normal(k.data(), n, 1);
    test::fill_normal(v.data(), n, 2);
    const std::vector<float> k0 = k;
    c.write(0, slots, k.data(), v.data());
    ASSERT_EQ(0, std::memcmp(k.data(), k0.data(), n * 4)) << "k was modified";
    std::vector<float> rot = k;
    hadamard_transform(rot.data(), 6 * 3, D, kv_rotation_block(D));
    const KvLayerView L = c.layer(0);
    ASSERT_TRUE(L.k_rotated);
    for (int64_t t = 0; t < 6; ++t)
      for (int64_t h = 0; h < 3; ++h) {
        const int64_t row = (slots[size_t(t)] / 4 * 3 + h) * 4 + slots[size_t(t)] % 4;
        const float* kr = static_cast<const float*>(L.k) + row * D;  // [D]
        EXPECT_EQ(0, std::memcmp(kr, rot.data() + (t * 3 + h) * D, size_t(D) * 4));
        EXPECT_EQ(0, std::memcmp(static_cast<const float*>(L.v) + row * D, v.data() + (t * 3 + h) * D, size_t(D) * 4));
      }
  }
}
