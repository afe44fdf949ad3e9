// The CPU drivers of LayerNorm / RMSNorm: pick the kernel table for
// llmk::simd_level(), split rows statically over OpenMP threads, and reduce
// the backward's per-thread weight-gradient partials in thread order. Also
// instantiates the scalar kernels (this file gets no ISA flags).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/dispatch.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tensor.hpp"
#include "norm/norm_kernels.hpp"

namespace llmk::norm_cpu {

const Kernels& kernels_scalar() {
  static const Kernels k = make_kernels<Scalar>();
  return k;
}

namespace {

constexpr simd::Paths<const Kernels& (*)()> kKernels{.scalar = kernels_scalar,
                                                     .avx2 = kernels_avx2,
                                                     .avx512 = kernels_avx512};
const Kernels& kernels() { return kKernels.pick()(); }

int dtype_index(DType t) { return t == DType::f32 ? 0 : t == DType::f16 ? 1 : 2; }

// A parallel region costs a few microseconds: give each thread at least
// 64K elements, so a decode-sized call (N = 1, D = 576) runs inline.
int threads_for(int64_t N, int64_t D) {
  constexpr int64_t kMinElemsPerThread = 64 * 1024;
  const int64_t by_work = std::max<int64_t>(1, N * D / kMinElemsPerThread);
  return int(std::min<int64_t>({num_threads(), by_work, std::max<int64_t>(N, 1)}));
}

}  // namespace

bool stream_outputs(int64_t bytes) {
  static const int64_t llc = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? int64_t(l3) : int64_t(32) << 20;
  }();
  return bytes > llc;
}

void forward(const FwdArgs& a, DType t, bool rms) {
  const FwdFn f = kernels().fwd[dtype_index(t)][rms];
  const int nt = threads_for(a.N, a.D);
  if (nt <= 1) return f(a, 0, a.N);
#pragma omp parallel num_threads(nt)
  {
    const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
    f(a, a.N * i / n, a.N * (i + 1) / n);
  }
}

void backward(const BwdArgs& a, DType t, bool rms, float* dw, float* db) {
  const BwdFn f = kernels().bwd[dtype_index(t)][rms];
  const int64_t D = a.D;
  if (dw) std::fill(dw, dw + D, 0.0f);
  if (db) std::fill(db, db + D, 0.0f);
  const int nt = threads_for(a.N, a.D);
  if (nt <= 1) return f(a, 0, a.N, dw, db);
  // partials [nt][2][D]: thread i owns rows [N*i/n, N*(i+1)/n) and its slice.
  Buffer part((dw || db) ? size_t(nt) * 2 * size_t(D) * sizeof(float) : 0);
  float* p = part.as<float>();
  if (p) std::memset(p, 0, part.bytes());
#pragma omp parallel num_threads(nt)
  {
    const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
    f(a, a.N * i / n, a.N * (i + 1) / n, dw ? p + (2 * i) * D : nullptr, db ? p + (2 * i + 1) * D : nullptr);
#pragma omp barrier
    if (p) {
#pragma omp for schedule(static)
      for (int64_t j = 0; j < D; ++j) {
        float sw = 0.0f, sb = 0.0f;
        for (int k = 0; k < nt; ++k) {  // fixed order: thread 0, 1, ...
          sw += p[(2 * k) * D + j];
          sb += p[(2 * k + 1) * D + j];
        }
        if (dw) dw[j] = sw;
        if (db) db[j] = sb;
      }
    }
  }
}

}  // namespace llmk::norm_cpu
