// The head-taking canned estimators (DNNEstimator, LinearEstimator, DNNLinearCombinedEstimator,
// BaselineEstimator): each trains with a head its Classifier/Regressor cousins do not choose
// (multi-label, two regression targets) to a sensible metric, and refuses a missing head.
#include <doctest/doctest.h>

#include "tests/canned/canned_test_util.h"

using namespace canned_test;
using est_test::TempDir;

namespace {

// x1, x2 uniform in [-2, 2] and a color; three independent 0/1 labels per example (x1 > 0,
// x2 > 0, color is red) and two regression targets (x1 + x2, x1 - 2 x2).
data::Dataset multi_target(bool multi_label, int64_t n, uint64_t seed) {
  ops::Generator generator(seed);
  std::vector<float> x1, x2, targets;
  std::vector<int64_t> hot;
  std::vector<std::string> color;
  const char* kColors[] = {"red", "green", "blue"};
  for (int64_t i = 0; i < n; ++i) {
    const float a = float(generator.next_double() * 4 - 2);
    const float b = float(generator.next_double() * 4 - 2);
    const int c = static_cast<int>(generator.next_u64() % 3);
    x1.push_back(a);
    x2.push_back(b);
    color.push_back(kColors[c]);
    hot.insert(hot.end(), {a > 0, b > 0, c == 0});
    targets.insert(targets.end(), {a + b, a - 2 * b});
  }
  Features features{{"x1", Tensor::from_vector(x1)},
                    {"x2", Tensor::from_vector(x2)},
                    {"color", Tensor::from_vector(color)}};
  Tensor labels =
      multi_label ? Tensor::from_vector(hot, {n, 3}) : Tensor::from_vector(targets, {n, 2});
  return data::Dataset::from_tensor_slices(features, labels);
}

InputFn train_on(bool multi_label) {
  return [multi_label](ModeKeys, const InputContext*) {
    return multi_target(multi_label, 512, 5).shuffle(512, 1).repeat().batch(32);
  };
}
InputFn eval_on(bool multi_label) {
  return [multi_label](ModeKeys, const InputContext*) {
    return multi_target(multi_label, 256, 55).batch(64);
  };
}

}  // namespace

TEST_CASE("DNNEstimator and DNNLinearCombinedEstimator with a multi-label head") {
  TempDir dir, dir_combined;
  DNNEstimator dnn({.head = canned::multi_label_head(3),
                    .hidden_units = {16},
                    .feature_columns = dnn_columns(),
                    .config = config(dir.str())});
  dnn.train(train_on(true), {.steps = 400});
  Metrics metrics = dnn.evaluate(eval_on(true));
  CHECK(metrics.at("auc") > 0.95);
  CHECK(dnn.get_variable_value("dnn/logits/kernel").shape() == Shape{16, 3});

  DNNLinearCombinedEstimator combined({.head = canned::multi_label_head(3),
                                       .linear_feature_columns = linear_columns(),
                                       .linear_optimizer = optim::ftrl(0.1),
                                       .dnn_feature_columns = dnn_columns(),
                                       .dnn_optimizer = optim::adagrad(0.05),
                                       .dnn_hidden_units = {8},
                                       .config = config(dir_combined.str())});
  combined.train(train_on(true), {.steps = 300});
  Metrics combined_metrics = combined.evaluate(eval_on(true));
  CHECK(combined_metrics.at("auc") > 0.95);
  CHECK(combined_metrics.at("global_step") == 300);
}

TEST_CASE("LinearEstimator and BaselineEstimator with a two-target regression head") {
  TempDir dir, dir_baseline;
  LinearEstimator linear({.head = canned::regression_head(2),
                          .feature_columns = linear_columns(),
                          .optimizer = "SGD",
                          .config = config(dir.str())});
  linear.train(train_on(false), {.steps = 300});
  CHECK(linear.evaluate(eval_on(false)).at("average_loss") < 0.01);
  const std::vector<double> x2_weights =
      linear.get_variable_value("linear/linear_model/x2/weights").to_vector<double>();
  REQUIRE(x2_weights.size() == 2);
  CHECK(x2_weights[0] == doctest::Approx(1).epsilon(0.02));
  CHECK(x2_weights[1] == doctest::Approx(-2).epsilon(0.02));

  BaselineEstimator baseline(
      {.head = canned::regression_head(2), .config = config(dir_baseline.str())});
  baseline.train(train_on(false), {.steps = 200});
  CHECK(baseline.get_variable_value("baseline/bias").shape() == Shape{2});
  // The targets' means are near 0; the baseline's average loss is their variance, about 2.7
  // and 6.7 (mean 4.7), far above the linear model's.
  CHECK(baseline.evaluate(eval_on(false)).at("average_loss") > 3);
}

TEST_CASE("the head-taking estimators require a head") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(
      DNNEstimator(
          {.hidden_units = {4}, .feature_columns = dnn_columns(), .config = config(dir.str())}),
      doctest::Contains("head is required"), InvalidArgumentError);
  CHECK_THROWS_AS(
      LinearEstimator({.feature_columns = linear_columns(), .config = config(dir.str())}),
      InvalidArgumentError);
  CHECK_THROWS_AS(BaselineEstimator({.config = config(dir.str())}), InvalidArgumentError);
  CHECK_THROWS_AS(DNNLinearCombinedEstimator(
                      {.linear_feature_columns = linear_columns(), .config = config(dir.str())}),
                  InvalidArgumentError);
}
