// A task of the multi-process tests: trains a small dense model with the Estimator under
// MultiWorkerMirroredStrategy::from_env() (TF_CONFIG and EST_JOB_TOKEN from the environment) on
// deterministic synthetic data, and writes its variables at the end of training. Faults are
// injected on request, at a given global step, on one task.
//
//   estimator_worker --model_dir D --steps N --batch B --optimizer sgd|adam|momentum
//                    [--dump FILE] [--fault none|kill|stop|throw|exit|hang --fault_task "worker 1"
//                     --fault_step S [--fault_marker FILE]] [--save_steps N] [--dropout RATE]
//                    [--shuffle] [--train_and_evaluate]
// Without TF_CONFIG it trains alone on the global batch: the reference run.
// Exit status: 0 when training ends, 1 with "error: <message>" on an est::Error.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <thread>

#include "distribute/distribute.h"
#include "estimator/estimator.h"
#include "nn/nn.h"

namespace {

using namespace est;

constexpr int64_t kExamples = 1024;
constexpr int64_t kFeatures = 6;

data::Dataset synthetic() {
  std::vector<float> x(static_cast<size_t>(kExamples * kFeatures));
  std::vector<int64_t> y(static_cast<size_t>(kExamples));
  for (int64_t i = 0; i < kExamples; ++i) {
    float sum = 0;
    for (int64_t f = 0; f < kFeatures; ++f) {
      float v = static_cast<float>(((i * 37 + f * 11) % 23) - 11) / 7.0f;
      x[static_cast<size_t>(i * kFeatures + f)] = v;
      sum += v * static_cast<float>(f + 1);
    }
    y[static_cast<size_t>(i)] = sum > 1 ? 2 : (sum > -1 ? 1 : 0);
  }
  return data::Dataset::from_tensor_slices(
      {{"x", Tensor::from_vector<float>(x, {kExamples, kFeatures})}},
      Tensor::from_vector<int64_t>(y));
}

// Writes every variable at the end of training, and injects the fault at its step.
class TestHook : public SessionRunHook {
 public:
  TestHook(std::string dump, std::string fault, bool faulty, int64_t fault_step)
      : dump_(std::move(dump)), fault_(std::move(fault)), faulty_(faulty), step_(fault_step) {}

  // On the evaluator the fault comes in its first evaluation, whatever the step.
  void fire_on_any_step() { any_step_ = true; }

  void after_run(SessionRunContext& context, const SessionRunValues& /*values*/) override {
    if (!faulty_ || (!any_step_ && context.global_step() + 1 != step_)) return;
    std::fprintf(stderr, "injecting fault '%s' at step %lld\n", fault_.c_str(),
                 static_cast<long long>(step_));
    std::fflush(stderr);
    if (fault_ == "kill") ::raise(SIGKILL);
    if (fault_ == "stop") ::raise(SIGSTOP);
    if (fault_ == "exit") std::_Exit(3);
    if (fault_ == "throw")
      throw InvalidArgumentError(fmt::format("injected failure at step {}", step_));
    if (fault_ == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
  }

  void end(Session& session) override {
    if (dump_.empty()) return;
    std::ofstream out(dump_);
    for (const nn::Variable& v : session.store().variables()) {
      out << v.name;
      for (double value : v.value.to_vector<double>()) out << fmt::format(" {:a}", value);
      out << "\n";
    }
  }

 private:
  std::string dump_, fault_;
  bool faulty_;
  bool any_step_ = false;
  int64_t step_;
};

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir, optimizer = "adam", dump, fault = "none", fault_task, fault_marker;
  int64_t steps = 20, batch = 32, fault_step = 10, save_steps = 1000000;
  double dropout = 0;
  bool shuffle = false, train_and_evaluate = false;
  CLI::App app("a task of est's multi-process tests", "estimator_worker");
  app.add_option("--model_dir", model_dir)->required();
  app.add_option("--steps", steps);
  app.add_option("--batch", batch, "global batch");
  app.add_option("--optimizer", optimizer);
  app.add_option("--dump", dump);
  app.add_option("--fault", fault);
  app.add_option("--fault_task", fault_task);
  app.add_option("--fault_step", fault_step);
  app.add_option("--fault_marker", fault_marker,
                 "inject the fault only while this file does not exist (it is created first)");
  app.add_option("--save_steps", save_steps, "checkpoint cadence");
  app.add_option("--dropout", dropout, "dropout rate after the hidden layer (0: none)");
  app.add_flag("--shuffle", shuffle, "shuffle each worker's input (seeded)");
  app.add_flag("--train_and_evaluate", train_and_evaluate,
               "est::train_and_evaluate (the task's role from TF_CONFIG) instead of train");
  CLI11_PARSE(app, argc, argv);

