// CUDA paths of the paged cache against the oracle: the append-and-quantize
// kernel bitwise equal to the host quantizer (every type, head_dim 80's
// partial group, the slots of two sequences), and paged decode for every storage type,
// MHA/GQA/MQA (incl. > 8 query heads per kv head: several CTAs per head),
// every head_dim, and the launch configurations a launcher can pick (one CTA
// per (seq, head), split-K with the merge kernel, the automatic choice).
// With k_rotate (K stored Hadamard-rotated): the device rotation of K on
// append is bitwise the host's, decode rotates q on the device (the caller's
// q unchanged) and matches the oracle over the rotated rows.
// Suites *CudaSanitize* run small shapes under compute-sanitizer.
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstring>

#include "tests/attention/attn_fixture.hpp"

using namespace llmk;
using test::DeviceGuarded;
using test::Filled;

namespace {
template <class T>
struct Dev {  // a plain device copy of a host vector
  T* p = nullptr;
  explicit Dev(const std::vector<T>& h) {
    cudaMalloc(&p, std::max<size_t>(1, h.size()) * sizeof(T));
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  Dev(const void* h, size_t bytes) {
    cudaMalloc(&p, bytes);
    cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
};

struct Shape {
  int64_t Hq, Hkv, D;
};

// Decode on the device over a copy of the fixture's host cache, against the
// oracle over the dequantized rows (float accumulation; 1e-5 abs + rel as on the CPU).
// rotate: the cache holds H k (k_rotate); the oracle gets H q and the dequantized H k.
// shape_k: edits the K rows before they are cached (make_filled); q0: when not
// NaN, element 0 of every query row. window > 0: AttentionOptions::window, with
// every K and V row before a sequence's window NaN (a read of one, even times
// a weight of 0, makes its rows NaN).
void check_decode(const Shape& s, KvType kt, KvType vt, const std::vector<int64_t>& lens, int bt, bool rotate = false,
                  const std::function<void(std::vector<float>&)>& shape_k = {}, float q0 = NAN, int64_t window = 0) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = s.Hkv, cfg.head_dim = s.D, cfg.k_type = kt, cfg.v_type = vt, cfg.block_tokens = bt;
  cfg.k_rotate = rotate;
  const auto poison = [&](std::vector<float>& x) {
    int64_t r0 = 0;
    for (int64_t len : lens) {
      const int64_t cut = window ? std::max<int64_t>(0, len - window) : 0;
      std::fill(x.begin() + r0 * s.Hkv * s.D, x.begin() + (r0 + cut) * s.Hkv * s.D, NAN);
      r0 += len;
    }
  };
  const auto shape_k2 = [&](std::vector<float>& x) {
    if (shape_k) shape_k(x);
    poison(x);
  };
  const Filled f = test::make_filled(cfg, lens, uint64_t(s.D + s.Hq), shape_k2, poison);
  const KvLayerView hv = f.cache->layer(0);
  const size_t kb = size_t(hv.num_blocks * s.Hkv * bt * kv_row_bytes(kt, s.D));
  const size_t vb = size_t(hv.num_blocks * s.Hkv * bt * kv_row_bytes(vt, s.D));
  Dev<uint8_t> dk(hv.k, kb), dv(hv.v, vb);
  Dev<int64_t> ip(f.pages.indptr);
  Dev<int32_t> ix(f.pages.indices), ll(f.pages.last_len);
  KvLayerView dvw = hv;
  dvw.k = dk.p, dvw.v = dv.p, dvw.device = Device::cuda;
  PageTableView pv{ip.p, ix.p, ll.p, int64_t(lens.size()), Device::cuda};
  const int64_t B = int64_t(lens.size()), n = B * s.Hq * s.D;
  std::vector<float> q(static_cast<size_t>(n));
  test::fill_normal(q.data(), q.size(), 3);
  if (!std::isnan(q0))
    for (int64_t r = 0; r < B * s.Hq; ++r) q[size_t(r * s.D)] = q0;
  Dev<float> dq(q);
  std::vector<int64_t> qo(static_cast<size_t>(B + 1));
  for (int64_t b = 0; b <= B; ++b) qo[size_t(b)] = b;
  std::vector<double> want(static_cast<size_t>(n));
  const double scale = 1 / std::sqrt(double(s.D));
  std::vector<float> qr = q, kq = f.kq;
  if (rotate) {
    std::vector<float> kr = f.k;
    const int64_t blk = kv_rotation_block(s.D);
    hadamard_transform(kr.data(), int64_t(kr.size()) / s.D, s.D, blk);
    test::dequantized(kt, kr.data(), int64_t(kr.size()) / s.D, s.D, kq.data());
    hadamard_transform(qr.data(), B * s.Hq, s.D, blk);
  }
  attention_reference(qr.data(), qo.data(), kq.data(), f.vq.data(), f.kv_indptr.data(), B, s.Hq, s.Hkv, s.D, scale,
                      want.data(), window);
  const int64_t max_len = *std::max_element(lens.begin(), lens.end());
  // every kernel that can run this cache (the automatic one, and token_tiles
  // and lane_per_element too where that is token_tiles_mma), each with splits
  // 1, 2, 7 and the automatic count, from the longest context or (max_kv_len
  // 0) from the 32768 the launcher then assumes
  std::vector<DecodeCudaKernel> kernels{DecodeCudaKernel::automatic};
  if (decode_cuda_kernel_pick(dvw) == DecodeCudaKernel::token_tiles_mma)
    kernels.insert(kernels.end(), {DecodeCudaKernel::token_tiles, DecodeCudaKernel::lane_per_element});
  for (DecodeCudaKernel kernel : kernels)
    for (int run = 0; run < 5; ++run) {
      const int splits = run < 3 ? std::array{1, 2, 7}[size_t(run)] : 0;
      DeviceGuarded<float> out(static_cast<size_t>(n));
      cudaMemset(out.data(), 0xFF, size_t(n) * sizeof(float));  // NaN: an element decode does not write fails
      AttentionOptions opt;
      opt.splits = splits;
      opt.max_kv_len = run == 4 ? 0 : max_len;
      opt.cuda_decode = kernel;
      opt.window = window;
      attention_decode(dq.p, dvw, pv, s.Hq, float(scale), out.data(), opt);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_TRUE(out.guard_intact());
      const auto got = out.download();
      const DecodeCudaKernel ran = kernel == DecodeCudaKernel::automatic ? decode_cuda_kernel_pick(dvw) : kernel;
      ASSERT_TRUE(test::all_close(got.data(), want.data(), size_t(n), 1e-5, 1e-5,
                                  std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) + " D=" + std::to_string(s.D) +
                                      " Hq=" + std::to_string(s.Hq) + " bt=" + std::to_string(bt) + " splits=" +
                                      std::to_string(splits) + " max_kv_len=" + std::to_string(opt.max_kv_len) + " " +
                                      decode_cuda_kernel_name(ran) + (rotate ? " rotated" : "") +
                                      " window=" + std::to_string(window)));
    }
  std::vector<float> q_after(q.size());
  cudaMemcpy(q_after.data(), dq.p, q.size() * sizeof(float), cudaMemcpyDeviceToHost);
  ASSERT_EQ(0, std::memcmp(q_after.data(), q.data(), q.size() * sizeof(float))) << "decode wrote the caller's q";
}
}  // namespace

