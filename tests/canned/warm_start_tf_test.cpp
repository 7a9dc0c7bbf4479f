// A canned estimator warm-started from a TF1 job's checkpoint (TensorFlow's V2 format, written
// here by the test bundle writer with TF1's names): the variables by name and renamed
// (var_name_to_prev_var_name), and Ftrl's slots `<var>/Ftrl` (accumulator) and `<var>/Ftrl_1`
// (linear), so that the first step continues from the old accumulators; likewise Adagrad's
// `<var>/Adagrad` for a DNNRegressor; and a Scaffold.init_fn that reads one. Ftrl's step is
// checked by hand against TF's ApplyFtrl (tensorflow/core/kernels/training_ops.cc, l1 = l2 = 0,
// learning_rate_power -0.5): accum' = accum + g^2, linear' = linear + g - (sqrt(accum') -
// sqrt(accum)) / lr * w, w' = -linear' lr / sqrt(accum').
#include <doctest/doctest.h>

#include <cmath>

#include "checkpoint/checkpoint.h"
#include "tests/canned/canned_test_util.h"
#include "tests/checkpoint/tf_bundle_helpers.h"

using namespace canned_test;
using doctest::Approx;
using est_test::TempDir;

namespace {

struct FtrlState {
  double w, accum, linear;
};

// One Ftrl step of TF's ApplyFtrl from `s` with gradient g at learning rate lr.
FtrlState ftrl_step(FtrlState s, double g, double lr) {
  FtrlState next;
  next.accum = s.accum + g * g;
  next.linear = s.linear + g - (std::sqrt(next.accum) - std::sqrt(s.accum)) / lr * s.w;
  next.w = -next.linear * lr / std::sqrt(next.accum);
  return next;
}

// One batch: x0 = {1, 2}, labels {1, 3}.
InputFn one_batch() {
  return [](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(Features{{"x0", Tensor::from_vector<float>({1, 2})}},
                                             Tensor::from_vector<float>({1, 3}))
        .batch(2);
  };
}

}  // namespace

TEST_CASE("LinearRegressor warm-starts from a TF1 checkpoint and continues with Ftrl's slots") {
  const FtrlState weight{0.5, 2.0, -3.0}, bias{0.25, 1.5, 0.5};
  checkpoint::tf_test::ScratchCopy tf_dir("half_plus_three");  // a SavedModel directory
  checkpoint::tf_test::BundleBuilder tf;
  auto add = [&](const std::string& name, const FtrlState& s, const std::vector<int64_t>& shape) {
    tf.add_f32(name, shape, {static_cast<float>(s.w)});
    tf.add_f32(name + "/Ftrl", shape, {static_cast<float>(s.accum)});
    tf.add_f32(name + "/Ftrl_1", shape, {static_cast<float>(s.linear)});
  };
  add("linear/linear_model/x0/weights", weight, {1, 1});
  add("old/bias_weights", bias, {1});
  tf.write(tf_dir.prefix());

  TempDir dir;
  const std::string b = "linear/linear_model/bias_weights";
  LinearRegressor model(
      {.feature_columns = {fc::numeric_column("x0")},
       .config = config(dir.str()),
       .warm_start_from = checkpoint::WarmStartSettings{
           .ckpt_to_initialize_from = tf_dir.dir.string(),
           .vars_to_warm_start = {"linear/"},
           .var_name_to_prev_var_name = {{b, "old/bias_weights"},
                                         {b + "/Ftrl", "old/bias_weights/Ftrl"},
                                         {b + "/Ftrl_1", "old/bias_weights/Ftrl_1"}}}});
  // The loss is sum r^2 / 2 over the 2 examples, r = w x + b - y: dL/dw = sum r x, dL/db = sum r.
  model.train(one_batch(), {.steps = 1});
  const double r1 = weight.w * 1 + bias.w - 1, r2 = weight.w * 2 + bias.w - 3;
  const FtrlState w = ftrl_step(weight, r1 * 1 + r2 * 2, 0.2), c = ftrl_step(bias, r1 + r2, 0.2);
  auto value = [&](const std::string& name) { return model.get_variable_value(name).item(); };
  CHECK(value("linear/linear_model/x0/weights/Ftrl") == Approx(w.accum));
  CHECK(value("linear/linear_model/x0/weights/Ftrl_1") == Approx(w.linear));
  CHECK(value("linear/linear_model/x0/weights") == Approx(w.w));
  CHECK(value(b + "/Ftrl") == Approx(c.accum));
  CHECK(value(b + "/Ftrl_1") == Approx(c.linear));
  CHECK(value(b) == Approx(c.w));
}

