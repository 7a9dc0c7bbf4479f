// Shared pieces of the canned-estimator tests: a synthetic problem in memory (two numbers and
// a color decide a binary label, three classes, or a linear target) and its input_fn.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "estimator/canned/canned.h"
#include "feature_column/feature_column.h"
#include "ops/random.h"
#include "tests/estimator/estimator_test_util.h"

namespace canned_test {

using namespace est;
namespace fc = est::feature_column;

enum class Task { kBinary, kThreeClasses, kRegression, kStringBinary };

// n examples: x1, x2 uniform in [-2, 2], color in {red, green, blue} (+1, 0, -1), and w (a
// weight, 1 or 3). Labels: binary (x1 + x2 + color > 0), three classes (x1 < -0.7, x1 > 0.7,
// else), regression (2 x1 - 3 x2 + 1 + color), or the binary label as "no"/"yes".
inline data::Dataset synthetic(Task task, int64_t n, uint64_t seed = 7) {
  ops::Generator generator(seed);
  std::vector<float> x1, x2, w, target;
  std::vector<int64_t> ids;
  std::vector<std::string> color, words;
  const char* kColors[] = {"red", "green", "blue"};
  for (int64_t i = 0; i < n; ++i) {
    const float a = float(generator.next_double() * 4 - 2);
    const float b = float(generator.next_double() * 4 - 2);
    const int c = static_cast<int>(generator.next_u64() % 3);
    x1.push_back(a);
    x2.push_back(b);
    color.push_back(kColors[c]);
    w.push_back(i % 4 == 0 ? 3.0f : 1.0f);
    const float effect = 1.0f - float(c);
    const bool positive = a + b + effect > 0;
    ids.push_back(task == Task::kThreeClasses ? (a < -0.7f  ? 0
                                                 : a > 0.7f ? 2
                                                            : 1)
                                              : (positive ? 1 : 0));
    words.push_back(positive ? "yes" : "no");
    target.push_back(2 * a - 3 * b + 1 + effect);
  }
  Features features{{"x1", Tensor::from_vector(x1)},
                    {"x2", Tensor::from_vector(x2)},
                    {"color", Tensor::from_vector(color)},
                    {"w", Tensor::from_vector(w)}};
  Tensor labels = task == Task::kRegression     ? Tensor::from_vector(target)
                  : task == Task::kStringBinary ? Tensor::from_vector(words)
                                                : Tensor::from_vector(ids);
  return data::Dataset::from_tensor_slices(features, labels);
}

// Training input repeats a shuffled 512-example set; evaluation reads another 256 once.
inline InputFn train_input(Task task, int64_t batch = 32) {
  return [task, batch](ModeKeys, const InputContext* context) {
    data::Dataset ds = synthetic(task, 512);
    if (context) ds = ds.shard(context->num_input_pipelines, context->input_pipeline_id);
    return ds.shuffle(512, 1).repeat().batch(batch);
  };
}
inline InputFn eval_input(Task task) {
  return [task](ModeKeys, const InputContext*) { return synthetic(task, 256, 99).batch(64); };
}

inline fc::CategoricalColumnPtr color_column() {
  return fc::categorical_column_with_vocabulary_list("color", {"red", "green", "blue"});
}
inline std::vector<fc::ColumnPtr> linear_columns() {
  return {fc::numeric_column("x1"), fc::numeric_column("x2"), color_column()};
}
inline std::vector<fc::DenseColumnPtr> dnn_columns() {
  return {fc::numeric_column("x1"), fc::numeric_column("x2"),
          fc::embedding_column(color_column(), 2)};
}

inline RunConfig config(const std::string& dir) { return est_test::quiet_config(dir); }

// Every canned classifier and regressor on its problem, with the metric it must reach after
// 300 steps of global batch 32 (the bounds leave room for the order of the sums under a
// strategy): accuracy above `bound`, or average_loss below it.
struct Case {
  const char* name;
  Task task;
  std::function<std::unique_ptr<Estimator>(RunConfig)> make;
  const char* metric;
  double bound;  // accuracy above it, or average_loss below it
};

// Checks what c's estimator reports after its 300 training steps: the step, and the metric
// beyond its bound.
inline void check_trained(const Case& c, const Metrics& metrics) {
  CHECK(metrics.at("global_step") == 300);
  if (std::string(c.metric) == "accuracy")
    CHECK(metrics.at("accuracy") > c.bound);
  else
    CHECK(metrics.at("average_loss") < c.bound);
}

inline std::vector<Case> cases() {
  return {
      {"LinearClassifier", Task::kBinary,
       [](RunConfig c) {
         return std::make_unique<LinearClassifier>(
             LinearClassifierOptions{.feature_columns = linear_columns(), .config = c});
       },
       "accuracy", 0.9},
      {"LinearClassifier(label_vocabulary)", Task::kStringBinary,
       [](RunConfig c) {
         return std::make_unique<LinearClassifier>(LinearClassifierOptions{
             .feature_columns = linear_columns(), .label_vocabulary = {"no", "yes"}, .config = c});
       },
       "accuracy", 0.9},
      {"LinearRegressor", Task::kRegression,
       [](RunConfig c) {
         return std::make_unique<LinearRegressor>(LinearRegressorOptions{
             .feature_columns = linear_columns(), .optimizer = "SGD", .config = c});
       },
       "average_loss", 0.1},
      {"DNNClassifier", Task::kThreeClasses,
       [](RunConfig c) {
         return std::make_unique<DNNClassifier>(
             DNNClassifierOptions{.hidden_units = {16, 8},
                                  .feature_columns = dnn_columns(),
                                  .n_classes = 3,
                                  .config = c});
       },
       "accuracy", 0.85},
      {"DNNRegressor", Task::kRegression,
       [](RunConfig c) {
         return std::make_unique<DNNRegressor>(DNNRegressorOptions{.hidden_units = {16},
                                                                   .feature_columns = dnn_columns(),
                                                                   .optimizer = "Adam",
                                                                   .config = c});
       },
       "average_loss", 1.0},
      {"DNNLinearCombinedClassifier", Task::kBinary,
       [](RunConfig c) {
         return std::make_unique<DNNLinearCombinedClassifier>(
             DNNLinearCombinedClassifierOptions{.linear_feature_columns = linear_columns(),
                                                .linear_optimizer = optim::ftrl(0.1),
                                                .dnn_feature_columns = dnn_columns(),
                                                .dnn_optimizer = optim::adagrad(0.05),
                                                .dnn_hidden_units = {8},
                                                .config = c});
       },
       "accuracy", 0.9},
      {"DNNLinearCombinedRegressor", Task::kRegression,
       [](RunConfig c) {
         return std::make_unique<DNNLinearCombinedRegressor>(
             DNNLinearCombinedRegressorOptions{.linear_feature_columns = linear_columns(),
                                               .linear_optimizer = optim::sgd(0.1),
                                               .dnn_feature_columns = dnn_columns(),
                                               .dnn_hidden_units = {8},
                                               .config = c});
       },
       "average_loss", 0.2},
      {"BaselineClassifier", Task::kBinary,
       [](RunConfig c) {
         return std::make_unique<BaselineClassifier>(BaselineClassifierOptions{.config = c});
       },
       "accuracy", 0.45},
      {"BaselineRegressor", Task::kRegression,
       [](RunConfig c) {
         return std::make_unique<BaselineRegressor>(BaselineRegressorOptions{.config = c});
       },
       "average_loss", 20.0},  // the target's variance is about 18
  };
}

}  // namespace canned_test