TEST(AttentionCuda, DecodeEveryTypeShapeAndSplit) {
  LLMK_REQUIRE_CUDA();
  const Shape shapes[] = {{9, 3, 64}, {8, 8, 80}, {32, 1, 96}, {32, 8, 128}, {4, 2, 256}};
  const std::pair<KvType, KvType> types[] = {{KvType::f32, KvType::f32},   {KvType::f16, KvType::f16},
                                             {KvType::bf16, KvType::bf16}, {KvType::int8, KvType::int8},
                                             {KvType::int4, KvType::int4}, {KvType::int8, KvType::int4},
                                             {KvType::int8, KvType::f16},  {KvType::bf16, KvType::int4}};
  // emulated: the contexts straddling 1024 only
  const std::vector<int64_t> lens = test::kCudaEmulated ? std::vector<int64_t>{1, 1025}
                                                        : std::vector<int64_t>{1, 17, 1023, 1025, 3000};
  for (const Shape& s : shapes)
    for (auto [kt, vt] : types) check_decode(s, kt, vt, lens, 16);
}

// The register layouts a lane's share of the head only partly fills (D = 16
// and 48: 2 elements a lane; 112: 4; 160 and 192: 8; for token_tiles, int8 and
// int4 K = V, a last 32-group half full at 16, 48 and 112), a CTA of 8 query heads
// holding 7 (14 / 2: Qwen2.5-7B's group), blocks of 1, 5 and 7
// tokens (tiles that end inside a warp's keys), and an empty sequence (NaN
// rows, llmk/attention.hpp) between two others, with and without splits.
TEST(AttentionCuda, DecodePartialLanesOddBlocksAndEmptySequence) {
  LLMK_REQUIRE_CUDA();
  for (const Shape& s :
       {Shape{4, 2, 16}, Shape{6, 3, 48}, Shape{8, 2, 112}, Shape{4, 1, 160}, Shape{2, 2, 192}, Shape{14, 2, 64}})
    for (auto [kt, vt] : {std::pair{KvType::f32, KvType::f32}, std::pair{KvType::int8, KvType::int4},
                          std::pair{KvType::int8, KvType::int8}, std::pair{KvType::int4, KvType::int4}})
      check_decode(s, kt, vt, {1, 17, 300}, 16);
  for (int bt : {1, 5, 7})
    for (auto [kt, vt] : {std::pair{KvType::f16, KvType::f16}, std::pair{KvType::int4, KvType::int8}})
      check_decode({8, 2, 64}, kt, vt, {1, 6, 41, 130}, bt);
  // sequence 1 empty: its rows are NaN, the others as a batch without it
  KvCacheConfig cfg;
  cfg.n_kv_heads = 2, cfg.head_dim = 64;
  const Filled f = test::make_filled(cfg, {9, 30}, 21);
  PageTable pt;
  pt.indptr = {0, f.pages.indptr[1], f.pages.indptr[1], f.pages.indptr[2]};
  pt.indices = f.pages.indices;
  pt.last_len = {f.pages.last_len[0], 0, f.pages.last_len[1]};
  const KvLayerView hv = f.cache->layer(0);
  const size_t kb = size_t(hv.num_blocks * 2 * 16 * kv_row_bytes(hv.k_type, 64));
  Dev<uint8_t> dk(hv.k, kb), dv(hv.v, kb);
  Dev<int64_t> ip(pt.indptr), ip2(f.pages.indptr);
  Dev<int32_t> ix(pt.indices), ll(pt.last_len), ll2(f.pages.last_len);
  KvLayerView dvw = hv;
  dvw.k = dk.p, dvw.v = dv.p, dvw.device = Device::cuda;
  std::vector<float> q(3 * 4 * 64), q2(2 * 4 * 64);
  test::fill_normal(q.data(), q.size(), 4);
  std::copy(q.begin(), q.begin() + 256, q2.begin());
  std::copy(q.begin() + 512, q.end(), q2.begin() + 256);
  Dev<float> dq(q), dq2(q2);
  for (int splits : {1, 3}) {
    AttentionOptions opt;
    opt.splits = splits, opt.max_kv_len = 30;
    DeviceGuarded<float> out(q.size()), out2(q2.size());
    attention_decode(dq.p, dvw, {ip.p, ix.p, ll.p, 3, Device::cuda}, 4, 0.125f, out.data(), opt);
    attention_decode(dq2.p, dvw, {ip2.p, ix.p, ll2.p, 2, Device::cuda}, 4, 0.125f, out2.data(), opt);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE(out.guard_intact() && out2.guard_intact());
    const auto a = out.download(), b = out2.download();
    for (size_t i = 0; i < 256; ++i) {
      EXPECT_EQ(a[i], b[i]) << "seq 0, " << i << " splits " << splits;
      EXPECT_TRUE(std::isnan(a[256 + i])) << "empty seq, " << i << " splits " << splits;
      EXPECT_EQ(a[512 + i], b[256 + i]) << "seq 2, " << i << " splits " << splits;
    }
  }
}

