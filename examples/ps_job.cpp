// A TensorFlow 1 parameter-server job in C++: the tutorial's CNN on Fashion-MNIST
// (mnist_estimator's model_fn, examples/cnn_estimator.h), one `ps` task and three workers, each
// process reading its role from TF_CONFIG, and no train_distribute: as in TF1, a TF_CONFIG that
// lists ps tasks makes the Estimator train against them (ParameterServerStrategy,
// replica_device_setter's placement).
//
//   export EST_JOB_TOKEN=$(build/tools/est-launch --generate-token)
//   CLUSTER='"cluster": {"chief": ["localhost:2220"], "worker": ["localhost:2221",
//            "localhost:2222"], "ps": ["localhost:2230"]}'
//   TF_CONFIG="{$CLUSTER, \"task\": {\"type\": \"ps\", \"index\": 0}}" build/examples/ps_job &
//   TF_CONFIG="{$CLUSTER, \"task\": {\"type\": \"worker\", \"index\": 0}}" build/examples/ps_job &
//   TF_CONFIG="{$CLUSTER, \"task\": {\"type\": \"worker\", \"index\": 1}}" build/examples/ps_job &
//   TF_CONFIG="{$CLUSTER, \"task\": {\"type\": \"chief\", \"index\": 0}}" build/examples/ps_job
//
// (or build/tools/est-launch -n 3 --ps 1 build/examples/ps_job; under SLURM, `srun --ntasks=4
// est-launch --slurm --ps 1 -- ps_job`; on Kubernetes, examples/k8s/ps_job.yaml). The ps task
// holds the variables and applies the updates; the three training tasks (the chief and two
// workers) each read their own shard of the training set and step asynchronously, one round
// trip to the ps task per step; the chief initializes the variables, writes the checkpoints (the
// same files as every other strategy's) and evaluates the last one. When training ends the ps
// task exits by itself. Without TF_CONFIG it trains alone.
//
//   ps_job [--model_dir DIR] [--max_steps N] [--learning_rate LR] [--batch_size B]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <string>

#include <est/est.h>

#include "examples/cnn_estimator.h"

namespace {

constexpr int64_t kEvalBatchSize = 1000;
constexpr uint64_t kShuffleSeed = 42;
int64_t g_batch_size = 64;  // each worker's batch, set from --batch_size before training starts

est::data::Dataset input_fn(est::ModeKeys mode, const est::InputContext* ctx) {
  bool training = mode == est::ModeKeys::kTrain;
  auto ds = est::data::fashion_mnist(training ? "train" : "test");
  if (ctx && training)  // this worker's shard (TF's ParameterServerStrategy gives one each)
    ds = ds.shard(ctx->num_input_pipelines, ctx->input_pipeline_id);
  ds = ds.map(est::data::scale).cache();
  if (training) ds = ds.shuffle(10000, kShuffleSeed).repeat();
  return ds.batch(training ? g_batch_size : kEvalBatchSize).prefetch(2);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir = "/tmp/ps_job";
  int64_t max_steps = 5000;
  double learning_rate = 0.05;
  CLI::App app("A TF1-style parameter-server job: the tutorial CNN on Fashion-MNIST.", "ps_job");
  app.add_option("--model_dir", model_dir, "checkpoints and summaries, shared by every task")
      ->capture_default_str();
  app.add_option("--max_steps", max_steps, "train until this global step (every worker's steps)")
      ->capture_default_str();
  app.add_option("--learning_rate", learning_rate, "SGD learning rate")->capture_default_str();
  app.add_option("--batch_size", g_batch_size, "each worker's batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  est::RunConfig config{.model_dir = model_dir,
                        .tf_random_seed = 42,
                        .save_checkpoints_steps = 1000,
                        .save_checkpoints_secs = std::nullopt};
  est::Estimator classifier(examples::cnn_model_fn, config, {{"learning_rate", learning_rate}});
  auto [metrics, exports] = est::train_and_evaluate(
      classifier, {.input_fn = input_fn, .max_steps = max_steps},
      {.input_fn = input_fn, .steps = std::nullopt, .start_delay_secs = 0, .throttle_secs = 600});
  if (!metrics.empty())
    fmt::print("Test accuracy: {:.4f} (loss {:.4f}) at global step {}\n", metrics.at("accuracy"),
               metrics.at("loss"), static_cast<int64_t>(metrics.at("global_step")));
  else
    fmt::print("{} {} done\n", classifier.config().task_type, classifier.config().task_id);
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
