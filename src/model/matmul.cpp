// matmul (include/llmk/matmul.hpp): validation, the activation quantizer, the
// scalar kernels, and the dispatch over SIMD level and threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "llmk/cpu_features.hpp"
#include "llmk/error.hpp"
#include "llmk/parallel.hpp"
#include "llmk/tensor.hpp"
#include "model/matmul_kernels.hpp"

namespace llmk {

const char* wtype_name(WType t) {
  switch (t) {
    case WType::f32: return "f32";
    case WType::f16: return "f16";
    case WType::bf16: return "bf16";
    case WType::q8_0: return "q8_0";
    case WType::q4_0: return "q4_0";
    case WType::q4_1: return "q4_1";
  }
  return "?";
}

WType parse_wtype(std::string_view name, std::string_view arg) {
  for (WType t : {WType::f32, WType::f16, WType::bf16, WType::q8_0, WType::q4_0, WType::q4_1})
    if (name == wtype_name(t)) return t;
  LLMK_CHECK_ARG(false, "parse_wtype", arg, name, "must be f32|f16|bf16|q8_0|q4_0|q4_1");
  return WType::f32;
}

bool wtype_is_quantized(WType t) { return t == WType::q8_0 || t == WType::q4_0 || t == WType::q4_1; }

int64_t wtype_row_bytes(WType t, int64_t k) {
  LLMK_CHECK_ARG(k >= 0, "wtype_row_bytes", "k", k, "must be >= 0");
  if (wtype_is_quantized(t))
    LLMK_CHECK_ARG(k % kQBlock == 0, "wtype_row_bytes", "k", k, std::string("must be a multiple of 32 for ") + wtype_name(t));
  switch (t) {
    case WType::f32: return 4 * k;
    case WType::f16:
    case WType::bf16: return 2 * k;
    case WType::q8_0: return k / kQBlock * int64_t(sizeof(BlockQ8_0));
    case WType::q4_0: return k / kQBlock * int64_t(sizeof(BlockQ4_0));
    case WType::q4_1: return k / kQBlock * int64_t(sizeof(BlockQ4_1));
  }
  return 0;
}

void check_weight(const char* fn, const WeightView& w) {
  LLMK_CHECK_ARG(w.rows >= 0 && w.cols >= 0, fn, "w.rows/cols", std::to_string(w.rows) + "x" + std::to_string(w.cols),
                 "must be >= 0");
  LLMK_CHECK_ARG(w.data || w.rows == 0, fn, "w.data", w.data, "must not be null");
  // Named here: wtype_row_bytes would name itself and its 'k'.
  LLMK_CHECK_ARG(!wtype_is_quantized(w.type) || w.cols % kQBlock == 0, fn, "w.cols", w.cols,
                 std::string("must be a multiple of 32 for ") + wtype_name(w.type));
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

template <class B>
float quant_dot(const B* wb, const ActQ8* xq, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    int dot = 0;
    if constexpr (std::is_same_v<B, BlockQ8_0>) {
      for (int j = 0; j < kQBlock; ++j) dot += wb[b].qs[j] * xq[b].qs[j];
    } else {
      for (int j = 0; j < kQBlock / 2; ++j)
        dot += (wb[b].qs[j] & 0x0f) * xq[b].qs[j] + (wb[b].qs[j] >> 4) * xq[b].qs[j + 16];
    }
    const float dw = f16_bits_to_f32(wb[b].d);
    acc += float(dot) * dw * xq[b].d;
    if constexpr (std::is_same_v<B, BlockQ4_0>) acc -= 8.0f * dw * xq[b].s;
    if constexpr (std::is_same_v<B, BlockQ4_1>) acc += f16_bits_to_f32(wb[b].m) * xq[b].s;
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

void rows_scalar(const Args& a, int64_t n0, int64_t n1) {
  const int64_t nb = a.w.cols / kQBlock;
  sweep(a, n0, n1, [&](int r, int64_t m0, int64_t n) {
    const void* wr = static_cast<const char*>(a.w.data) + n * a.w.row_bytes;
    for (int i = 0; i < r; ++i) {
      const int64_t m = m0 + i;
      float v = 0;
      switch (a.w.type) {
        case WType::f32: v = float_dot(static_cast<const float*>(wr), a.x + m * a.ldx, a.w.cols); break;
        case WType::f16: v = float_dot(static_cast<const f16*>(wr), a.x + m * a.ldx, a.w.cols); break;
        case WType::bf16: v = float_dot(static_cast<const bf16*>(wr), a.x + m * a.ldx, a.w.cols); break;
        case WType::q8_0: v = quant_dot(static_cast<const BlockQ8_0*>(wr), a.xq + m * nb, nb); break;
        case WType::q4_0: v = quant_dot(static_cast<const BlockQ4_0*>(wr), a.xq + m * nb, nb); break;
        case WType::q4_1: v = quant_dot(static_cast<const BlockQ4_1*>(wr), a.xq + m * nb, nb); break;
      }
      a.y[m * a.ldy + n] = v;
    }
  });
}
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
    const auto quantize = simd_level() >= SimdLevel::avx2 ? mm::quantize_act_avx2 : mm::quantize_act_scalar;
#pragma omp parallel for num_threads(threads) schedule(static) if (M * w.cols >= (1 << 16))
    for (int64_t m = 0; m < M; ++m) quantize(x + m * ldx, nb, q + m * nb);
  }
  const mm::Args a{x, ldx, quant ? xq.data() : nullptr, w, y, ldy, M};
  mm::RowsFn fn = mm::rows_scalar;
  if (simd_level() >= SimdLevel::avx512vnni) fn = mm::rows_avx512vnni;
  else if (simd_level() >= SimdLevel::avx512) fn = mm::rows_avx512;
  else if (simd_level() >= SimdLevel::avx2) fn = mm::rows_avx2;
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
  const char* r = static_cast<const char*>(w.data) + n * w.row_bytes;
  const int64_t K = w.cols;
  switch (w.type) {
    case WType::f32: std::copy_n(reinterpret_cast<const float*>(r), K, out); return;
    case WType::f16:
      for (int64_t k = 0; k < K; ++k) out[k] = to_f32(reinterpret_cast<const f16*>(r)[k]);
      return;
    case WType::bf16:
      for (int64_t k = 0; k < K; ++k) out[k] = to_f32(reinterpret_cast<const bf16*>(r)[k]);
      return;
    case WType::q8_0:
      for (int64_t b = 0; b < K / kQBlock; ++b) {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(r)[b];
        for (int j = 0; j < kQBlock; ++j) out[b * kQBlock + j] = blk.qs[j] * f16_bits_to_f32(blk.d);
      }
      return;
    case WType::q4_0:
    case WType::q4_1:
      for (int64_t b = 0; b < K / kQBlock; ++b) {
        const bool one = w.type == WType::q4_1;
        const uint8_t* qs = one ? reinterpret_cast<const BlockQ4_1*>(r)[b].qs : reinterpret_cast<const BlockQ4_0*>(r)[b].qs;
        const float d = f16_bits_to_f32(one ? reinterpret_cast<const BlockQ4_1*>(r)[b].d : reinterpret_cast<const BlockQ4_0*>(r)[b].d);
        const float m = one ? f16_bits_to_f32(reinterpret_cast<const BlockQ4_1*>(r)[b].m) : -8.0f * d;
        for (int j = 0; j < kQBlock / 2; ++j) {
          out[b * kQBlock + j] = float(qs[j] & 0x0f) * d + m;
          out[b * kQBlock + j + 16] = float(qs[j] >> 4) * d + m;
        }
      }
      return;
  }
}

}  // namespace llmk
