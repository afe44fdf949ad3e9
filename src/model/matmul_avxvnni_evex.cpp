// matmul_avxvnni.cpp with its vpdpbusd EVEX-encoded on ymm0-15: the avxvnni
// level on a CPU with AVX-512 VNNI + VL but not AVX-VNNI (Ice Lake, Zen 4),
// where LLMK_SIMD=avxvnni runs it. The same code, so the same bits.
#include "model/matmul_kernels.hpp"

namespace llmk::mm {
void rows_avxvnni_evex(const Args& a, int64_t n0, int64_t n1) { rows<simd::AvxVnni>(a, n0, n1); }
}  // namespace llmk::mm
