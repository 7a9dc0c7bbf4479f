// Fashion-MNIST held in memory as float32, for the benchmarks that time a training step rather
// than the input pipeline (as their PyTorch peer does): the whole split loaded once, and batches
// copied out of it by rows.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <est/data/idx.h>
#include <est/ops/tensor.h>

namespace bench {

struct InMemoryData {
  est::Tensor images;  // float32 [N, 28, 28, 1] in [0, 1]
  est::Tensor labels;  // int64 [N]
};

// split: "train" or "test".
inline InMemoryData load_fashion_mnist(const std::string& split) {
  std::string prefix = split == "train" ? "train" : "t10k";
  std::string dir = est::data::kFashionMnistDirectory;
  est::Tensor raw = est::data::read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz");
  est::Tensor raw_labels = est::data::read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz");
  int64_t n = raw.dim(0);
  InMemoryData data{est::Tensor::empty({n, 28, 28, 1}), est::Tensor::empty({n}, est::DType::kI64)};
  const uint8_t* in = raw.data<uint8_t>();
  float* out = data.images.data<float>();
  for (int64_t i = 0; i < raw.numel(); ++i) out[i] = in[i] / 255.0f;
  auto labels = raw_labels.to_vector<int64_t>();
  std::copy(labels.begin(), labels.end(), data.labels.data<int64_t>());
  return data;
}

// Copies rows [first, first + images.dim(0)) into the given batch tensors.
inline void copy_rows(const InMemoryData& data, int64_t first, est::Tensor& images,
                      est::Tensor& labels) {
  int64_t batch = images.dim(0);
  std::memcpy(images.raw_data(), data.images.data<float>() + first * 784,
              static_cast<size_t>(batch * 784) * sizeof(float));
  std::memcpy(labels.raw_data(), data.labels.data<int64_t>() + first,
              static_cast<size_t>(batch) * sizeof(int64_t));
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace bench
