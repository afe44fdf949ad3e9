// What the Model's translation units share: the storage a Model owns (random
// weights, norm vectors converted to f32, forward scratch).
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/model.hpp"
#include "model/arch.hpp"
#include "model/moe.hpp"

namespace llmk {

struct Model::Owned {
  std::vector<std::vector<uint8_t>> blobs;  // random weights
  std::vector<std::vector<float>> vecs;     // norm weights / biases in f32
  // forward scratch, [T, width] each
  std::vector<float> x, h, q, k, v, att, ff, ff2, stats;
  std::vector<float> rope;             // [T, rope_dim] cos / sin pairs of each token's position
  std::vector<float> rope_local, tmp;  // gemma3: the local base's table; a [T, width] scratch
  moe::Scratch moe;                    // the mixture of experts' routing and expert buffers
};

// Where each arch::Slot lives: matrices (tok_embd, pos_embd, output, layer matrices) as
// WeightView, vectors as const float*. The other accessor gives nullptr.
struct Model::Slots {
  static WeightView* mat(Model& m, LayerWeights& L, arch::Slot s);
  static const float** vec(Model& m, LayerWeights& L, arch::Slot s);
  static const WeightView* mat(const Model& m, const LayerWeights& L, arch::Slot s) {
    return mat(const_cast<Model&>(m), const_cast<LayerWeights&>(L), s);
  }
  static const float* const* vec(const Model& m, const LayerWeights& L, arch::Slot s) {
    return vec(const_cast<Model&>(m), const_cast<LayerWeights&>(L), s);
  }
};

}  // namespace llmk
