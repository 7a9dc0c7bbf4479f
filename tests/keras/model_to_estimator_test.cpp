// The Keras bridges: model_to_estimator (evaluate as model.evaluate, train continuing from the
// fitted weights under Keras's names, predictions keyed by the output layer, its errors), and a
// Keras model and its layers called inside a hand-written model_fn.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>

#include "estimator/estimator.h"
#include "keras/keras.h"
#include "nn/nn.h"
#include "ops/error.h"

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;

namespace {

// 8 features, 3 classes: the argmax of three fixed projections.
data::Dataset problem(int64_t n, uint32_t seed, int64_t batch) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * 8);
  std::vector<int64_t> y(n);
  for (auto& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int j = 0; j < 8; ++j) s[j % 3] += x[i * 8 + j] * (j < 4 ? 1.f : -0.5f);
    y[i] = std::max_element(s, s + 3) - s;
  }
  return data::Dataset::from_tensor_slices(data::Features{{"x", Tensor::from_vector(x, {n, 8})}},
                                           Tensor::from_vector(y, {n}))
      .batch(batch);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "keras_m2e_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

InputFn input_fn(data::Dataset dataset) {
  return [dataset](ModeKeys, const InputContext*) { return dataset; };
}

std::unique_ptr<K::Sequential> compiled_classifier(const std::string& model_dir) {
  auto model = std::make_unique<K::Sequential>(std::vector<K::LayerPtr>{
      L::InputLayer({.shape = {8}}), L::Dense({.units = 16, .activation = "relu"}),
      L::Dense({.units = 3})});
  model->config().model_dir = model_dir;
  model->config().tf_random_seed = 3;
  model->compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.1}),
                  .loss = K::losses::SparseCategoricalCrossentropy(true),
                  .metrics = {"accuracy"}});
  return model;
}

}  // namespace