// token_tiles copies a tile's K rows by whole runs of a block: blocks of 1,
// 2, 4, 8 (several runs a tile) and 32, 64 (a tile inside one block) tokens,
// tiles that end inside a run (lengths 1, 33, 70, 200), head_dim 128 and the
// partial groups of 80 (int4: 60-byte rows) and 16; and where a block's bytes
// are not a multiple of 16 (int8 at head_dim 128: 136-byte rows, block 1) the
// launcher falls back to lane_per_element.
TEST(AttentionCuda, DecodeTokenTilesEveryRunShape) {
  LLMK_REQUIRE_CUDA();
  for (int bt : {1, 2, 4, 8, 32, 64})
    for (KvType t : {KvType::int8, KvType::int4})
      for (const Shape& s : {Shape{8, 2, 128}, Shape{6, 3, 80}, Shape{2, 1, 16}}) {
        if (t == KvType::int8 && s.D == 128 && bt == 1) EXPECT_NE(bt * kv_row_bytes(t, s.D) % 16, 0);  // the fallback
        check_decode(s, t, t, {1, 33, 70, 200}, bt);
      }
}

// What token_tiles and token_tiles_mma need (llmk/attention.hpp), and a
// forced kernel that does not fit is an error naming opt.cuda_decode, not a
// wrong launch.
TEST(AttentionCuda, TokenTilesFitAndForcedMisfitIsAnError) {
  LLMK_REQUIRE_CUDA();
  alignas(16) static uint8_t pool[4096];
  KvLayerView kv{pool, pool, KvType::int8, KvType::int8, 4, 16, 2, 128, Device::cuda};
  EXPECT_TRUE(decode_cuda_token_tiles_fit(kv));
  EXPECT_EQ(decode_cuda_kernel_pick(kv), DecodeCudaKernel::token_tiles_mma);
  KvLayerView q4 = kv;  // an int4 V needs 4-byte alignment (32-bit loads), not 16
  q4.k_type = q4.v_type = KvType::int4;
  q4.v = pool + 4;
  EXPECT_TRUE(decode_cuda_token_tiles_fit(q4));
  const auto misfit = [&](const char* what, auto edit) {
    KvLayerView m = kv;
    edit(m);
    EXPECT_FALSE(decode_cuda_token_tiles_fit(m)) << what;
    EXPECT_EQ(decode_cuda_kernel_pick(m), DecodeCudaKernel::lane_per_element) << what;
    for (DecodeCudaKernel forced : {DecodeCudaKernel::token_tiles, DecodeCudaKernel::token_tiles_mma}) {
      AttentionOptions opt;
      opt.cuda_decode = forced;
      float q[1], out[1];
      int64_t ip[2] = {0, 1};
      int32_t ix[1] = {0}, ll[1] = {1};
      try {
        attention_decode(q, m, {ip, ix, ll, 1, Device::cuda}, 4, 0.1f, out, opt);
        ADD_FAILURE() << what << ": forced " << decode_cuda_kernel_name(forced) << " accepted";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("opt.cuda_decode"), std::string::npos) << what << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(decode_cuda_kernel_name(forced)), std::string::npos) << e.what();
      }
    }
  };
  misfit("f16", [](KvLayerView& m) { m.k_type = m.v_type = KvType::f16; });
  misfit("int8 K, int4 V", [](KvLayerView& m) { m.v_type = KvType::int4; });
  misfit("K pool 2 bytes past 16", [](KvLayerView& m) { m.k = pool + 2; });
  misfit("int4 V pool 2 bytes past 16", [](KvLayerView& m) {
    m.k_type = m.v_type = KvType::int4;
    m.v = pool + 2;
  });
  misfit("block of 5", [](KvLayerView& m) { m.block_tokens = 5; });
  misfit("block of 48", [](KvLayerView& m) { m.block_tokens = 48; });
  misfit("136-byte rows, block of 1", [](KvLayerView& m) { m.block_tokens = 1; });
  AttentionOptions bad;
  bad.cuda_decode = DecodeCudaKernel(7);
  float q[1], out[1];
  int64_t ip[2] = {0, 1};
  int32_t ix[1] = {0}, ll[1] = {1};
  try {
    attention_decode(q, kv, {ip, ix, ll, 1, Device::cuda}, 4, 0.1f, out, bad);
    ADD_FAILURE() << "cuda_decode 7 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("opt.cuda_decode"), std::string::npos) << e.what();
  }
}

