// A task of the Fashion-MNIST parameter-server convergence test (ps_convergence_test.cpp):
// a small MLP (784-128-10, plain SGD), train_and_evaluate with its role from TF_CONFIG (the
// chief and workers train asynchronously against the ps tasks, each on its own shard; ps tasks
// serve), or alone without TF_CONFIG, the one-process reference. The chief (or the lone
// process) prints the final evaluation on the 10000 test images:
//   "eval: loss=... accuracy=... global_step=..."
// An MLP rather than the tutorial's CNN so that the job and its reference run in seconds on two
// busy cores; the question asked is the strategy's (do asynchronous updates reach the same
// accuracy after the same number of examples?), which does not depend on the layers.
//
//   ps_fashion_task --model_dir D --max_steps N --batch B --learning_rate LR
// Exit status: 0 when the role ends, 1 with "error: <message>" on an est::Error.
#include <CLI/CLI.hpp>
#include <cstdio>

#include <est/est.h>

namespace {

constexpr uint64_t kShuffleSeed = 42;
constexpr int64_t kEvalBatch = 1000;

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir;
  int64_t max_steps = 2000, batch = 64;
  double learning_rate = 0.1, decay_rate = 1.0;
  int64_t decay_steps = 1000;
  CLI::App app("a task of est's Fashion-MNIST parameter-server convergence test",
               "ps_fashion_task");
  app.add_option("--model_dir", model_dir)->required();
  app.add_option("--max_steps", max_steps, "the job's global steps (every worker's)");
  app.add_option("--batch", batch, "each training task's batch");
  app.add_option("--learning_rate", learning_rate);
  app.add_option("--decay_rate", decay_rate, "exponential decay, per --decay_steps steps");
  app.add_option("--decay_steps", decay_steps);
  CLI11_PARSE(app, argc, argv);

  auto input_fn = [batch](est::ModeKeys mode, const est::InputContext* ctx) {
    bool training = mode == est::ModeKeys::kTrain;
    auto ds = est::data::fashion_mnist(training ? "train" : "test");
    if (ctx && training) ds = ds.shard(ctx->num_input_pipelines, ctx->input_pipeline_id);
    ds = ds.map(est::data::scale).cache();
    if (training)
      ds = ds.shuffle(10000, kShuffleSeed + (ctx ? ctx->input_pipeline_id : 0)).repeat();
    return ds.batch(training ? batch : kEvalBatch);
  };
  auto model_fn = [=](const est::Features& features, const est::Tensor& labels, est::ModeKeys mode,
                      est::ModelContext& ctx) {
    using namespace est::nn;
    est::Tensor x = dense(ctx, flatten(features.at("image")), {.units = 128, .activation = relu});
    est::Tensor logits = dense(ctx, x, {.units = 10});
    est::Tensor loss = sparse_softmax_cross_entropy(labels, logits);
    if (mode != est::ModeKeys::kTrain)
      return est::EstimatorSpec::eval(
          loss, {{"accuracy", est::metrics::accuracy(labels, argmax(logits, 1))}});
    return est::EstimatorSpec::train(
        loss, est::optim::sgd(est::optim::exponential_decay(learning_rate, decay_steps, decay_rate))
                  .minimize(loss, ctx));
  };
  est::RunConfig config{.model_dir = model_dir,
                        .tf_random_seed = 7,
                        .save_summary_steps = 0,
                        .save_checkpoints_steps = 100000,  // the first and the last step's
                        .save_checkpoints_secs = std::nullopt,
                        .log_step_count_steps = 500};
  est::Estimator classifier(model_fn, config);
  auto [metrics, exports] =
      est::train_and_evaluate(classifier, {.input_fn = input_fn, .max_steps = max_steps},
                              {.input_fn = input_fn,
                               .steps = std::nullopt,
                               .start_delay_secs = 0,
                               .throttle_secs = 100000});
  if (!metrics.empty())
    std::printf("eval: loss=%.6f accuracy=%.4f global_step=%lld\n", metrics.at("loss"),
                metrics.at("accuracy"), static_cast<long long>(metrics.at("global_step")));
  std::printf("finished\n");
  return 0;
} catch (const est::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 1;
}
