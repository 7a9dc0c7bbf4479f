// Ftrl against TF1's FtrlOptimizer formula (training_ops.cc, ApplyFtrl / ApplyFtrlV2), written
// here again as a scalar loop in double and run side by side for 100 steps on a quadratic loss,
// so that each step's gradient depends on the weights the previous steps produced.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nn/nn.h"

using namespace est;
using namespace est::nn;

namespace {

struct Reference {  // one weight's FTRL state, as TF's kernel keeps it
  double var, accum, linear = 0;
};

double sign(double x) { return (x > 0) - (x < 0); }

void reference_step(Reference& s, double g, double lr, const optim::FtrlOptions& o) {
  const double p = o.learning_rate_power;
  const double g_shrunk = g + 2 * o.l2_shrinkage_regularization_strength * s.var;
  const double new_accum = s.accum + g * g;
  s.linear += g_shrunk - (std::pow(new_accum, -p) - std::pow(s.accum, -p)) / lr * s.var;
  const double quadratic = std::pow(new_accum, -p) / lr + 2 * o.l2_regularization_strength;
  s.var = std::abs(s.linear) > o.l1_regularization_strength
              ? (o.l1_regularization_strength * sign(s.linear) - s.linear) / quadratic
              : 0.0;
  s.accum = new_accum;
}

// Loss sum_i c_i (w_i - t_i)^2 plus a step-dependent wobble: g_i = 2 c_i (w_i - t_i) + sin(...).
const std::vector<double> kTarget{0.8, -1.5, 0.02, 3.0};
const std::vector<double> kCurvature{1.0, 0.5, 2.0, 0.1};
double gradient(int i, double w, int step) {
  return 2 * kCurvature[i] * (w - kTarget[i]) + 0.3 * std::sin(0.7 * step + i);
}

void run_against_reference(double lr, const optim::FtrlOptions& options) {
  const std::vector<double> initial{0.5, -0.25, 0.0, 1.0};
  VariableStore store;
  Tensor w = store.create("linear/w", Tensor::from_vector<double>(initial), true);
  std::vector<Reference> reference;
  for (double v : initial)
    reference.push_back({.var = v, .accum = options.initial_accumulator_value});
  for (int step = 0; step < 100; ++step) {
    std::vector<double> g(initial.size());
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = gradient(int(i), reference[i].var, step);
      reference_step(reference[i], g[i], lr, options);
    }
    // A fresh config every step, as model_fn builds it: the state lives in the slots.
    optim::ftrl(lr, options).apply_gradients(store, {Tensor::from_vector<double>(g)}, {w});
    const std::vector<double> got = w.to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      INFO("step " << step << " weight " << i);
      REQUIRE(got[i] == doctest::Approx(reference[i].var).epsilon(1e-12));
    }
  }
  const std::vector<double> accum = store.get("linear/w/Ftrl").value.to_vector<double>();
  const std::vector<double> linear = store.get("linear/w/Ftrl_1").value.to_vector<double>();
  for (size_t i = 0; i < initial.size(); ++i) {
    CHECK(accum[i] == doctest::Approx(reference[i].accum).epsilon(1e-12));
    CHECK(linear[i] == doctest::Approx(reference[i].linear).epsilon(1e-12));
  }
  CHECK(read_global_step(store) == 100);
}

}  // namespace

TEST_CASE("ftrl: TF's defaults, slots Ftrl (starts at 0.1) and Ftrl_1, not trainable") {
  VariableStore store;
  Tensor w = store.create("w", Tensor::from_vector<double>({1.0, -2.0}), true);
  optim::ftrl(0.1).apply_gradients(store, {Tensor::from_vector<double>({0.5, -1.0})}, {w});
  std::vector<std::string> names = store.names();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"global_step", "w", "w/Ftrl", "w/Ftrl_1"});
  CHECK_FALSE(store.get("w/Ftrl").trainable);
  CHECK_FALSE(store.get("w/Ftrl_1").trainable);
  // By hand, weight 0: accum' = 0.1 + 0.25 = 0.35; linear = 0.5 - (sqrt(0.35) - sqrt(0.1)) / 0.1
  // * 1; var = -linear / (sqrt(0.35) / 0.1).
  const double linear0 = 0.5 - (std::sqrt(0.35) - std::sqrt(0.1)) / 0.1;
  CHECK(store.get("w/Ftrl").value.to_vector<double>()[0] == doctest::Approx(0.35));
  CHECK(store.get("w/Ftrl_1").value.to_vector<double>()[0] == doctest::Approx(linear0));
  CHECK(w.to_vector<double>()[0] == doctest::Approx(-linear0 / (std::sqrt(0.35) / 0.1)));
}

TEST_CASE("ftrl: 100 steps in float64 against the TF1 formula") {
  SUBCASE("learning_rate_power -0.5, l1, l2, l2_shrinkage") {
    run_against_reference(0.3, {.l1_regularization_strength = 0.05,
                                .l2_regularization_strength = 0.1,
                                .l2_shrinkage_regularization_strength = 0.2});
  }
  SUBCASE("learning_rate_power -0.3, l1 large enough to zero a weight, l2") {
    run_against_reference(0.5, {.learning_rate_power = -0.3,
                                .initial_accumulator_value = 0.5,
                                .l1_regularization_strength = 0.4,
                                .l2_regularization_strength = 0.05});
  }
  SUBCASE("learning_rate_power 0 (fixed rate), l2_shrinkage without l1") {
    run_against_reference(0.05, {.learning_rate_power = 0.0,
                                 .l2_regularization_strength = 0.01,
                                 .l2_shrinkage_regularization_strength = 0.1});
  }
  SUBCASE("no regularization, TF's defaults") { run_against_reference(0.1, {}); }
}

TEST_CASE("ftrl: l1 zeroes weights whose linear term stays within [-l1, l1]") {
  VariableStore store;
  Tensor w = store.create("w", Tensor::from_vector<double>({1.0, -2.0}), true);
  optim::ftrl(0.1, {.l1_regularization_strength = 100.0})
      .apply_gradients(store, {Tensor::from_vector<double>({0.5, -1.0})}, {w});
  CHECK(w.to_vector<double>() == std::vector<double>{0.0, 0.0});
}

TEST_CASE("ftrl: arguments TF rejects are InvalidArgumentError") {
  CHECK_THROWS_AS(optim::ftrl(0.1, {.learning_rate_power = 0.5}), InvalidArgumentError);
  CHECK_THROWS_AS(optim::ftrl(0.1, {.initial_accumulator_value = -0.1}), InvalidArgumentError);
  CHECK_THROWS_AS(optim::ftrl(0.1, {.l1_regularization_strength = -1}), InvalidArgumentError);
  CHECK_THROWS_AS(optim::ftrl(0.1, {.l2_regularization_strength = -1}), InvalidArgumentError);
  CHECK_THROWS_AS(optim::ftrl(0.1, {.l2_shrinkage_regularization_strength = -1}),
                  InvalidArgumentError);
  CHECK_NOTHROW(optim::ftrl(0.1, {.initial_accumulator_value = 0.0}));
}
