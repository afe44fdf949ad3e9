// What the Model's translation units share: the storage a Model owns (random
// weights, norm vectors converted to f32, forward scratch).
#pragma once
#include <cstdint>
#include <vector>

#include "llmk/model.hpp"

namespace llmk {

struct Model::Owned {
  std::vector<std::vector<uint8_t>> blobs;  // random weights
  std::vector<std::vector<float>> vecs;     // norm weights / biases in f32
  // forward scratch, [T, width] each
  std::vector<float> x, h, q, k, v, att, ff, ff2, stats;
  std::vector<float> rope;  // [T, rope_dim] cos / sin pairs of each token's position
  std::vector<float> rope_local, tmp;  // gemma3: the local base's table; a [T, width] scratch
};

}  // namespace llmk
