// keras::optimizers::Adagrad (Keras 2.11+ / 3 keras/optimizers/adagrad.py): its defaults, by
// name in compile, one step against the formula by hand, and save / load_model (.keras and .h5)
// with its accumulators continuing training as if never interrupted.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "checkpoint/bundle.h"
#include "ops/error.h"
#include "tests/keras/saving_util.h"

using namespace saving_test;

namespace {

void compile_adagrad(K::Model& model) {
  model.compile({.optimizer = K::optimizers::Adagrad({.learning_rate = 0.1}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
}

// Keras's hyperparameters and the accumulators come back with the model.
void check_accumulators(K::Model& loaded, K::Model& saved) {
  CHECK(loaded.optimizer()->config.at("initial_accumulator_value") == 0.1);
  CHECK(loaded.optimizer()->config.at("epsilon") == doctest::Approx(1e-7));
  auto state = loaded.read_state(), expected = saved.read_state();
  const auto* accumulator = state.find("dense/kernel/Adagrad");
  REQUIRE(accumulator);
  check_close({accumulator->value}, {expected.find("dense/kernel/Adagrad")->value}, 0);
}

}  // namespace

TEST_CASE("keras Adagrad: Keras's defaults, by name, and one step equals the formula") {
  K::clear_session();
  Scratch scratch;
  K::Sequential named({L::InputLayer({.shape = {4}}), L::Dense({.units = 2})});
  named.config().model_dir = scratch / "named";
  named.compile({.optimizer = "Adagrad", .loss = "mse"});
  REQUIRE(named.optimizer());
  CHECK(named.optimizer()->name == "Adagrad");
  CHECK(named.optimizer()->config.at("learning_rate") == 0.001);
  CHECK(named.optimizer()->config.at("initial_accumulator_value") == 0.1);
  CHECK(named.optimizer()->config.at("epsilon") == 1e-7);
  CHECK_THROWS_WITH_AS(K::optimizers::Adagrad({.epsilon = 0}), doctest::Contains("epsilon"),
                       est::InvalidArgumentError);

  // Dense(2) on 4 features, mse, 8 rows: one step of lr 0.5 from the seeded initial weights.
  K::clear_session();
  K::Sequential model({L::InputLayer({.shape = {4}}), L::Dense({.units = 2, .name = "dense"})});
  model.config().model_dir = scratch / "step";
  model.config().tf_random_seed = 11;
  model.compile({.optimizer = K::optimizers::Adagrad({.learning_rate = 0.5}), .loss = "mse"});
  std::vector<float> x(8 * 4), y(8 * 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i));
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::cos(1.3f * static_cast<float>(i));
  auto data = est::data::Dataset::from_tensor_slices(
                  est::data::Features{{"x", Tensor::from_vector(x, {8, 4})}},
                  Tensor::from_vector(y, {8, 2}))
                  .batch(8);
  std::vector<Tensor> before = model.get_weights();
  std::vector<float> kernel = before[0].to_vector<float>(), bias = before[1].to_vector<float>();
  model.fit(data, {.verbose = 0});
  // mse = mean over the 16 values of (x W + b - y)^2: dW = 2/16 x^T r, db = 2/16 sum_rows r.
  std::vector<double> g_kernel(8, 0.0), g_bias(2, 0.0);
  for (int n = 0; n < 8; ++n)
    for (int u = 0; u < 2; ++u) {
      double out = bias[static_cast<size_t>(u)];
      for (int k = 0; k < 4; ++k)
        out += static_cast<double>(x[static_cast<size_t>(n * 4 + k)]) *
               kernel[static_cast<size_t>(k * 2 + u)];
      double r = 2.0 / 16.0 * (out - y[static_cast<size_t>(n * 2 + u)]);
      g_bias[static_cast<size_t>(u)] += r;
      for (int k = 0; k < 4; ++k)
        g_kernel[static_cast<size_t>(k * 2 + u)] += x[static_cast<size_t>(n * 4 + k)] * r;
    }
  auto step = [](double w, double g) { return w - 0.5 * g / std::sqrt(0.1 + g * g + 1e-7); };
  std::vector<Tensor> after = model.get_weights();
  std::vector<float> new_kernel = after[0].to_vector<float>(),
                     new_bias = after[1].to_vector<float>();
  double moved = 0;
  for (size_t i = 0; i < 8; ++i) {
    CHECK(new_kernel[i] == doctest::Approx(step(kernel[i], g_kernel[i])).epsilon(1e-6));
    moved = std::max(moved, std::abs(static_cast<double>(new_kernel[i]) - kernel[i]));
  }
  CHECK(moved > 1e-2);
  for (size_t i = 0; i < 2; ++i)
    CHECK(new_bias[i] == doctest::Approx(step(bias[i], g_bias[i])).epsilon(1e-6));
  // The accumulator: 0.1 + g^2, under TF1's slot name.
  auto state = model.read_state();
  const auto* accumulator = state.find("dense/kernel/Adagrad");
  REQUIRE(accumulator);
  std::vector<float> accumulated = accumulator->value.to_vector<float>();
  for (size_t i = 0; i < 8; ++i)
    CHECK(accumulated[i] == doctest::Approx(0.1 + g_kernel[i] * g_kernel[i]).epsilon(1e-6));
}

TEST_CASE("keras Adagrad: save / load_model continues training exactly (.keras)") {
  resumes_exactly(false, ".keras", compile_adagrad, "Adagrad", check_accumulators);
}

TEST_CASE("keras Adagrad: save / load_model continues training exactly (.h5)") {
  resumes_exactly(false, ".h5", compile_adagrad, "Adagrad", check_accumulators);
}
