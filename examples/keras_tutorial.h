// The two helpers of TensorFlow's "Multi-worker training with Keras" tutorial (its mnist_setup.py)
// in C++, on Fashion-MNIST from the Debian package (/usr/share/datasets/fashion-mnist):
// mnist_dataset(batch_size), the training images scaled to [0, 1] as float32 [28, 28] with int64
// labels, shuffled, repeated and batched; and build_and_compile_cnn_model(), the tutorial's
// Sequential CNN compiled with its loss, optimizer and metric. Shared by
// examples/keras_multi_worker.cpp and bench/keras_bench.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <est/est.h>

namespace examples {

// (x_train, y_train): float32 [60000, 28, 28] in [0, 1] and int64 [60000].
inline std::pair<est::Tensor, est::Tensor> load_fashion_mnist_train() {
  std::string dir = est::data::kFashionMnistDirectory;
  est::Tensor x = est::data::read_idx(dir + "/train-images-idx3-ubyte.gz");
  est::Tensor y = est::data::read_idx(dir + "/train-labels-idx1-ubyte.gz");
  return {est::ops::mul(est::ops::cast(x, est::DType::kF32), 1.0 / 255.0),
          est::ops::cast(y, est::DType::kI64)};
}

// tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(60000).repeat()
//   .batch(batch_size), with a fixed shuffle seed so that every worker of a job draws the same
// order (each keeps its rows of every global batch).
inline est::data::Dataset mnist_dataset(int64_t batch_size, uint64_t seed = 42) {
  auto [x_train, y_train] = load_fashion_mnist_train();
  return est::data::Dataset::from_tensor_slices(est::data::Features{{"x", x_train}}, y_train)
      .shuffle(60000, seed)
      .repeat()
      .batch(batch_size);
}

// The tutorial's model; `strategy` (may be null) plays `with strategy.scope():`.
inline std::unique_ptr<est::keras::Sequential> build_and_compile_cnn_model(
    std::shared_ptr<est::distribute::Strategy> strategy = nullptr, std::string model_dir = {}) {
  namespace layers = est::keras::layers;
  auto model = std::make_unique<est::keras::Sequential>(std::vector<est::keras::LayerPtr>{
      layers::InputLayer({.shape = {28, 28}}), layers::Reshape({28, 28, 1}),
      layers::Conv2D({.filters = 32, .kernel_size = 3, .activation = "relu"}), layers::Flatten(),
      layers::Dense({.units = 128, .activation = "relu"}), layers::Dense({.units = 10})});
  model->config().model_dir = std::move(model_dir);
  model->config().tf_random_seed = 42;
  model->config().train_distribute = std::move(strategy);
  model->compile({.optimizer = est::keras::optimizers::SGD({.learning_rate = 0.001}),
                  .loss = est::keras::losses::SparseCategoricalCrossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"}});
  return model;
}

}  // namespace examples