// As Attention.KeysScoredMinusInfinityGetWeightZero on the CPU: keys whose
// score is -inf (an -inf in K element 0, query element 0 = 1) get weight 0,
// also when they fill the first runs of every warp (positions 0-39 of
// sequence 0) or a whole split; sequence 1 sees only such keys: NaN, as the
// reference. The softmax step once computed expf(-inf - -inf) = NaN there.
TEST(AttentionCuda, KeysScoredMinusInfinityGetWeightZero) {
  LLMK_REQUIRE_CUDA();
  const auto minus_inf = [](std::vector<float>& k) {
    for (int64_t j = 0; j < 137; ++j)
      if (j < 40 || j >= 100)
        for (int64_t h = 0; h < 2; ++h) k[size_t((j * 2 + h) * 64)] = -INFINITY;
  };
  for (KvType kt : {KvType::f32, KvType::f16, KvType::bf16})
    check_decode({4, 2, 64}, kt, KvType::f32, {100, 37}, 16, false, minus_inf, 1.0f);
}

// Rotation blocks of 16 and 32 at 8 elements a lane (D = 144 .. 240), where
// the butterfly's stages stay inside a lane's registers.
TEST(AttentionCuda, DecodeRotatedKNarrowBlocksOfWideHeads) {
  LLMK_REQUIRE_CUDA();
  for (int64_t D : {144, 160, 176, 208, 224, 240})
    check_decode({4, 2, D}, KvType::int4, KvType::int8, {17, 130}, 16, true);
}

