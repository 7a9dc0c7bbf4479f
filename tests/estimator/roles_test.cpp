// train_and_evaluate's roles (tensorflow_estimator's training.py): the evaluator evaluates
// each new checkpoint until the one at max_steps, skips a checkpoint that retention deleted
// before it could be read, waits with a bound; a worker trains and returns nothing (a ps
// task's role is tested with the parameter servers, tests/distribute/ps_estimator_test.cpp).
#include "distribute/mirrored_strategy.h"
#include "estimator/evaluator.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

namespace {

// Trains to `steps` with a checkpoint every 2 steps, keeping all.
void train_with_checkpoints(const std::string& model_dir, int64_t steps) {
  RunConfig config = quiet_config(model_dir);
  config.save_checkpoints_steps = 2;
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(64, 4, false, -1), {.max_steps = steps});
}

RunConfig evaluator_config(const std::string& model_dir) {
  RunConfig config = quiet_config(model_dir);
  config.read_tf_config = false;
  config.task_type = distribute::TaskType::kEvaluator;
  config.is_chief = false;
  config.num_worker_replicas = 0;
  return config;
}

}  // namespace

TEST_CASE("the evaluator evaluates each new checkpoint and exits after the one at max_steps") {
  TempDir dir;
  train_with_checkpoints(dir.str(), 6);
  Estimator evaluator(linear_model_fn, evaluator_config(dir.str()));
  // The checkpoints appear one by one (as a training job writes them), the second twice.
  std::vector<std::string> sequence = {dir / "model.ckpt-2.h5", dir / "model.ckpt-4.h5",
                                       dir / "model.ckpt-4.h5", dir / "model.ckpt-6.h5"};
  size_t next = 0;
  LogCapture log;
  auto [metrics, exports] = detail::run_evaluator(
      evaluator, {.input_fn = linear_input_fn(), .max_steps = 6},
      {.input_fn = linear_input_fn(16, 4), .steps = 1, .start_delay_secs = 0, .throttle_secs = 0},
      [&]() -> std::optional<std::string> {
        return sequence[std::min(next++, sequence.size() - 1)];
      });
  CHECK(metrics.at("global_step") == 6);
  CHECK(steps_of(scalars_in(evaluator.eval_dir()), "loss") == std::vector<int64_t>{2, 4, 6});
  CHECK(log.contains("No new checkpoint ready for evaluation"));
  CHECK(log.contains("Exiting evaluation, global_step=6 >= train max_steps=6"));
}

TEST_CASE("the evaluator moves on when retention deleted a checkpoint before it was read") {
  TempDir dir;
  train_with_checkpoints(dir.str(), 6);
  fs::remove(dir / "model.ckpt-4.h5");  // listed, then gone (tensorflow#39033)
  Estimator evaluator(linear_model_fn, evaluator_config(dir.str()));
  std::vector<std::string> sequence = {dir / "model.ckpt-4.h5", dir / "model.ckpt-6.h5"};
  size_t next = 0;
  LogCapture log;
  auto [metrics, exports] = detail::run_evaluator(
      evaluator, {.input_fn = linear_input_fn(), .max_steps = 6},
      {.input_fn = linear_input_fn(16, 4), .steps = 1, .start_delay_secs = 0, .throttle_secs = 0},
      [&]() -> std::optional<std::string> {
        return sequence[std::min(next++, sequence.size() - 1)];
      });
  CHECK(metrics.at("global_step") == 6);
  CHECK(log.contains("model.ckpt-4.h5 was deleted before it could be evaluated"));
  CHECK(steps_of(scalars_in(evaluator.eval_dir()), "loss") == std::vector<int64_t>{6});
}

TEST_CASE("the evaluator gives up after checkpoint_timeout_secs without a checkpoint") {
  TempDir dir;
  Estimator evaluator(linear_model_fn, evaluator_config(dir.str()));
  LogCapture log;
  CHECK_THROWS_WITH_AS(
      train_and_evaluate(evaluator, {.input_fn = linear_input_fn(), .max_steps = 6},
                         {.input_fn = linear_input_fn(16, 4),
                          .start_delay_secs = 0,
                          .throttle_secs = 0,
                          .checkpoint_timeout_secs = 0.5}),
      doctest::Contains("no new checkpoint"), DeadlineExceededError);
  CHECK(log.contains("Estimator is not trained yet"));
}

TEST_CASE("train_and_evaluate: a worker trains and returns nothing") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.read_tf_config = false;
  config.cluster_spec =
      distribute::ClusterSpec({{distribute::TaskType::kChief, {"127.0.0.1:1111"}},
                               {distribute::TaskType::kWorker, {"127.0.0.1:1112"}},
                               {distribute::TaskType::kPs, {"127.0.0.1:1113"}}});
  config.task_type = distribute::TaskType::kWorker;
  config.is_chief = false;
  LogCapture log;
  Estimator worker(linear_model_fn, config);
  auto [metrics, exports] =
      train_and_evaluate(worker, {.input_fn = linear_input_fn(64, 4, false, -1), .max_steps = 4},
                         {.input_fn = linear_input_fn(16, 4)});
  CHECK(metrics.empty());
  CHECK(exports.empty());
  CHECK(log.contains("Training with task_type = worker, task_id = 0"));
  CHECK_FALSE(fs::exists(dir / "eval"));  // workers do not evaluate
}

TEST_CASE("a task of a multi-worker cluster that would train alone says so once, naming MWMS") {
  TempDir dir;
  const std::string kAdvice = "MultiWorkerMirroredStrategy::from_env()";
  {  // hand-filled task fields and no strategy: the worker trains alone and saves nothing
    RunConfig config = quiet_config(dir.str());
    config.read_tf_config = false;
    config.task_type = distribute::TaskType::kWorker;
    config.task_id = 1;
    config.is_chief = false;
    LogCapture log;
    Estimator worker(linear_model_fn, config);
    worker.train(linear_input_fn(64, 4, false, -1), {.max_steps = 2});
    CHECK(log.count(kAdvice) == 1);
    CHECK(
        log.contains("worker 1 is a task of a multi-worker cluster, but training without a "
                     "distribution strategy trains in this process only"));
    CHECK(log.contains("saves nothing"));
  }
  {  // MirroredStrategy (in-process) on the chief of a two-worker cluster
    RunConfig config = quiet_config(dir / "mirrored");
    config.read_tf_config = false;
    config.task_type = distribute::TaskType::kChief;
    config.num_worker_replicas = 2;
    config.train_distribute =
        std::make_shared<distribute::MirroredStrategy>(std::vector<std::string>{"/cpu:0"});
    LogCapture log;
    Estimator chief(linear_model_fn, config);
    CHECK(log.count(kAdvice) == 1);
    CHECK(log.contains("MirroredStrategy (an in-process strategy)"));
    CHECK_FALSE(log.contains("saves nothing"));
  }
  {  // a local run is not warned
    LogCapture log;
    Estimator local(linear_model_fn, quiet_config(dir / "local"));
    CHECK_FALSE(log.contains(kAdvice));
  }
}
