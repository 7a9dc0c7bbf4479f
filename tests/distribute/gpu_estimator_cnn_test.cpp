// The Estimator end to end on /gpu:0 with the tutorial CNN (examples/cnn_model.h) on
// Fashion-MNIST (the GPU suite: exits 77 without a GPU): 300 steps of SGD 0.05 on batches of
// 64, the same input order, seed and model on /gpu:0 and on /cpu:0; the evaluation loss on the
// first 2000 test images must agree within 2 % (relative: float32 convolutions and sums in
// another order over 300 steps of a non-convex model), and both must have learnt (loss below
// 1.0, from about 2.3 untrained). Skipped with the reason when the data set is not installed
// (the Debian package dataset-fashion-mnist, scripts/setup.sh).
#include <doctest/doctest.h>

#include <filesystem>

#include "data/idx.h"
#include "estimator/estimator.h"
#include "examples/cnn_model.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/skip.h"

using namespace est;

namespace {

constexpr int64_t kSteps = 300;
constexpr double kLossTolerance = 2e-2;

data::Dataset cnn_input_fn(ModeKeys mode, const InputContext*) {
  bool training = mode == ModeKeys::kTrain;
  data::Dataset ds = data::fashion_mnist(training ? "train" : "test");
  if (!training) ds = ds.take(2000);
  ds = ds.map(data::scale);
  if (training) ds = ds.shuffle(10000, 42).repeat();
  return ds.batch(training ? 64 : 500);
}

EstimatorSpec cnn_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                           ModelContext& ctx) {
  Tensor logits = examples::tutorial_cnn(ctx, features.at("image"));
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  if (mode == ModeKeys::kEval)
    return EstimatorSpec::eval(loss,
                               {{"accuracy", metrics::accuracy(labels, ops::argmax(logits, 1))}});
  return EstimatorSpec::train(loss, optim::sgd(0.05).minimize(loss, ctx));
}

}  // namespace

TEST_CASE("gpu estimator: the tutorial CNN on Fashion-MNIST on /gpu:0 reaches the CPU's loss") {
  if (!std::filesystem::exists(std::string(data::kFashionMnistDirectory) +
                               "/train-images-idx3-ubyte.gz"))
    return est::testing::skip(std::string("dataset-fashion-mnist is not installed (no ") +
                              data::kFashionMnistDirectory + "/train-images-idx3-ubyte.gz)");
  using namespace est_test;
  TempDir gpu_dir, cpu_dir;
  RunConfig gpu_config = quiet_config(gpu_dir.str());
  gpu_config.device = "/gpu:0";
  RunConfig cpu_config = quiet_config(cpu_dir.str());
  cpu_config.device = "/cpu:0";
  Estimator on_gpu(cnn_model_fn, gpu_config);
  Estimator on_cpu(cnn_model_fn, cpu_config);
  on_gpu.train(cnn_input_fn, {.steps = kSteps});
  on_cpu.train(cnn_input_fn, {.steps = kSteps});
  Metrics gpu = on_gpu.evaluate(cnn_input_fn);
  Metrics cpu = on_cpu.evaluate(cnn_input_fn);
  MESSAGE("eval loss after " << kSteps << " steps: /gpu:0 " << gpu.at("loss") << ", /cpu:0 "
                             << cpu.at("loss") << "; accuracy " << gpu.at("accuracy") << " vs "
                             << cpu.at("accuracy"));
  CHECK(gpu.at("global_step") == kSteps);
  CHECK(cpu.at("loss") < 1.0);
  CHECK(gpu.at("loss") == doctest::Approx(cpu.at("loss")).epsilon(kLossTolerance));
  CHECK(gpu.at("accuracy") == doctest::Approx(cpu.at("accuracy")).epsilon(kLossTolerance));
}
