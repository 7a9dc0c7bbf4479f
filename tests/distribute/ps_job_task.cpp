// A task of the parameter-server job tests: train_and_evaluate on a small classifier over
// deterministic synthetic data, its role from TF_CONFIG (chief and workers train, ps tasks
// serve, EST_JOB_TOKEN from the environment), then one evaluation of the latest checkpoint on
// the chief, printed as "eval: loss=... accuracy=... global_step=...".
//
//   ps_job_task --model_dir D --max_steps N --batch B [--optimizer sgd|momentum|adam]
//               [--strategy ps|tf1|mirrored|none] [--ps_balancing round_robin|greedy]
//               [--partitions P] [--step_delay_ms MS] [--throttle_secs S]
//               [--warm_start_from DIR] [--batch_norm]
//               [--sync_replicas R [--total_num_replicas N] [--num_tokens T] [--token_timeout_s S]]
// --strategy ps: ParameterServerStrategy::from_env(), synchronous when --sync_replicas is given
// (SyncReplicasOptions); tf1: no train_distribute (TF1's default, the Estimator makes one when
// TF_CONFIG lists ps tasks); mirrored: MirroredStrategy on one CPU (restoring a PS checkpoint);
// mwms: MultiWorkerMirroredStrategy::from_env() on one CPU per task (synchronous all-reduce, the
// reference of synchronous ps training); none: no strategy (the one-process reference).
// --batch_norm puts batch normalization after the hidden layer (moving statistics on the ps
// tasks); --warm_start_from warm-starts every variable from DIR's latest checkpoint. Each task
// first prints "started <type> <index> pid <pid>" (a test kills it by that pid); the evaluator
// ends with "evaluator: loss=... global_step=G".
// Exit status: 0 when the role ends, 1 with "error: <message>" on an est::Error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include <unistd.h>

#include "distribute/distribute.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/ps/parameter_server_strategy.h"
#include "estimator/estimator.h"
#include "nn/nn.h"

namespace {

using namespace est;

constexpr int64_t kExamples = 2048;
constexpr int64_t kFeatures = 8;

// Pseudo-random features in [-1, 1); the class is the largest of three linear scores, with
// one label in eight replaced (label noise, so that the loss stays away from zero).
data::Dataset synthetic(int64_t offset = 0) {
  std::vector<float> x(static_cast<size_t>(kExamples * kFeatures));
  std::vector<int64_t> y(static_cast<size_t>(kExamples));
  auto hash = [](uint64_t v) {
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    return v;
  };
  for (int64_t i = 0; i < kExamples; ++i) {
    uint64_t n = static_cast<uint64_t>(i + offset);
    float score[3] = {0, 0, 0};
    for (int64_t f = 0; f < kFeatures; ++f) {
      float v = static_cast<float>(hash(n * 131 + static_cast<uint64_t>(f)) % 2000) / 1000.0f - 1;
      x[static_cast<size_t>(i * kFeatures + f)] = v;
      for (int c = 0; c < 3; ++c) score[c] += v * static_cast<float>(((f + c * 3) % 5) - 2);
    }
    int64_t label =
        score[0] > score[1] ? (score[0] > score[2] ? 0 : 2) : (score[1] > score[2] ? 1 : 2);
    if (hash(n * 7 + 3) % 8 == 0) label = static_cast<int64_t>(hash(n) % 3);
    y[static_cast<size_t>(i)] = label;
  }
  return data::Dataset::from_tensor_slices(
      {{"x", Tensor::from_vector<float>(x, {kExamples, kFeatures})}},
      Tensor::from_vector<int64_t>(y));
}

// Slows each step (so a test can kill a task mid-job).
class DelayHook : public SessionRunHook {
 public:
  explicit DelayHook(int ms) : ms_(ms) {}
  void after_run(SessionRunContext&, const SessionRunValues&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }

 private:
  int ms_;
};

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir, optimizer = "momentum", strategy_name = "ps", balancing = "round_robin";
  int64_t max_steps = 100, batch = 32, partitions = 1, seed = 7;
  double decay_rate = 1.0;
  int step_delay_ms = 0;
  double throttle_secs = 100000;
  std::string warm_start_from;
  bool batch_norm = false;
  int sync_replicas = 0, total_num_replicas = 0, num_tokens = -1, token_timeout_s = 600;
  CLI::App app("a task of est's parameter-server job tests", "ps_job_task");
  app.add_option("--model_dir", model_dir)->required();
  app.add_option("--seed", seed, "tf_random_seed; the shuffle seeds follow it");
  app.add_option("--max_steps", max_steps);
  app.add_option("--batch", batch);
  app.add_option("--optimizer", optimizer);
  app.add_option("--strategy", strategy_name);
  app.add_option("--ps_balancing", balancing);
  app.add_option("--partitions", partitions, "fixed_size_partitioner for the hidden kernel");
  app.add_option("--step_delay_ms", step_delay_ms);
  app.add_option("--throttle_secs", throttle_secs, "EvalSpec.throttle_secs");
  app.add_option("--warm_start_from", warm_start_from);
  app.add_flag("--batch_norm", batch_norm);
  app.add_option("--decay_rate", decay_rate,
                 "the learning rate's exponential decay per 100 steps (1: constant)");
  app.add_option("--sync_replicas", sync_replicas, "replicas_to_aggregate (0: asynchronous)");
  app.add_option("--total_num_replicas", total_num_replicas);
  app.add_option("--num_tokens", num_tokens);
  app.add_option("--token_timeout_s", token_timeout_s);
  CLI11_PARSE(app, argc, argv);