TEST(AttentionCuda, DecodeRotatedKEveryHeadDim) {
  LLMK_REQUIRE_CUDA();
  const Shape shapes[] = {{9, 3, 64}, {8, 8, 80}, {32, 1, 96}, {32, 8, 128}, {4, 2, 256}};
  for (const Shape& s : shapes)
    for (KvType t : {KvType::f32, KvType::int8, KvType::int4})
      check_decode(s, t, t, test::kCudaEmulated ? std::vector<int64_t>{17, 1025} : std::vector<int64_t>{1, 17, 1025},
                   16, true);
}

// A sliding window (AttentionOptions::window) on every kernel: windows that
// start inside a 32-token tile, at its start, inside a block of 1..16 tokens;
// the positions before each window are NaN in K and V (check_decode).
TEST(AttentionCuda, DecodeWindowEveryKernelAndSplit) {
  LLMK_REQUIRE_CUDA();
  const std::vector<int64_t> lens = {1, 20, 33, 100, 300};
  // emulated: two windows and two block sizes
  const std::vector<int64_t> windows = test::kCudaEmulated ? std::vector<int64_t>{17, 45}
                                                           : std::vector<int64_t>{1, 17, 32, 45};
  const std::vector<int> bts = test::kCudaEmulated ? std::vector<int>{5, 16} : std::vector<int>{1, 5, 8, 16};
  for (int64_t W : windows)
    for (int bt : bts)
      for (auto [kt, vt] : {std::pair{KvType::f32, KvType::f32}, std::pair{KvType::int8, KvType::int8},
                            std::pair{KvType::int4, KvType::int4}, std::pair{KvType::f16, KvType::int8}})
        check_decode(Shape{8, 2, 64}, kt, vt, lens, bt, false, {}, NAN, W);
}

TEST(AttentionCudaSanitize, DecodeSmall) {
  LLMK_REQUIRE_CUDA();
  check_decode({4, 2, 64}, KvType::int8, KvType::int8, {3, 45}, 16, false, {}, NAN, 20);  // a window
  LLMK_REQUIRE_CUDA();
  check_decode({4, 2, 64}, KvType::f32, KvType::f32, {1, 5, 40}, 16);
  check_decode({12, 1, 80}, KvType::int4, KvType::int8, {3, 33}, 8);
  check_decode({4, 2, 128}, KvType::int4, KvType::int4, {3, 33}, 16, true);
  check_decode({8, 2, 64}, KvType::int8, KvType::int8, {3, 45}, 8);  // the token tiles, runs of 8
}

