// The Estimator's loss scaling under a 2-replica MirroredStrategy against TensorFlow's numbers
// worked out by hand (tf.compat.v1 Optimizer._scale_loss and get_loss_reduction): each
// replica's gradients are divided by num_replicas_in_sync unless the last loss reduction
// recorded when minimize ran is SUM, so the multi-worker tutorial's loss (reduction NONE, then
// reduce_sum(losses) * (1 / global_batch)) is divided as well. The reported loss is the
// replicas' mean when the gradients were divided, else their sum; evaluation reports the mean.
//
// The model is one dense layer from zeros, so the first step's logits are 0 and softmax gives
// p = 1/3 for each of the 3 classes: d CE_i / d logits = p - onehot(y_i), each CE_i = ln 3.
// Rows (x, y): replica 0 gets ([1, 0], 0), ([0, 1], 1); replica 1 gets ([1, 1], 2), ([2, 0], 0).
// Summed over the global batch G = 4:
//   sum_i x_i^T (p - onehot(y_i)) = [[-5/3, 4/3, 1/3], [2/3, -1/3, -1/3]]   (kernel [2, 3])
//   sum_i (p - onehot(y_i))       = [-2/3, 1/3, 1/3]                         (bias [3])
// With the tutorial's loss sum_{i in replica} CE_i / G, TF's update with SGD(1) is
// -(1/2) (1/G) times those sums; without the division it would be twice that.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "estimator_test_util.h"
#include "loss_recorder.h"

using namespace est;
using namespace est_test;

namespace {

constexpr int64_t kGlobalBatch = 4;
const std::vector<double> kKernelGradientSum = {-5.0 / 3, 4.0 / 3,  1.0 / 3,
                                                2.0 / 3,  -1.0 / 3, -1.0 / 3};  // [2, 3]
const std::vector<double> kBiasGradientSum = {-2.0 / 3, 1.0 / 3, 1.0 / 3};

// Per-replica batches of 2 rows: one training step on 2 replicas.
InputFn input_fn() {
  return [](ModeKeys, const InputContext*) {
    Tensor x = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1, 2, 0}, {4, 2});
    Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0});
    return data::Dataset::from_tensor_slices(Features{{"x", x}}, y).batch(2);
  };
}

// params "loss": "tutorial" (NONE, reduce_sum, / global batch), "sum" (SUM, / global batch),
// "sum_then_mean" (as "sum", then a mean loss computed after minimize, which TF ignores for
// the scaling), "mean" (the default reduction: the replica's mean).
EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                       ModelContext& ctx) {
  std::string kind = params(ctx).get_string("loss");
  Tensor logits = nn::dense(ctx, features.at("x"), {.units = 3, .kernel_initializer = nn::zeros()});
  Tensor loss;
  if (kind == "tutorial") {
    // loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
    //     reduction=tf.keras.losses.Reduction.NONE)(labels, logits)
    // loss = tf.reduce_sum(loss) * (1. / global_batch_size)
    loss = nn::sparse_softmax_cross_entropy(labels, logits, 1.0, nn::Reduction::kNone);
    loss = ops::mul(ops::sum(loss), 1.0 / kGlobalBatch);
  } else if (kind == "mean") {
    loss = nn::sparse_softmax_cross_entropy(labels, logits);
  } else {
    loss = nn::sparse_softmax_cross_entropy(labels, logits, 1.0, nn::Reduction::kSum);
    loss = ops::mul(loss, 1.0 / kGlobalBatch);
  }
  if (mode == ModeKeys::kEval) return EstimatorSpec::eval(loss);
  nn::TrainOp train_op = optim::sgd(1.0).minimize(loss, ctx);
  if (kind == "sum_then_mean") nn::mean_squared_error(logits, logits);  // recorded, too late
  return EstimatorSpec::train(loss, train_op);
}

RunConfig mirrored_config(const std::string& dir) {
  RunConfig config = quiet_config(dir);
  auto strategy =
      std::make_shared<distribute::MirroredStrategy>(std::vector<std::string>{"/cpu:0", "/cpu:1"});
  config.train_distribute = strategy;
  config.eval_distribute = strategy;
  return config;
}

// One step from zeros with SGD(1): the variables are -gradient_factor times the sums above,
// and the loss hooks saw is `reported_loss`.
void check_one_step(const std::string& loss, double gradient_factor, double reported_loss) {
  CAPTURE(loss);
  TempDir dir;
  Estimator estimator(model_fn, mirrored_config(dir.str()), Params{{"loss", loss}});
  auto losses = std::make_shared<std::vector<double>>();
  estimator.train(input_fn(), {.hooks = {std::make_shared<LossRecorder>(losses)}});
  CHECK(estimator.get_variable_value("global_step").item() == 1);
  std::vector<double> kernel = estimator.get_variable_value("dense/kernel").to_vector<double>();
  std::vector<double> bias = estimator.get_variable_value("dense/bias").to_vector<double>();
  REQUIRE(kernel.size() == kKernelGradientSum.size());
  REQUIRE(bias.size() == kBiasGradientSum.size());
  for (size_t i = 0; i < kernel.size(); ++i)
    CHECK(kernel[i] == doctest::Approx(-gradient_factor * kKernelGradientSum[i]));
  for (size_t i = 0; i < bias.size(); ++i)
    CHECK(bias[i] == doctest::Approx(-gradient_factor * kBiasGradientSum[i]));
  REQUIRE(losses->size() == 1);
  CHECK(losses->front() == doctest::Approx(reported_loss));
}

}  // namespace

TEST_CASE("loss scaling: the multi-worker tutorial's NONE-then-reduce_sum loss is divided") {
  // Each replica: loss = (CE_a + CE_b) / 4 = ln 3 / 2, divided by 2 replicas before the sum:
  // update -(1/2)(1/4) x sums; reported: the replicas' mean, ln 3 / 2.
  check_one_step("tutorial", 1.0 / 8, std::log(3.0) / 2);
}

TEST_CASE("loss scaling: a SUM loss is not divided, and its replicas' losses are summed") {
  // The same per-replica loss, recorded as SUM: -(1/4) x sums; reported: the sum, ln 3.
  check_one_step("sum", 1.0 / 4, std::log(3.0));
  // The reduction that counts is the one recorded when minimize ran.
  check_one_step("sum_then_mean", 1.0 / 4, std::log(3.0));
}

TEST_CASE("loss scaling: a mean loss is divided, like one replica on the global batch") {
  // Each replica: loss = (CE_a + CE_b) / 2 = ln 3, divided by 2: -(1/2)(1/2) x sums, the
  // global batch's mean; reported: the replicas' mean, ln 3.
  check_one_step("mean", 1.0 / 4, std::log(3.0));
}

TEST_CASE("loss scaling: evaluation reports the replicas' mean loss, even for a SUM loss") {
  // No checkpoint: the zero-initialized model, each replica's loss (CE_a + CE_b) / 4 = ln 3 / 2.
  // TF's loss metric is a mean over every replica's loss, so ln 3 / 2, not the sum ln 3.
  for (std::string loss : {"sum", "tutorial"}) {
    CAPTURE(loss);
    TempDir dir;
    Estimator estimator(model_fn, mirrored_config(dir.str()), Params{{"loss", loss}});
    CHECK(estimator.evaluate(input_fn()).at("loss") == doctest::Approx(std::log(3.0) / 2));
  }
}