TEST_CASE("DNNRegressor warm-starts from a TF1 checkpoint and continues with Adagrad's slots") {
  // TF1's names: dnn/hiddenlayer_0/kernel and its accumulator dnn/hiddenlayer_0/kernel/Adagrad.
  const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> weights = {
      {"dnn/hiddenlayer_0/kernel", {{1, 2}, {0.5f, 0.3f}}},
      {"dnn/hiddenlayer_0/bias", {{2}, {0.1f, 0.2f}}},
      {"dnn/logits/kernel", {{2, 1}, {0.4f, -0.2f}}},
      {"dnn/logits/bias", {{1}, {0.05f}}}};
  checkpoint::tf_test::ScratchCopy tf_dir("half_plus_three");
  checkpoint::tf_test::BundleBuilder tf;
  std::map<std::string, std::vector<float>> accumulators;
  float next = 0.5f;
  for (const auto& [name, value] : weights) {
    tf.add_f32(name, value.first, value.second);
    std::vector<float>& accum = accumulators[name];
    for (size_t i = 0; i < value.second.size(); ++i) accum.push_back(next += 0.25f);
    tf.add_f32(name + "/Adagrad", value.first, accum);
  }
  tf.write(tf_dir.prefix());

  TempDir dir;
  DNNRegressor model(
      {.hidden_units = {2},
       .feature_columns = {fc::numeric_column("x0")},
       .config = config(dir.str()),
       .warm_start_from = checkpoint::WarmStartSettings{.ckpt_to_initialize_from = tf_dir.prefix(),
                                                        .vars_to_warm_start = {"dnn/"}}});
  model.train(one_batch(), {.steps = 1});
  // Adagrad (training_ops.cc, ApplyAdagrad): accum' = accum + g^2, w' = w - lr g / sqrt(accum'),
  // lr 0.05: so accum' - accum = ((w - w') sqrt(accum') / lr)^2 holds only if the step started
  // from the checkpoint's accumulator.
  for (const auto& [name, value] : weights) {
    CAPTURE(name);
    std::vector<float> w1 = model.get_variable_value(name).to_vector<float>();
    std::vector<float> a1 = model.get_variable_value(name + "/Adagrad").to_vector<float>();
    for (size_t i = 0; i < w1.size(); ++i) {
      const double g = (value.second[i] - w1[i]) * std::sqrt(a1[i]) / 0.05;
      CHECK(a1[i] - accumulators[name][i] == Approx(g * g).epsilon(1e-4));
    }
  }
}

TEST_CASE("Scaffold.init_fn assigns pretrained weights from a TF checkpoint (open_checkpoint)") {
  checkpoint::tf_test::ScratchCopy tf_dir("half_plus_three");
  checkpoint::tf_test::BundleBuilder tf;
  tf.add_f32("dense/kernel", {2, 1}, {2, -1});
  tf.add_f32("dense/bias", {1}, {0.5f});
  tf.write(tf_dir.prefix());
  const std::string prefix = tf_dir.prefix();
  ModelFn model_fn = [prefix](const Features& features, const Tensor& labels, ModeKeys mode,
                              ModelContext& ctx) {
    Tensor prediction = nn::dense(ctx, features.at("x"), {.units = 1});
    Tensor loss = nn::mean_squared_error(labels, prediction);
    Scaffold scaffold{.init_fn = [prefix](Session& session) {
      std::unique_ptr<checkpoint::CheckpointSource> pretrained =
          checkpoint::open_checkpoint(prefix);
      for (const std::string& name : pretrained->names())
        session.store().assign(name, pretrained->read(name));
    }};
    return EstimatorSpec({.mode = mode,
                          .loss = loss,
                          .train_op = optim::sgd(0.1).minimize(loss, ctx),
                          .scaffold = scaffold});
  };
  TempDir dir;
  Estimator estimator(model_fn, config(dir.str()));
  estimator.train(est_test::linear_input_fn(64, 8, false, -1), {.steps = 1});
  // The step-0 checkpoint holds what init_fn assigned, before any update.
  checkpoint::TensorBundle start = checkpoint::load(dir.str() + "/model.ckpt-0.h5");
  REQUIRE(start.find("dense/kernel") != nullptr);
  CHECK(start.find("dense/kernel")->value.to_vector<float>() == std::vector<float>{2, -1});
  CHECK(start.find("dense/bias")->value.to_vector<float>() == std::vector<float>{0.5f});
}
