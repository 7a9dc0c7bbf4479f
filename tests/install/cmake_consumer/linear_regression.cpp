// A tiny est program for the CMake consumer test: TensorFlow's migration-guide linear regression
// (examples/linear_regression.cpp's model), trained through the Estimator on three examples with
// batch 1 until the input ends, into the model directory given as the only argument. It prints
// the evaluation's loss and global step; the test checks the checkpoint it leaves.
#include <cstdio>
#include <vector>

#include <est/est.h>

namespace {

est::InputFn make_input_fn(std::vector<float> features, std::vector<float> labels) {
  return [features, labels](est::ModeKeys, const est::InputContext*) {
    auto n = static_cast<int64_t>(labels.size());
    est::Tensor x = est::Tensor::from_vector(features, {n, 2});  // [3, 2]
    est::Tensor y = est::Tensor::from_vector(labels, {n, 1});    // [3, 1]
    return est::data::Dataset::from_tensor_slices(est::Features{{"x", x}}, y).batch(1);
  };
}

est::EstimatorSpec model_fn(const est::Features& features, const est::Tensor& labels,
                            est::ModeKeys mode, est::ModelContext& ctx) {
  est::Tensor logits = est::nn::dense(ctx, features.at("x"), {.units = 1});  // [batch, 1]
  if (mode == est::ModeKeys::kPredict) return est::EstimatorSpec::predict({{"logits", logits}});
  est::Tensor loss = est::nn::mean_squared_error(labels, logits);
  if (mode == est::ModeKeys::kEval) return est::EstimatorSpec::eval(loss);
  return est::EstimatorSpec::train(loss, est::optim::adagrad(0.05).minimize(loss, ctx));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: linear_regression MODEL_DIR\n");
    return 2;
  }
  auto input_fn = make_input_fn({1., 1.5, 2., 2.5, 3., 3.5}, {0.3, 0.5, 0.7});
  est::Estimator estimator(model_fn, est::RunConfig{.model_dir = argv[1]});
  estimator.train(input_fn);
  est::Metrics metrics = estimator.evaluate(input_fn);
  std::printf("loss = %f, global_step = %lld\n", metrics.at("loss"),
              static_cast<long long>(metrics.at("global_step")));
  return 0;
}
