// TensorFlow's "Multi-worker training with Estimator" tutorial in C++: mnist_estimator's input_fn
// and CNN on Fashion-MNIST (examples/cnn_estimator.h), in a model_fn whose loss is written as the
// tutorial writes it, RunConfig{.train_distribute = MultiWorkerMirroredStrategy::from_env()},
// and train_and_evaluate. Every process reads its role from TF_CONFIG:
//
//   export EST_JOB_TOKEN=<the same secret for every task>
//   TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
//               "task": {"type": "worker", "index": 0}}' build/examples/multi_worker &
//   TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
//               "task": {"type": "worker", "index": 1}}' build/examples/multi_worker
//
// (or build/tools/est-launch -n 2 --evaluator build/examples/multi_worker, which does the same
// for you). Each worker reads its shard of the training set (InputContext) with the per-worker
// share of the global batch, so N workers take the same steps as one process with the global
// batch; the chief (worker 0 without a chief) writes checkpoints and summaries into
// --model_dir, which every task must see; the evaluator, or the chief when there is none,
// evaluates. Without TF_CONFIG it trains alone, like mnist_estimator.
//
//   multi_worker [--model_dir DIR] [--max_steps N] [--learning_rate LR] [--batch_size B]
//                [--save_checkpoints_steps N]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include <est/est.h>

#include "examples/cnn_estimator.h"

namespace {

est::EstimatorSpec model_fn(const est::Features& features, const est::Tensor& labels,
                            est::ModeKeys mode, est::ModelContext& ctx) {
  using namespace est::nn;
  est::Tensor logits = examples::tutorial_cnn(ctx, features.at("image"));  // [batch, 10]
  est::Tensor classes = argmax(logits, 1);                                 // [batch]
  if (mode == est::ModeKeys::kPredict)
    return est::EstimatorSpec::predict({{"logits", logits}, {"classes", classes}});
  // The tutorial's loss: per-example losses (reduction NONE), summed, times 1 / batch size.
  // As in TensorFlow, a strategy still divides it by num_replicas_in_sync (the last reduction
  // recorded is not SUM), so the update is that of the mean over the global batch.
  int64_t batch = labels.dim(0);
  est::Tensor loss = est::ops::mul(
      est::ops::sum(sparse_softmax_cross_entropy(labels, logits, 1.0, Reduction::kNone)),
      1.0 / static_cast<double>(batch));
  if (mode == est::ModeKeys::kEval)
    return est::EstimatorSpec::eval(loss, {{"accuracy", est::metrics::accuracy(labels, classes)}});
  double learning_rate = est::params(ctx).get_double("learning_rate");
  return est::EstimatorSpec::train(loss, est::optim::sgd(learning_rate).minimize(loss, ctx));
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir = "/tmp/multiworker";
  int64_t max_steps = 5000, save_checkpoints_steps = 1000;
  int64_t batch_size = 64;
  double learning_rate = 0.05;
  CLI::App app("Multi-worker training of the tutorial CNN on Fashion-MNIST (TF_CONFIG).",
               "multi_worker");
  app.add_option("--model_dir", model_dir, "checkpoints and summaries, shared by every task")
      ->capture_default_str();
  app.add_option("--max_steps", max_steps, "train until this global step")->capture_default_str();
  app.add_option("--learning_rate", learning_rate, "SGD learning rate")->capture_default_str();
  app.add_option("--batch_size", batch_size, "global batch, split over every replica")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--save_checkpoints_steps", save_checkpoints_steps, "checkpoint cadence")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto strategy = est::distribute::MultiWorkerMirroredStrategy::from_env();
  est::RunConfig config{.model_dir = model_dir,
                        .tf_random_seed = 42,
                        .save_checkpoints_steps = save_checkpoints_steps,
                        .save_checkpoints_secs = std::nullopt,
                        .train_distribute = strategy};
  est::Estimator classifier(model_fn, config, {{"learning_rate", learning_rate}});
  // Each worker reads its shard of the training set, batched per replica.
  auto input_fn = [batch_size](est::ModeKeys mode, const est::InputContext* ctx) {
    return examples::fashion_mnist_input_fn(mode, ctx, batch_size);
  };
  auto [metrics, exports] = est::train_and_evaluate(
      classifier, {.input_fn = input_fn, .max_steps = max_steps},
      {.input_fn = input_fn, .steps = std::nullopt, .start_delay_secs = 0, .throttle_secs = 0});
  if (!metrics.empty())
    fmt::print("Test accuracy: {:.4f} (loss {:.4f}) at global step {}\n", metrics.at("accuracy"),
               metrics.at("loss"), static_cast<int64_t>(metrics.at("global_step")));
  else
    fmt::print(
        "Training done at global step {} ({} {}); the chief or the evaluator reports the "
        "accuracy\n",
        max_steps, classifier.config().task_type, classifier.config().task_id);
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
