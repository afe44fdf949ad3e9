// How the quantized matmul reads each block type (the CPU side of the storage-type traits
// table, include/llmk/ggml_quants.hpp): a block is C chunks of 32 values; chunk c's value k
// is  fw[c][k / 16] * code_k + fo[c] + fm * m[c][k / 16],  with integer codes, so
//   sum_k value_k * x_k = sum_h fw[c][h] d_x sum_{k in h} code_k q_k      (int8 dots)
//                       + fo[c] s_x                        (s_x = d_x sum q, ActQ8.s)
//                       + fm d_x sum_h m[c][h] sum_{k in h} q_k           (Q2_K's mins)
// for an activation chunk x_k ~= q_k d_x (quant_blocks.hpp). Codes are unsigned (0..63) or,
// for kSigned types, signed (-128..127; the SIMD kernels move their sign onto x).
// Included by matmul.cpp and the ISA translation units; its unnamed namespace gives each
// its own copy (docs/CONTRIBUTING.md).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "llmk/dtype.hpp"
#include "llmk/ggml_quants.hpp"

namespace llmk::mm {
namespace {

template <class B>
struct Decode;

template <int C>
struct ChunkScales {
  float fw[C][2];   // code scale of each half of each chunk
  float fo[C];      // offset of each chunk (kOffset)
  uint8_t m[C][2];  // integer mins of each half (kMins)
  float fm;         // scale of the mins (kMins)
};

// 32-value blocks: one chunk; value = d * code + fo.
template <class B, bool Signed, bool Offset>
struct Decode32 {
  static constexpr int kChunks = 1;
  static constexpr bool kSigned = Signed, kOffset = Offset, kMins = false;
  using Scales = ChunkScales<1>;
  static void scales(const B& b, Scales& s) {
    const float d = f16_bits_to_f32(b.d);
    s.fw[0][0] = s.fw[0][1] = d;
    if constexpr (std::is_same_v<B, BlockQ4_0>) s.fo[0] = -8.0f * d;
    if constexpr (std::is_same_v<B, BlockQ5_0>) s.fo[0] = -16.0f * d;
    if constexpr (std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>) s.fo[0] = f16_bits_to_f32(b.m);
  }
  static void codes(const B& b, int, int8_t* q) {
    if constexpr (std::is_same_v<B, BlockQ8_0>) {
      std::memcpy(q, b.qs, 32);
    } else {
      uint32_t qh = 0;
      if constexpr (std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>) std::memcpy(&qh, b.qh, 4);
      for (int j = 0; j < 16; ++j) {
        q[j] = int8_t((b.qs[j] & 15) | ((qh >> j) & 1) << 4);
        q[j + 16] = int8_t((b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
      }
    }
  }
};
template <>
struct Decode<BlockQ8_0> : Decode32<BlockQ8_0, true, false> {};
template <>
struct Decode<BlockQ4_0> : Decode32<BlockQ4_0, false, true> {};
template <>
struct Decode<BlockQ4_1> : Decode32<BlockQ4_1, false, true> {};
template <>
struct Decode<BlockQ5_0> : Decode32<BlockQ5_0, false, true> {};
template <>
struct Decode<BlockQ5_1> : Decode32<BlockQ5_1, false, true> {};

// K-quants: 8 chunks; element i = 32 c + l of the super-block, h = c / 4, j = c % 4.
template <>
struct Decode<BlockQ2_K> {
  static constexpr int kChunks = 8;
  static constexpr bool kSigned = false, kOffset = false, kMins = true;
  using Scales = ChunkScales<8>;
  static void scales(const BlockQ2_K& b, Scales& s) {
    const float d = f16_bits_to_f32(b.d);
    for (int c = 0; c < 8; ++c)
      for (int h = 0; h < 2; ++h) {
        s.fw[c][h] = d * float(b.scales[2 * c + h] & 15);
        s.m[c][h] = uint8_t(b.scales[2 * c + h] >> 4);
      }
    s.fm = -f16_bits_to_f32(b.dmin);
  }
  static void codes(const BlockQ2_K& b, int c, int8_t* q) {
    for (int l = 0; l < 32; ++l) q[l] = int8_t((b.qs[32 * (c / 4) + l] >> (2 * (c % 4))) & 3);
  }
};
template <>
struct Decode<BlockQ3_K> {
  static constexpr int kChunks = 8;
  static constexpr bool kSigned = true, kOffset = false, kMins = false;
  using Scales = ChunkScales<8>;
  static void scales(const BlockQ3_K& b, Scales& s) {
    const float d = f16_bits_to_f32(b.d);
    for (int c = 0; c < 8; ++c)
      for (int h = 0; h < 2; ++h) s.fw[c][h] = d * float(q3k_scale(b.scales, 2 * c + h));
  }
  static void codes(const BlockQ3_K& b, int c, int8_t* q) {
    const int h = c / 4, j = c % 4;
    for (int l = 0; l < 32; ++l)
      q[l] = int8_t(((b.qs[32 * h + l] >> (2 * j)) & 3) - (((b.hmask[l] >> (4 * h + j)) & 1) ? 0 : 4));
  }
};
template <class B>
struct DecodeK4 {
  static constexpr int kChunks = 8;
  static constexpr bool kSigned = false, kOffset = true, kMins = false;
  using Scales = ChunkScales<8>;
  static void scales(const B& b, Scales& s) {
    const float d = f16_bits_to_f32(b.d), dmin = f16_bits_to_f32(b.dmin);
    for (int c = 0; c < 8; ++c) {
      int sc, m;
      k4_scale_min(b.scales, c, sc, m);
      s.fw[c][0] = s.fw[c][1] = d * float(sc);
      s.fo[c] = -(dmin * float(m));
    }
  }
  static void codes(const B& b, int c, int8_t* q) {
    for (int l = 0; l < 32; ++l) {
      int v = (b.qs[32 * (c / 2) + l] >> (4 * (c & 1))) & 15;
      if constexpr (std::is_same_v<B, BlockQ5_K>) v |= ((b.qh[l] >> c) & 1) << 4;
      q[l] = int8_t(v);
    }
  }
};
template <>
struct Decode<BlockQ4_K> : DecodeK4<BlockQ4_K> {};
template <>
struct Decode<BlockQ5_K> : DecodeK4<BlockQ5_K> {};
template <>
struct Decode<BlockQ6_K> {
  static constexpr int kChunks = 8;
  static constexpr bool kSigned = true, kOffset = false, kMins = false;
  using Scales = ChunkScales<8>;
  static void scales(const BlockQ6_K& b, Scales& s) {
    const float d = f16_bits_to_f32(b.d);
    for (int c = 0; c < 8; ++c)
      for (int h = 0; h < 2; ++h) s.fw[c][h] = d * float(b.scales[2 * c + h]);
  }
  static void codes(const BlockQ6_K& b, int c, int8_t* q) {
    const int h = c / 4, j = c % 4;
    for (int l = 0; l < 32; ++l) {
      const int lo = (b.ql[64 * h + 32 * (j & 1) + l] >> (4 * (j >> 1))) & 15;
      q[l] = int8_t((lo | ((b.qh[32 * h + l] >> (2 * j)) & 3) << 4) - 32);
    }
  }
};

}  // namespace
}  // namespace llmk::mm