// token_tiles_mma splits each query into two f16 parts after scaling a head
// by 2^s (max |q 2^s| in [2^14, 2^15)): with a query element of 30, 1e-3
// or 0 (q element 0; the others ~N(0, 1)) the scores stay within the tests'
// 1e-5; with q's f16 high part alone they do not. (At 300 the token tiles'
// int4 scores, d sum(q n) + m sum(q), round beyond 1e-5 on the CUDA cores
// too: the two sums are several times the score.)
TEST(AttentionCuda, DecodeTokenTilesMmaQueryRange) {
  LLMK_REQUIRE_CUDA();
  for (float q0 : {30.0f, 1e-3f, 0.0f})
    for (KvType t : {KvType::int8, KvType::int4}) check_decode({8, 2, 128}, t, t, {5, 70}, 16, false, {}, q0);
}

namespace {
// kv_append_cuda of T tokens (k, v [T, Hkv * D], slots [T] as given) into
// zeroed device copies of hv's pools: both pools must equal the host's bytes,
// no write may pass their ends, and the caller's k must come back unchanged.
void expect_device_append_equals_host(const KvLayerView& hv, const std::vector<float>& k, const std::vector<float>& v,
                                      const std::vector<int64_t>& slots, const std::string& what) {
  const int64_t rows = hv.num_blocks * hv.n_kv_heads * hv.block_tokens;
  const size_t kb = size_t(rows * kv_row_bytes(hv.k_type, hv.head_dim));
  const size_t vb = size_t(rows * kv_row_bytes(hv.v_type, hv.head_dim));
  DeviceGuarded<uint8_t> dk(kb), dv(vb);
  cudaMemset(dk.data(), 0, kb);
  cudaMemset(dv.data(), 0, vb);
  Dev<float> dkx(k), dvx(v);
  Dev<int64_t> ds(slots);
  KvLayerView dl = hv;
  dl.k = dk.data(), dl.v = dv.data(), dl.device = Device::cuda;
  kv_append_cuda(dl, dkx.p, dvx.p, ds.p, int64_t(slots.size()));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  ASSERT_TRUE(dk.guard_intact() && dv.guard_intact()) << what;
  const auto gk = dk.download(), gv = dv.download();
  EXPECT_EQ(0, std::memcmp(gk.data(), hv.k, kb)) << "K " << what;
  EXPECT_EQ(0, std::memcmp(gv.data(), hv.v, vb)) << "V " << what;
  std::vector<float> k_after(k.size());
  cudaMemcpy(k_after.data(), dkx.p, k.size() * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(0, std::memcmp(k_after.data(), k.data(), k.size() * sizeof(float)))
      << "append wrote the caller's k: " << what;
}

// rotate: k_rotate on both caches; the device rotates K before quantizing
// (hadamard_rows_kernel), bitwise like the host's hadamard_transform.
void check_append(KvType kt, KvType vt, int64_t D, bool rotate = false) {
  KvCacheConfig cfg;
  cfg.n_kv_heads = 3, cfg.head_dim = D, cfg.k_type = kt, cfg.v_type = vt, cfg.block_tokens = 16;
  cfg.k_rotate = rotate;
  cfg.budget_bytes = 8 * kv_block_bytes(cfg);
  KvCache host(cfg);
  const int64_t a = host.add_sequence(), b = host.add_sequence();
  std::vector<int64_t> slots;
  host.append(a, std::vector<int32_t>(20, 1), &slots);
  host.append(b, std::vector<int32_t>(30, 2), &slots);  // 50 tokens over scattered blocks
  const int64_t T = int64_t(slots.size());
  std::vector<float> k(static_cast<size_t>(T * 3 * D)), v(k.size());
  test::fill_normal(k.data(), k.size(), 1, 0.2, 2.0);
  test::fill_normal(v.data(), v.size(), 2, -0.5, 1.0);
  k[7] = 300.0f;  // an outlier
  // signed zeros: a group whose min is a zero of either sign, and an all-zero
  // group (int4 stores +0 for a zero min / scale, whichever zero a reduction keeps)
  v[0] = 0.0f, v[1] = -0.0f;
  for (int64_t j = 0; j < 32; ++j)
    v[size_t(3 * D + j)] = j % 2 ? 0.0f : -0.0f, k[size_t(3 * D + j)] = j % 3 ? -0.0f : 0.0f;
  host.write(0, slots, k.data(), v.data());
  expect_device_append_equals_host(host.layer(0), k, v, slots,
                                   std::string(kv_type_name(kt)) + "/" + kv_type_name(vt) + " D=" + std::to_string(D) +
                                       " rotate " + std::to_string(rotate));
}
}  // namespace

TEST(AttentionCuda, AppendQuantizesLikeTheHost) {
  LLMK_REQUIRE_CUDA();
  for (KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4})
    for (int64_t D : {64, 80, 128}) check_append(t, t == KvType::int4 ? KvType::int8 : t, D);
}

