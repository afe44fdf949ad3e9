// matmul (include/llmk/matmul.hpp): validation, the activation quantizer, the
// scalar kernels, and the dispatch over SIMD level and threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/dispatch.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tensor.hpp"
#include "model/matmul_kernels.hpp"

namespace llmk {

const char* wtype_name(WType t) { return wtype_traits(t).name; }

WType parse_wtype(std::string_view name, std::string_view arg) {
  const WTypeTraits* t = wtype_traits_named(name);
  LLMK_CHECK_ARG(t != nullptr, "parse_wtype", arg, name, "must be " + wtype_choices());
  return t->type;
}

bool wtype_is_quantized(WType t) { return wtype_traits(t).quantized(); }

int64_t wtype_row_bytes(WType t, int64_t k) {
  const WTypeTraits& tr = wtype_traits(t);
  LLMK_CHECK_ARG(k >= 0, "wtype_row_bytes", "k", k, "must be >= 0");
  LLMK_CHECK_ARG(k % tr.block_elems == 0, "wtype_row_bytes", "k", k,
                 "must be a multiple of " + std::to_string(tr.block_elems) + " for " + tr.name);
  return k / tr.block_elems * tr.block_bytes;
}

void check_weight(const char* fn, const WeightView& w) {
  LLMK_CHECK_ARG(w.rows >= 0 && w.cols >= 0, fn, "w.rows/cols", std::to_string(w.rows) + "x" + std::to_string(w.cols),
                 "must be >= 0");
  LLMK_CHECK_ARG(w.data || w.rows == 0, fn, "w.data", w.data, "must not be null");
  // Named here: wtype_row_bytes would name itself and its 'k'.
  const WTypeTraits& tr = wtype_traits(w.type);
  LLMK_CHECK_ARG(w.cols % tr.block_elems == 0, fn, "w.cols", w.cols,
                 "must be a multiple of " + std::to_string(tr.block_elems) + " for " + tr.name);
  LLMK_CHECK_ARG(w.row_bytes >= wtype_row_bytes(w.type, w.cols), fn, "w.row_bytes", w.row_bytes,
                 "must be >= " + std::to_string(wtype_row_bytes(w.type, w.cols)) + " for " + wtype_name(w.type));
}

namespace {

void check(const char* fn, const float* x, int64_t ldx, const WeightView& w, const void* y, int64_t ldy, int64_t M) {
  LLMK_CHECK_ARG(M >= 0, fn, "M", M, "must be >= 0");
  check_weight(fn, w);
  if (M == 0) return;
  LLMK_CHECK_ARG(x || w.cols == 0, fn, "x", x, "must not be null");
  LLMK_CHECK_ARG(y || w.rows == 0, fn, "y", y, "must not be null");
  LLMK_CHECK_ARG(ldx >= w.cols, fn, "ldx", ldx, "must be >= K = " + std::to_string(w.cols));
  LLMK_CHECK_ARG(ldy >= w.rows, fn, "ldy", ldy, "must be >= N = " + std::to_string(w.rows));
  const int64_t ybytes = ((M - 1) * ldy + w.rows) * 4;  // y is written while x and W are read
  LLMK_CHECK_ARG(!ranges_overlap(y, ybytes, x, ((M - 1) * ldx + w.cols) * 4), fn, "y", y, "must not overlap x");
  LLMK_CHECK_ARG(!ranges_overlap(y, ybytes, w.data, w.rows * w.row_bytes), fn, "y", y, "must not overlap w.data");
}

// The block dot of matmul_decode.hpp in plain loops: per chunk and half, an int dot.
template <class B>
float quant_dot(const B* wb, const ActQ8* xq, int64_t nbx) {
  using D = mm::Decode<B>;
  typename D::Scales sc;
  int8_t q[32];
  float acc = 0;
  for (int64_t b = 0; b < nbx / D::kChunks; ++b) {
    D::scales(wb[b], sc);
    for (int c = 0; c < D::kChunks; ++c) {
      const ActQ8& xa = xq[b * D::kChunks + c];
      D::codes(wb[b], c, q);
      for (int h = 0; h < 2; ++h) {
        int dot = 0, xs = 0;
        for (int l = 16 * h; l < 16 * h + 16; ++l) dot += q[l] * xa.qs[l], xs += xa.qs[l];
        acc += sc.fw[c][h] * xa.d * float(dot);
        if constexpr (D::kMins) acc += sc.fm * float(sc.m[c][h]) * xa.d * float(xs);
      }
      if constexpr (D::kOffset) acc += sc.fo[c] * xa.s;
    }
  }
  return acc;
}

template <class T>
float float_dot(const T* w, const float* x, int64_t k) {
  float acc = 0;
  for (int64_t i = 0; i < k; ++i) acc += to_f32(w[i]) * x[i];
  return acc;
}

}  // namespace

namespace mm {
// x[j] ~= qs[j] * d: q = round-half-even(x * 127 / amax), and like llama.cpp's
// q8_0/q8_1 activations the scale d = amax / 127 and s = d * sum(qs) are kept
// rounded to f16 (so llmk and llama.cpp round the same way on the same input).
// A block holding a NaN or an infinity gets d = s = NaN and quants 0, so the
// products with it are NaN, as in the f32 path (not an undefined conversion of
// NaN to int that would drop it).
void quantize_act_scalar(const float* x, int64_t nb, ActQ8* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0;
    bool finite = true;
    for (int j = 0; j < kQBlock; ++j) amax = std::max(amax, std::fabs(xb[j])), finite &= std::isfinite(xb[j]);
    if (!finite) {
      std::fill(out[b].qs, out[b].qs + kQBlock, int8_t(0));
      out[b].d = out[b].s = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float d = amax / 127.0f, r = d > 0 ? 127.0f / amax : 0.0f;
    const float id = std::isfinite(r) ? r : 0.0f;  // amax < 127 / FLT_MAX: x * inf would not convert
    int sum = 0;
    for (int j = 0; j < kQBlock; ++j) {
      const int q = int(std::nearbyint(xb[j] * id));
      out[b].qs[j] = int8_t(q);
      sum += q;
    }
    out[b].d = f16_bits_to_f32(f32_to_f16_bits(d));
    out[b].s = f16_bits_to_f32(f32_to_f16_bits(d * float(sum)));
  }
}

namespace {
template <class T>
void float_rows_scalar(const Args& a, int64_t n0, int64_t n1) {
  sweep(a, n0, n1, [&](int r, int64_t m0, int64_t n) {
    const T* wr = reinterpret_cast<const T*>(static_cast<const char*>(a.w.data) + n * a.w.row_bytes);
    for (int i = 0; i < r; ++i) a.y[(m0 + i) * a.ldy + n] = float_dot(wr, a.x + (m0 + i) * a.ldx, a.w.cols);
  });
}
template <class B>
void quant_rows_scalar(const Args& a, int64_t n0, int64_t n1) {
  const int64_t nbx = a.w.cols / kQBlock;
  sweep(a, n0, n1, [&](int r, int64_t m0, int64_t n) {
    const B* wr = reinterpret_cast<const B*>(static_cast<const char*>(a.w.data) + n * a.w.row_bytes);
    for (int i = 0; i < r; ++i) a.y[(m0 + i) * a.ldy + n] = quant_dot(wr, a.xq + (m0 + i) * nbx, nbx);
  });
}
// In WType order, as kRows of matmul_kernels.hpp.
constexpr RowsFn kRowsScalar[] = {float_rows_scalar<float>,     float_rows_scalar<f16>,
                                  float_rows_scalar<bf16>,      quant_rows_scalar<BlockQ8_0>,
                                  quant_rows_scalar<BlockQ4_0>, quant_rows_scalar<BlockQ4_1>,
                                  quant_rows_scalar<BlockQ5_0>, quant_rows_scalar<BlockQ5_1>,
                                  quant_rows_scalar<BlockQ2_K>, quant_rows_scalar<BlockQ3_K>,
                                  quant_rows_scalar<BlockQ4_K>, quant_rows_scalar<BlockQ5_K>,
                                  quant_rows_scalar<BlockQ6_K>};
static_assert(std::size(kRowsScalar) == size_t(kWTypeCount), "one kernel per WType");
}  // namespace

void rows_scalar(const Args& a, int64_t n0, int64_t n1) { kRowsScalar[int(a.w.type)](a, n0, n1); }

namespace {
using QuantizeFn = void (*)(const float* x, int64_t nb, ActQ8* out);
constexpr simd::Paths<QuantizeFn> kQuantize{.scalar = quantize_act_scalar, .avx2 = quantize_act_avx2};
constexpr simd::Paths<RowsFn> kRowsPaths{.scalar = rows_scalar,
                                         .avx2 = rows_avx2,
                                         .avx512 = rows_avx512,
                                         .avx512vnni = rows_avx512vnni};
}  // namespace
}  // namespace mm

void matmul(const float* x, int64_t ldx, const WeightView& w, float* y, int64_t ldy, int64_t M) {
  check("matmul", x, ldx, w, y, ldy, M);
  if (M == 0 || w.rows == 0) return;
  const int threads = num_threads();
  const bool quant = wtype_is_quantized(w.type);
  const int64_t nb = w.cols / kQBlock;
  thread_local std::vector<ActQ8> xq;
  if (quant) {
    xq.resize(size_t(M * nb));
    ActQ8* q = xq.data();
    const mm::QuantizeFn quantize = mm::kQuantize.pick();
#pragma omp parallel for num_threads(threads) schedule(static) if (M * w.cols >= (1 << 16))
    for (int64_t m = 0; m < M; ++m) quantize(x + m * ldx, nb, q + m * nb);
  }
  const mm::Args a{x, ldx, quant ? xq.data() : nullptr, w, y, ldy, M};
  const mm::RowsFn fn = mm::kRowsPaths.pick();
  // Static split of N in multiples of 8 rows; small products stay on one thread.
  const int t = int(std::clamp<int64_t>(M * w.rows * w.cols / (1 << 15), 1, threads));
#pragma omp parallel num_threads(t)
  {
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t per = (w.rows + nt * 8 - 1) / (nt * 8) * 8;
    const int64_t n0 = std::min(w.rows, id * per), n1 = std::min(w.rows, n0 + per);
    if (n0 < n1) fn(a, n0, n1);
  }
}

void dequantize_row(const WeightView& w, int64_t n, float* out) {
  const char* fn = "dequantize_row";
  check_weight(fn, w);
  LLMK_CHECK_ARG(n >= 0 && n < w.rows, fn, "n", n, "must be in [0, " + std::to_string(w.rows) + ")");
  LLMK_CHECK_ARG(out, fn, "out", out, "must not be null");
  // out is written while row n is read; over another row it would change W itself.
  LLMK_CHECK_ARG(!ranges_overlap(out, w.cols * 4, w.data, w.rows * w.row_bytes), fn, "out", out,
                 "must not overlap w.data");
  wtype_traits(w.type).to_float(static_cast<const char*>(w.data) + n * w.row_bytes, out, w.cols);
}

}  // namespace llmk