  std::shared_ptr<distribute::Strategy> strategy;
  if (std::getenv("TF_CONFIG"))
    strategy = distribute::MultiWorkerMirroredStrategy::from_env(
        {}, {.session_creation_timeout = std::chrono::seconds(60)});
  RunConfig config{.model_dir = model_dir,
                   .tf_random_seed = 7,
                   .save_summary_steps = 0,
                   .save_checkpoints_steps = save_steps,
                   .save_checkpoints_secs = std::nullopt,
                   .log_step_count_steps = 5,
                   .train_distribute = strategy};
  auto input_fn = [batch, shuffle](ModeKeys, const InputContext* ctx) {
    data::Dataset ds = synthetic();
    int64_t b = batch;
    if (ctx) {
      ds = ds.shard(ctx->num_input_pipelines, ctx->input_pipeline_id);
      b = ctx->get_per_replica_batch_size(batch);
    }
    if (shuffle) ds = ds.shuffle(64, 3);
    return ds.repeat().batch(b);
  };
  auto model_fn = [optimizer, dropout](const Features& features, const Tensor& labels,
                                       ModeKeys mode, ModelContext& ctx) {
    Tensor h = nn::dense(ctx, features.at("x"), {.units = 16, .activation = nn::relu});
    if (dropout > 0) h = nn::dropout(ctx, h, dropout);
    Tensor logits = nn::dense(ctx, h, {.units = 3});
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
    if (mode != ModeKeys::kTrain)
      return EstimatorSpec::eval(loss,
                                 {{"accuracy", metrics::accuracy(labels, argmax(logits, 1))}});
    optim::Optimizer opt = optimizer == "sgd"        ? optim::sgd(0.1)
                           : optimizer == "momentum" ? optim::momentum(0.05, 0.9)
                                                     : optim::adam(0.01);
    return EstimatorSpec::train(loss, opt.minimize(loss, ctx));
  };
  Estimator estimator(model_fn, config);
  std::string me = fmt::format("{} {}", estimator.config().task_type, estimator.config().task_id);
  // "%TASK%" in --dump becomes this task's name ("chief_0"), for jobs a launcher starts.
  if (size_t at = dump.find("%TASK%"); at != std::string::npos)
    dump.replace(at, 6,
                 fmt::format("{}_{}", estimator.config().task_type, estimator.config().task_id));
  bool faulty = !fault_task.empty() && fault_task == me;
  if (faulty && !fault_marker.empty()) {
    if (std::ifstream(fault_marker).good())
      faulty = false;  // an earlier attempt did it
    else
      std::ofstream(fault_marker) << me << "\n";
  }
  auto hook = std::make_shared<TestHook>(dump, fault, faulty, fault_step);
  if (estimator.config().task_type == distribute::TaskType::kEvaluator) hook->fire_on_any_step();
  if (train_and_evaluate) {
    auto eval_input_fn = [](ModeKeys, const InputContext*) {
      return synthetic().take(128).batch(32);
    };
    auto [results, exports] = est::train_and_evaluate(
        estimator, {.input_fn = input_fn, .max_steps = steps, .hooks = {hook}},
        {.input_fn = eval_input_fn,
         .steps = std::nullopt,
         .hooks = {hook},
         .start_delay_secs = 0,
         .throttle_secs = 0});
    if (!results.empty())
      std::printf("metrics: accuracy=%.4f global_step=%lld\n", results.at("accuracy"),
                  static_cast<long long>(results.at("global_step")));
  } else {
    estimator.train(input_fn, {.hooks = {hook}, .max_steps = steps});
  }
  std::printf("finished %s\n", me.c_str());
  return 0;
} catch (const est::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 1;
}