TEST(AttentionCuda, AppendRotatedKLikeTheHost) {
  LLMK_REQUIRE_CUDA();
  for (KvType t : {KvType::f32, KvType::int8, KvType::int4})
    for (int64_t D : {16, 48, 64, 80, 96, 128, 192, 256}) check_append(t, KvType::f16, D, true);
}

// Head dims above 128 whose rotation blocks are 16 or 32 wide (8 elements a
// lane: 144 .. 240), and f16 / bf16 at D = 256 without rotation.
TEST(AttentionCuda, AppendWideHeadsAndNarrowRotationBlocks) {
  LLMK_REQUIRE_CUDA();
  for (int64_t D : {144, 160, 176, 208, 224, 240}) check_append(KvType::int8, KvType::int4, D, true);
  for (KvType t : {KvType::f16, KvType::bf16}) check_append(t, t, 256);
}

// Slots of -1 (padding) and past the pool are skipped: the pools equal the
// host's after writing only the other tokens. A group holding NaN or inf
// stores the NaN convention of the host (int8/int4: NaN scale, quants 0), and
// f16 values past its range round as the host rounds them.
TEST(AttentionCuda, AppendSkipsPaddingSlotsAndStoresSpecialsAsTheHost) {
  LLMK_REQUIRE_CUDA();
  for (KvType t : {KvType::f16, KvType::bf16, KvType::int8, KvType::int4}) {
    KvCacheConfig cfg;
    cfg.n_kv_heads = 2, cfg.head_dim = 64, cfg.k_type = cfg.v_type = t, cfg.block_tokens = 16;
    cfg.budget_bytes = 4 * kv_block_bytes(cfg);
    KvCache host(cfg);
    const int64_t a = host.add_sequence();
    std::vector<int64_t> slots;
    host.append(a, std::vector<int32_t>(12, 1), &slots);
    const int64_t T = 12, W = 2 * 64;
    std::vector<float> k(size_t(T * W)), v(k.size());
    test::fill_normal(k.data(), k.size(), 7);
    test::fill_normal(v.data(), v.size(), 8);
    k[size_t(2 * W + 3)] = NAN, v[size_t(4 * W + 70)] = INFINITY, k[size_t(6 * W + 1)] = 70000.0f;  // f16 overflow
    std::vector<int64_t> dev_slots = slots;
    dev_slots[3] = -1, dev_slots[5] = host.layer(0).num_blocks * 16;  // padding, past the pool
    std::vector<int64_t> keep;
    std::vector<float> hk, hv;
    for (int64_t i = 0; i < T; ++i)
      if (i != 3 && i != 5) {
        keep.push_back(slots[size_t(i)]);
        hk.insert(hk.end(), k.begin() + i * W, k.begin() + (i + 1) * W);
        hv.insert(hv.end(), v.begin() + i * W, v.begin() + (i + 1) * W);
      }
    host.write(0, keep, hk.data(), hv.data());
    expect_device_append_equals_host(host.layer(0), k, v, dev_slots, kv_type_name(t));
  }
}

TEST(AttentionCudaSanitize, AppendSmall) {
  LLMK_REQUIRE_CUDA();
  check_append(KvType::int4, KvType::int8, 80);
  check_append(KvType::int4, KvType::int8, 128, true);
}
