// Helpers of the keras callback tests: a small learnable problem as a repeated dataset, a
// scratch directory, a compiled classifier with a fixed seed, captured output, and the
// model's predictions as numbers (to compare the weights two fits ended with).
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "keras/keras.h"

namespace keras_callbacks_test {

namespace K = est::keras;

// 48 examples of 6 features, 2 classes (the sign of a fixed projection), in batches of 4.
inline est::data::Dataset binary_problem(bool repeat = true) {
  const int64_t n = 48;
  std::vector<float> x(n * 6);
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) {
    float s = 0;
    for (int j = 0; j < 6; ++j) {
      x[i * 6 + j] = std::sin(0.7f * static_cast<float>(i * 6 + j) + 0.3f);
      s += x[i * 6 + j] * (j % 2 == 0 ? 1.f : -0.7f);
    }
    y[i] = s > 0 ? 1 : 0;
  }
  auto dataset = est::data::Dataset::from_tensor_slices(
                     est::data::Features{{"x", est::Tensor::from_vector(x, {n, 6})}},
                     est::Tensor::from_vector(y, {n}))
                     .batch(4);
  return repeat ? dataset.repeat() : dataset;
}

struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "keras_callbacks_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Dense(8, relu) -> Dense(2) logits, SGD(learning_rate), accuracy; seed 7.
inline std::unique_ptr<K::Sequential> compiled_model(const std::string& model_dir,
                                                     double learning_rate = 0.1) {
  K::clear_session();
  auto model = std::make_unique<K::Sequential>(std::vector<K::LayerPtr>{
      K::layers::InputLayer({.shape = {6}}), K::layers::Dense({.units = 8, .activation = "relu"}),
      K::layers::Dense({.units = 2})});
  model->config().model_dir = model_dir;
  model->config().tf_random_seed = 7;
  model->compile({.optimizer = K::optimizers::SGD({.learning_rate = learning_rate}),
                  .loss = K::losses::SparseCategoricalCrossentropy(true),
                  .metrics = {"accuracy"}});
  return model;
}

inline std::vector<float> predictions(K::Model& model) {
  return model.predict(binary_problem(false))[0].to_vector<float>();
}

inline K::ProgbarOutput capture(std::string& text) {
  K::ProgbarOutput out = K::stdout_output();
  out.write = [&text](const std::string& s) { text += s; };
  out.is_terminal = false;
  return out;
}

}  // namespace keras_callbacks_test