TEST_CASE("model_to_estimator: evaluate equals model.evaluate; train continues; Keras names") {
  K::clear_session();
  TempDir keras_dir, est_dir;
  auto model = compiled_classifier(keras_dir.path.string());
  model->fit(problem(320, 1, 32), {.verbose = 0});
  // 100 rows in batches of 32: a partial last batch, weighted by its size in both.
  data::Dataset eval_data = problem(100, 2, 32);
  auto keras_metrics = model->evaluate(eval_data, {.verbose = 0});

  Estimator estimator = K::model_to_estimator(*model, {.model_dir = est_dir.path.string()});
  CHECK(estimator.model_dir() == est_dir.path.string());
  Metrics before = estimator.evaluate(input_fn(eval_data));
  CHECK(before.at("loss") == doctest::Approx(keras_metrics.at("loss")).epsilon(1e-6));
  CHECK(before.at("accuracy") == doctest::Approx(keras_metrics.at("accuracy")).epsilon(1e-6));
  CHECK(before.at("global_step") == 0);

  // The variables under Keras's names ('saver' format), holding the fitted weights.
  auto names = estimator.get_variable_names();
  for (const char* name : {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"})
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  std::vector<Tensor> weights = model->get_weights();
  CHECK(estimator.get_variable_value("dense/kernel").to_vector<float>() ==
        weights[0].to_vector<float>());
  CHECK(estimator.get_variable_value("dense_1/bias").to_vector<float>() ==
        weights[3].to_vector<float>());

  // Training continues from there and lowers the loss.
  estimator.train(input_fn(problem(320, 1, 32).repeat()), {.steps = 100});
  Metrics after = estimator.evaluate(input_fn(eval_data));
  CHECK(after.at("global_step") == 100);
  CHECK(after.at("loss") < before.at("loss"));
  CHECK(estimator.get_variable_value("dense/kernel").to_vector<float>() !=
        weights[0].to_vector<float>());
  // The Keras model itself is untouched.
  CHECK(model->get_weights()[0].to_vector<float>() == weights[0].to_vector<float>());

  // Predictions keyed by the output layer's name: the logits of each example.
  auto predictions = estimator.predict(input_fn(problem(5, 3, 5)));
  REQUIRE(predictions.size() == 5);
  CHECK(predictions[0].size() == 1);
  CHECK(predictions[0].at("dense_1").shape() == ops::Shape{3});
}

TEST_CASE("model_to_estimator: a functional model's inputs by name, metric_names_map, errors") {
  K::clear_session();
  TempDir keras_dir, est_dir;
  K::KerasTensor x = K::Input({8}, "x");
  K::KerasTensor out = (*L::Dense({.units = 3, .name = "logits"}))(x);
  K::Model model(x, out);
  model.config().model_dir = keras_dir.path.string();
  CHECK_THROWS_WITH_AS(K::model_to_estimator(model), doctest::Contains("has not been compiled yet"),
                       FailedPreconditionError);
  model.compile({.optimizer = "sgd",
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  CHECK_THROWS_WITH_AS(K::model_to_estimator(model, {.checkpoint_format = "object"}),
                       doctest::Contains("must be one of \"checkpoint\" or \"saver\""),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(K::model_to_estimator(model, {.metric_names_map = {{"acc", "my_accuracy"}}}),
                       doctest::Contains("'accuracy'] do not exist in the `metric_names_map`"),
                       InvalidArgumentError);

  Estimator estimator = K::model_to_estimator(
      model,
      {.model_dir = est_dir.path.string(), .metric_names_map = {{"accuracy", "my_accuracy"}}});
  Metrics metrics = estimator.evaluate(input_fn(problem(64, 4, 32)));
  CHECK(metrics.count("my_accuracy") == 1);
  CHECK(metrics.count("accuracy") == 0);
  CHECK(estimator.get_variable_names() ==
        std::vector<std::string>{"global_step", "logits/bias", "logits/kernel"});
  // A feature named other than the Input, beside another: the missing key is named.
  auto two = data::Dataset::from_tensor_slices(
                 data::Features{{"a", Tensor::zeros({4, 8})}, {"b", Tensor::zeros({4, 8})}},
                 Tensor::zeros({4}, ops::DType::kI64))
                 .batch(4);
  CHECK_THROWS_WITH(estimator.evaluate(input_fn(two)), doctest::Contains("missed keys: ['x']"));
}

TEST_CASE("a Keras model and a Keras layer called inside a hand-written model_fn") {
  K::clear_session();
  TempDir dir;
  // The Keras model as the body, a Keras layer as the head, est's loss and optimizer.
  K::Sequential body(
      {L::InputLayer({.shape = {8}}), L::Dense({.units = 16, .activation = "relu"})});
  K::LayerPtr head = L::Dense({.units = 3, .name = "head"});
  auto model_fn = [&](const Features& f, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
    Tensor h = body.call(ctx, {f.at("x")})[0];
    Tensor logits = head->call(ctx, {h});
    if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"logits", logits}});
    Tensor loss =
        nn::sparse_softmax_cross_entropy(labels, logits, 1.0, nn::Reduction::kSumOverBatchSize);
    if (mode == ModeKeys::kEval) return EstimatorSpec::eval(loss);
    return EstimatorSpec::train(loss, optim::sgd(0.1).minimize(loss, ctx));
  };
  Estimator estimator(model_fn, RunConfig{.model_dir = dir.path.string(), .tf_random_seed = 7});
  estimator.train(input_fn(problem(320, 1, 32).repeat()), {.steps = 1});
  double first = estimator.evaluate(input_fn(problem(100, 2, 50))).at("loss");
  estimator.train(input_fn(problem(320, 1, 32).repeat()), {.steps = 100});
  double last = estimator.evaluate(input_fn(problem(100, 2, 50))).at("loss");
  CHECK(last < first);
  CHECK(estimator.get_variable_names() == std::vector<std::string>{"dense/bias", "dense/kernel",
                                                                   "global_step", "head/bias",
                                                                   "head/kernel"});
  CHECK(estimator.get_variable_value("dense/kernel").shape() == ops::Shape{8, 16});
}