  std::shared_ptr<distribute::Strategy> strategy;
  if (strategy_name == "ps") {
    distribute::Partitioner cut = distribute::fixed_size_partitioner(partitions);
    strategy = distribute::ParameterServerStrategy::from_env(
        {.load_balancing = balancing == "greedy" ? distribute::PsLoadBalancing::kGreedyByteSize
                                                 : distribute::PsLoadBalancing::kRoundRobin,
         .partitioner =
             [cut](const std::string& name, const ops::Shape& shape, ops::DType dtype) {
               return name == "dense/kernel" ? cut(name, shape, dtype) : 1;
             },
         .session_creation_timeout = std::chrono::seconds(60),
         .sync_replicas = sync_replicas > 0
                              ? std::optional<distribute::SyncReplicasOptions>(
                                    {.replicas_to_aggregate = sync_replicas,
                                     .total_num_replicas = total_num_replicas,
                                     .num_tokens = num_tokens,
                                     .token_timeout = std::chrono::seconds(token_timeout_s)})
                              : std::nullopt});
  } else if (strategy_name == "mwms") {
    strategy = distribute::MultiWorkerMirroredStrategy::from_env(
        {}, {.session_creation_timeout = std::chrono::seconds(60), .devices = {"/cpu:0"}});
  } else if (strategy_name == "mirrored") {
    strategy = std::make_shared<distribute::MirroredStrategy>(std::vector<std::string>{"/cpu:0"});
  }
  RunConfig config{.model_dir = model_dir,
                   .tf_random_seed = seed,
                   .save_summary_steps = 0,
                   .save_checkpoints_steps = 25,
                   .save_checkpoints_secs = std::nullopt,
                   .log_step_count_steps = 10,
                   .train_distribute = strategy};
  auto input_fn = [batch, seed](ModeKeys, const InputContext* ctx) {
    data::Dataset ds = synthetic();
    int64_t shuffle_seed = seed + 4 + (ctx ? ctx->input_pipeline_id : 0);
    return ds.shuffle(kExamples, static_cast<uint64_t>(shuffle_seed)).repeat().batch(batch);
  };
  auto model_fn = [optimizer, batch_norm, decay_rate](const Features& features,
                                                      const Tensor& labels, ModeKeys mode,
                                                      ModelContext& ctx) {
    Tensor h = nn::dense(ctx, features.at("x"), {.units = 32, .activation = nn::relu});
    if (batch_norm) h = nn::batch_normalization(ctx, h, {.momentum = 0.9});
    Tensor logits = nn::dense(ctx, h, {.units = 3});
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
    if (mode != ModeKeys::kTrain)
      return EstimatorSpec::eval(loss,
                                 {{"accuracy", metrics::accuracy(labels, argmax(logits, 1))}});
    auto rate = [decay_rate](double initial) {
      return optim::exponential_decay(initial, 100, decay_rate);
    };
    optim::Optimizer opt = optimizer == "sgd"    ? optim::sgd(rate(0.1))
                           : optimizer == "adam" ? optim::adam(rate(0.01))
                                                 : optim::momentum(rate(0.05), 0.9);
    return EstimatorSpec::train(loss, opt.minimize(loss, ctx));
  };
  std::optional<checkpoint::WarmStartSettings> warm_start;
  if (!warm_start_from.empty())
    warm_start = checkpoint::WarmStartSettings{.ckpt_to_initialize_from = warm_start_from};
  Estimator estimator(model_fn, config, {}, warm_start);
  std::printf("started %s %d pid %d\n", fmt::format("{}", estimator.config().task_type).c_str(),
              estimator.config().task_id, static_cast<int>(::getpid()));
  std::fflush(stdout);
  Hooks hooks;
  if (step_delay_ms > 0) hooks.push_back(std::make_shared<DelayHook>(step_delay_ms));
  auto eval_input_fn = [](ModeKeys, const InputContext*) {
    return synthetic(5000).batch(256);  // 2048 held-out examples
  };
  TrainAndEvaluateResult result = est::train_and_evaluate(
      estimator, {.input_fn = input_fn, .max_steps = max_steps, .hooks = hooks},
      {.input_fn = eval_input_fn,
       .steps = std::nullopt,
       .start_delay_secs = 0,
       .throttle_secs = throttle_secs});
  if (estimator.config().task_type == distribute::TaskType::kEvaluator)
    std::printf("evaluator: loss=%.6f global_step=%lld\n", result.first.at("loss"),
                static_cast<long long>(result.first.at("global_step")));
  if (estimator.config().is_chief && estimator.config().task_type != distribute::TaskType::kPs) {
    // Outside train_and_evaluate's own evaluations: the final checkpoint, evaluated alone.
    RunConfig local{.model_dir = model_dir, .tf_random_seed = seed, .save_summary_steps = 0};
    local.read_tf_config = false;
    Metrics m = Estimator(model_fn, local).evaluate(eval_input_fn);
    std::printf("eval: loss=%.6f accuracy=%.4f global_step=%lld\n", m.at("loss"), m.at("accuracy"),
                static_cast<long long>(m.at("global_step")));
  }
  std::printf("finished %s %d\n", fmt::format("{}", estimator.config().task_type).c_str(),
              estimator.config().task_id);
  return 0;
} catch (const est::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 1;
}
