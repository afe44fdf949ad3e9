// `llmk bench attention-gpu`: paged decode attention on the GPU, achieved
// GB/s of KV read against the device's own copy bandwidth (the yardstick;
// target >= 80% at long context), per storage type, batch 1 and 32, GQA 9/3x64
// (SmolLM2-135M) and 32/8x128 (Llama-3-8B), contexts 2048..32768, paged
// (16-token blocks in shuffled order) against contiguous (one block per sequence).
// Bytes counted: K and V rows read, B * ctx * Hkv * (k_row + v_row). Pools are
// zero-filled (a valid value for every type; the kernel has no data-dependent
// branches). Cold L2 before every rep (bench/common/gpu.cuh). At context 8192
// the paged decode is also timed at 1, 2, 4, 8 and 16 splits (rows paged_sN),
// and where the launcher picks the token_tiles_mma kernel (int8 / int4), the
// token_tiles and lane_per_element kernels are timed too (rows paged_tt,
// contiguous_tt, paged_lpe, contiguous_lpe).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "bench/common/bench.hpp"
#include "bench/common/gpu.cuh"
#include "llmk/attention.hpp"

namespace llmk::bench {
namespace {
struct Model {
  const char* name;
  int64_t Hq, Hkv, D;
};

int run(const Options& opt) {
  Reporter rep(opt, "attention-gpu",
               "paged decode, one layer; bytes = K and V rows read = B * ctx * Hkv * (k_row + v_row); "
               "device copy = cudaMemcpy D2D counting read + write");
  const double copy = open_gpu_bench(rep, opt, "attention-gpu");
  if (copy == 0) return 0;
  const Model models[] = {{"smollm2-135m", 9, 3, 64}, {"llama3-8b", 32, 8, 128}};
  const std::vector<int64_t> ctxs = opt.quick ? std::vector<int64_t>{2048} : std::vector<int64_t>{2048, 8192, 32768};
  const KvType types[] = {KvType::f32, KvType::f16, KvType::bf16, KvType::int8, KvType::int4};
  for (const Model& m : models)
    for (int64_t B : {1, 32})
      for (int64_t ctx : ctxs)
        for (KvType t : types)
          for (bool paged : {true, false}) {
            const int64_t bt = paged ? 16 : ctx, per_seq = ctx / bt, nblocks = B * per_seq;
            const int64_t rb = kv_row_bytes(t, m.D), pool = nblocks * m.Hkv * bt * rb;
            void *k = nullptr, *v = nullptr;
            LLMK_CUDA_CHECK(cudaMalloc(&k, size_t(pool)));
            LLMK_CUDA_CHECK(cudaMalloc(&v, size_t(pool)));
            LLMK_CUDA_CHECK(cudaMemset(k, 0, size_t(pool)));
            LLMK_CUDA_CHECK(cudaMemset(v, 0, size_t(pool)));
            std::vector<int64_t> indptr;
            std::vector<int32_t> idx(static_cast<size_t>(nblocks)), last(static_cast<size_t>(B), int32_t(bt));
            std::iota(idx.begin(), idx.end(), 0);
            if (paged) std::shuffle(idx.begin(), idx.end(), std::mt19937(7));
            for (int64_t b = 0; b <= B; ++b) indptr.push_back(b * per_seq);
            int64_t* dip;
            int32_t *dix, *dll;
            float *q, *out;
            LLMK_CUDA_CHECK(cudaMalloc(&dip, indptr.size() * 8));
            LLMK_CUDA_CHECK(cudaMalloc(&dix, idx.size() * 4));
            LLMK_CUDA_CHECK(cudaMalloc(&dll, last.size() * 4));
            LLMK_CUDA_CHECK(cudaMalloc(&q, size_t(B * m.Hq * m.D) * 4));
            LLMK_CUDA_CHECK(cudaMalloc(&out, size_t(B * m.Hq * m.D) * 4));
            LLMK_CUDA_CHECK(cudaMemcpy(dip, indptr.data(), indptr.size() * 8, cudaMemcpyHostToDevice));
            LLMK_CUDA_CHECK(cudaMemcpy(dix, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
            LLMK_CUDA_CHECK(cudaMemcpy(dll, last.data(), last.size() * 4, cudaMemcpyHostToDevice));
            LLMK_CUDA_CHECK(cudaMemset(q, 0, size_t(B * m.Hq * m.D) * 4));
            const KvLayerView kv{k, v, t, t, nblocks, bt, m.Hkv, m.D, Device::cuda};
            const PageTableView pv{dip, dix, dll, B, Device::cuda};
            // median ms of the decode with `splits` context splits (0: the automatic count)
            const auto time_ms = [&](int splits, DecodeCudaKernel kernel = DecodeCudaKernel::automatic) {
              AttentionOptions o;
              o.max_kv_len = ctx;
              o.splits = splits;
              o.cuda_decode = kernel;
              return gpu_median_ms(
                  [&](cudaStream_t s) {
                    o.stream = s;
                    attention_decode(q, kv, pv, m.Hq, 0.125f, out, o);
                  },
                  opt.quick ? 3 : 20);
            };
            const double ms = time_ms(0);
            const double bytes = 2.0 * double(B * ctx * m.Hkv * rb);
            Row r{"attention-gpu",    paged ? "paged" : "contiguous",
                  "decode",           std::string(m.name) + " B" + std::to_string(B) + " ctx" + std::to_string(ctx),
                  kv_type_name(t),    ms,
                  bytes / (ms * 1e6), {}};
            r.extra["of_copy"] = std::to_string(bytes / (ms * 1e6) / copy);
            const int chosen = attention_decode_splits(kv, pv, ctx);
            r.extra["splits"] = std::to_string(chosen);
            const DecodeCudaKernel pick = decode_cuda_kernel_pick(kv);
            r.extra["kernel"] = decode_cuda_kernel_name(pick);
            rep.add(r);
            // a row like r for another configuration: its impl, time and one changed column
            const auto add_variant = [&](std::string impl, double vms, const char* key, std::string value) {
              Row vr = r;
              vr.impl = std::move(impl);
              vr.median_ms = vms;
              vr.gbps = bytes / (vms * 1e6);
              vr.extra["of_copy"] = std::to_string(vr.gbps / copy);
              vr.extra[key] = std::move(value);
              rep.add(vr);
            };
            if (ctx == 8192 && pick == DecodeCudaKernel::token_tiles_mma)  // the other kernels, same splits
              for (auto [suffix, other] : {std::pair{"_tt", DecodeCudaKernel::token_tiles},
                                           std::pair{"_lpe", DecodeCudaKernel::lane_per_element}})
                add_variant(r.impl + suffix, time_ms(0, other), "kernel", decode_cuda_kernel_name(other));
            // At 8192 (paged): the other split counts too, rows "paged_sN", so
            // one run shows what the choice (at least 2 CTAs a SM) leaves.
            if (paged && ctx == 8192)
              for (int sp : {1, 2, 4, 8, 16})
                if (sp != chosen)
                  add_variant("paged_s" + std::to_string(sp), time_ms(sp), "splits", std::to_string(sp));
            for (void* p : {(void*)k, (void*)v, (void*)dip, (void*)dix, (void*)dll, (void*)q, (void*)out})
              LLMK_CUDA_CHECK(cudaFree(p));
          }
  rep.ratios("paged", {"contiguous", "paged_tt", "paged_lpe"});
  return 0;
}
}  // namespace
LLMK_BENCH("attention-gpu", "paged decode attention on the GPU vs device copy bandwidth", run);
}  // namespace llmk::bench
