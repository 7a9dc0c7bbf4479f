// A model_fn written as TF1 programs write it (the TF2 migration guide's `_model_fn`): the loss
// and `optimizer.minimize(...)` built in every mode, one EstimatorSpec(mode, ...) returned.
// TensorFlow ignores train_op outside TRAIN (tf.estimator.EstimatorSpec); so must est: evaluate
// and predict run it without an error and without changing a variable.
#include <doctest/doctest.h>

#include <cmath>

#include "estimator_test_util.h"

using namespace est_test;
using est::ModeKeys;

namespace {

// The migration guide's model_fn: Dense(1), mean squared error, Adagrad(0.05), the train op
// built whatever the mode. Predictions are returned too, so that PREDICT can use it.
est::EstimatorSpec migration_guide_model_fn(const est::Features& features, const Tensor& labels,
                                            ModeKeys mode, est::ModelContext& ctx) {
  using namespace est::nn;
  Tensor logits = dense(ctx, features.at("x"), {.units = 1});
  Tensor loss = labels.defined() ? mean_squared_error(labels, logits) : Tensor();
  est::nn::TrainOp train_op = est::optim::adagrad(0.05).minimize(loss, ctx);
  return est::EstimatorSpec(
      {.mode = mode, .predictions = {{"y", logits}}, .loss = loss, .train_op = train_op});
}

// Features only: PREDICT's usual input, where labels are undefined and so is the loss.
est::InputFn unlabelled_input_fn(int64_t examples) {
  return [=](ModeKeys, const est::InputContext*) {
    Tensor x = Tensor::from_vector(feature_values(examples), {examples, 2});
    return est::data::Dataset::from_tensor_slices(est::Features{{"x", x}}).batch(4);
  };
}

}  // namespace

TEST_CASE("minimize outside TRAIN returns an empty train op and checks nothing") {
  est::nn::VariableStore store;
  est::ModelContext ctx(store, est::nn::Mode::kEval);
  Tensor w = ctx.get_variable("w", {1}, est::DType::kF32, est::nn::zeros());
  (void)w;
  // An undefined loss and a loss that does not depend on a variable are both fine here ...
  CHECK_FALSE(est::optim::sgd(0.1).minimize(Tensor(), ctx).defined());
  CHECK_FALSE(est::optim::sgd(0.1).minimize(Tensor::scalar(1.0), ctx).defined());
  ctx.set_mode(est::nn::Mode::kPredict);
  CHECK_FALSE(est::optim::sgd(0.1).minimize(Tensor(), ctx).defined());
  // ... and still errors in TRAIN.
  ctx.set_mode(est::nn::Mode::kTrain);
  CHECK_THROWS_AS(est::optim::sgd(0.1).minimize(Tensor(), ctx), est::InvalidArgumentError);
}

TEST_CASE("a model_fn that builds train_op in every mode trains, evaluates and predicts") {
  TempDir dir;
  est::Estimator estimator(migration_guide_model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(64, 8, false, -1), {.steps = 20});
  REQUIRE(estimator.latest_checkpoint());
  Tensor kernel = estimator.get_variable_value("dense/kernel");
  Tensor bias = estimator.get_variable_value("dense/bias");
  // Adagrad's accumulators exist: the train op ran in TRAIN.
  CHECK(estimator.get_variable_value("global_step").item() == 20);
  auto names = estimator.get_variable_names();
  CHECK(std::find(names.begin(), names.end(), "dense/kernel/Adagrad") != names.end());

  auto predict_by_hand = [&](int64_t i) {
    std::vector<float> x = feature_values(i + 1);
    return x[2 * i] * kernel.at({0, 0}) + x[2 * i + 1] * kernel.at({1, 0}) + bias.at({0});
  };

  // EVAL: the train op is ignored; the loss is the mean squared error of the trained weights.
  est::Metrics metrics = estimator.evaluate(linear_input_fn(16, 16), {.steps = 1});
  std::vector<float> y = label_values(16);
  double squared = 0;
  for (int64_t i = 0; i < 16; ++i) squared += std::pow(predict_by_hand(i) - y[i], 2);
  CHECK(metrics.at("loss") == doctest::Approx(squared / 16).epsilon(1e-5));
  CHECK(metrics.at("global_step") == 20);

  // PREDICT, with labels in the input (loss defined) and without (loss undefined).
  std::vector<est::Predictions> labelled = estimator.predict(linear_input_fn(6, 3));
  std::vector<est::Predictions> unlabelled = estimator.predict(unlabelled_input_fn(6));
  REQUIRE(labelled.size() == 6);
  REQUIRE(unlabelled.size() == 6);
  for (int64_t i = 0; i < 6; ++i) {
    CHECK(labelled[i].at("y").item() == doctest::Approx(predict_by_hand(i)).epsilon(1e-6));
    CHECK(unlabelled[i].at("y").item() == doctest::Approx(predict_by_hand(i)).epsilon(1e-6));
  }

  // Nothing was updated by evaluate or predict: the checkpoint's values are the ones trained.
  CHECK(estimator.get_variable_value("global_step").item() == 20);
  CHECK(estimator.get_variable_value("dense/kernel").at({0, 0}) == kernel.at({0, 0}));

  // Training goes on from there with the same model_fn.
  estimator.train(linear_input_fn(64, 8, false, -1), {.steps = 5});
  CHECK(estimator.get_variable_value("global_step").item() == 25);
}
