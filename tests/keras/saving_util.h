// Helpers of the keras saving tests: a small learnable problem, a scratch directory, models.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "keras/keras.h"
#include "ops/array_ops.h"

namespace saving_test {

namespace K = est::keras;
namespace L = est::keras::layers;
using est::Tensor;

// n examples of 6 features; the label is which of 3 fixed sums is largest.
inline est::data::Dataset blobs(int64_t n, int64_t batch, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> features(n * 6);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    float* row = &features[i * 6];
    for (int j = 0; j < 6; ++j) row[j] = uniform(rng);
    float a = row[0] + row[1], b = row[2] - row[3], c = row[4] * 2 - row[5];
    labels[i] = a > b ? (a > c ? 0 : 2) : (b > c ? 1 : 2);
  }
  return est::data::Dataset::from_tensor_slices(
             est::data::Features{{"x", Tensor::from_vector(features, {n, 6})}},
             Tensor::from_vector(labels, {n}))
      .batch(batch);
}

struct Scratch {
  std::filesystem::path root;
  Scratch() {
    std::string pattern = (std::filesystem::temp_directory_path() / "keras_save_XXXXXX").string();
    root = mkdtemp(pattern.data());
  }
  ~Scratch() { std::filesystem::remove_all(root); }
  std::string operator/(const std::string& name) const { return (root / name).string(); }
};

// Sequential (InputLayer, Dense relu, Dense 3) or the same graph as a functional model.
inline std::unique_ptr<K::Model> small_model(bool functional, const std::string& model_dir,
                                             uint64_t seed) {
  std::unique_ptr<K::Model> model;
  if (functional) {
    K::KerasTensor input = K::Input({6}, "x");
    K::KerasTensor hidden = (*L::Dense({.units = 8, .activation = "relu"}))(input);
    model = std::make_unique<K::Model>(input, (*L::Dense({.units = 3}))(hidden));
  } else {
    model = std::make_unique<K::Sequential>(std::vector<K::LayerPtr>{
        L::InputLayer({.shape = {6}}), L::Dense({.units = 8, .activation = "relu"}),
        L::Dense({.units = 3})});
  }
  model->config().model_dir = model_dir;
  model->config().tf_random_seed = seed;
  return model;
}

inline void check_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                        [[maybe_unused]] double tolerance = 1e-6) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].shape() == b[i].shape());
    Tensor x = est::ops::cast(a[i], est::ops::DType::kF64);
    Tensor y = est::ops::cast(b[i], est::ops::DType::kF64);
    double worst = 0;
    for (int64_t k = 0; k < x.numel(); ++k)
      worst = std::max(worst, std::abs(x.data<double>()[k] - y.data<double>()[k]));
    CHECK_MESSAGE(worst <= tolerance, "weight ", i, " differs by ", worst);
  }
}

// 3 epochs straight == 2 epochs, save (`extension`: ".keras" or ".h5"), load_model, 1 epoch
// (each epoch one pass of a finite dataset), for models compiled by `compile` with the optimizer
// `optimizer`; `on_loaded(loaded, saved)` checks more before the last epoch.
inline void resumes_exactly(
    bool functional, const std::string& extension, const std::function<void(K::Model&)>& compile,
    [[maybe_unused]] const std::string& optimizer,  // unused where doctest is disabled
    const std::function<void(K::Model& loaded, K::Model& saved)>& on_loaded = {}) {
  Scratch scratch;
  auto data = blobs(96, 16);
  K::clear_session();
  auto straight = small_model(functional, scratch / "straight", 5);
  compile(*straight);
  straight->fit(data, {.epochs = 3, .verbose = 0});

  K::clear_session();
  auto first = small_model(functional, scratch / "first", 5);
  compile(*first);
  first->fit(data, {.epochs = 2, .verbose = 0});
  std::string path = scratch / ("model" + extension);
  first->save(path);
  auto loaded = K::load_model(path);
  CHECK(loaded->is_sequential() == !functional);
  REQUIRE(loaded->optimizer());
  CHECK(loaded->optimizer()->name == optimizer);
  CHECK(loaded->read_state().global_step == 12);
  check_close(loaded->get_weights(), first->get_weights(), 0);
  if (on_loaded) on_loaded(*loaded, *first);
  loaded->fit(data, {.epochs = 1, .verbose = 0});
  check_close(loaded->get_weights(), straight->get_weights(), 1e-6);
  std::filesystem::remove_all(loaded->model_dir());  // a temporary directory
}

}  // namespace saving_test
