// The small learning problems the nn tests train on with a fixed seed: two Gaussian blobs in
// 2-D with an MLP, and 8x8 images of a horizontal or vertical bar (for CNNs).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/nn.h"

namespace est::testing {

struct Batch {
  Tensor features;
  Tensor labels;  // int64 [N]
};

// Two blobs, centred at (1, 1) (class 0) and (-1, -1) (class 1), stddev 0.5.
inline Batch make_blobs(int n, uint64_t seed) {
  ops::Generator generator(seed);
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int i = 0; i < n; ++i) {
    int label = i % 2;
    double centre = label == 0 ? 1.0 : -1.0;
    x.push_back(float(centre + 0.5 * generator.next_normal()));
    x.push_back(float(centre + 0.5 * generator.next_normal()));
    y.push_back(label);
  }
  return {Tensor::from_vector<float>(x, {n, 2}), Tensor::from_vector<int64_t>(y)};
}

// 8x8 single-channel images: a bright row (class 0) or a bright column (class 1), plus noise.
inline Batch make_bars(int n, uint64_t seed) {
  ops::Generator generator(seed);
  std::vector<float> x(static_cast<size_t>(n) * 64);
  std::vector<int64_t> y;
  for (int i = 0; i < n; ++i) {
    int label = i % 2;
    int line = int(generator.next_u64() % 8);
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        bool on = label == 0 ? r == line : c == line;
        x[size_t(i) * 64 + size_t(r) * 8 + size_t(c)] =
            float((on ? 1.0 : 0.0) + 0.1 * generator.next_normal());
      }
    y.push_back(label);
  }
  return {Tensor::from_vector<float>(x, {n, 8, 8, 1}), Tensor::from_vector<int64_t>(y)};
}

// Two classes from 2-D points: dense 16 relu, dense 2.
inline Tensor mlp(nn::ModelContext& ctx, const Tensor& x) {
  Tensor h = nn::dense(ctx, x, {.units = 16, .activation = nn::relu});
  return nn::dense(ctx, h, {.units = 2});
}

}  // namespace est::testing
