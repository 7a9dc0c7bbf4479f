// RunConfig's task fields from TF_CONFIG: designated initializers and the local defaults keep
// working, with_tf_config picks TensorFlow's rule from the strategies set, reads model_dir, and
// the Estimator reads the TF_CONFIG environment variable when it is constructed (as TF's
// RunConfig() does) unless read_tf_config is cleared.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>

#include "distribute/mirrored_strategy.h"
#include "estimator/estimator.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

namespace {

constexpr const char* kTutorial =
    R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
        "task": {"type": "worker", "index": 1}})";

// Sets (or, given nullptr, unsets) TF_CONFIG for one scope and puts back what was there.
class ScopedTfConfig {
 public:
  explicit ScopedTfConfig(const char* value) {
    if (const char* old = getenv("TF_CONFIG")) old_ = old;
    if (value)
      setenv("TF_CONFIG", value, 1);
    else
      unsetenv("TF_CONFIG");
  }
  ~ScopedTfConfig() {
    if (old_)
      setenv("TF_CONFIG", old_->c_str(), 1);
    else
      unsetenv("TF_CONFIG");
  }

 private:
  std::optional<std::string> old_;
};

EstimatorSpec unused_model_fn(const Features&, const Tensor&, ModeKeys, ModelContext&) {
  throw InternalError("not called");
}

}  // namespace

TEST_CASE("run_config: designated initializers and the local task defaults") {
  RunConfig config{.model_dir = "/tmp/x", .save_checkpoints_steps = 10};
  CHECK(config.task_type == TaskType::kWorker);
  CHECK(config.cluster_spec.empty());
  CHECK(config.is_chief);
  CHECK(config.num_worker_replicas == 1);
  CHECK(config.global_id_in_cluster == 0);
  CHECK(config.master.empty());
  CHECK(config.num_local_tasks == 1);
  CHECK(config.read_tf_config);
  RunConfig local = config.with_tf_config("{}");
  CHECK(local.task_type == TaskType::kWorker);
  CHECK(local.is_chief);
  CHECK_FALSE(local.read_tf_config);
  CHECK(local.model_dir == "/tmp/x");
  CHECK(local.checkpoint_steps() == 10);
}

TEST_CASE("run_config: with_tf_config follows the Estimator rule without a strategy") {
  const char* worker = R"({"cluster": {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"],
                                       "worker": ["host3:2222", "host4:2222", "host5:2222"]},
                           "task": {"type": "worker", "index": 1}})";
  RunConfig config = RunConfig{}.with_tf_config(worker);
  CHECK(config.task_type == TaskType::kWorker);
  CHECK(config.task_id == 1);
  CHECK_FALSE(config.is_chief);
  CHECK(config.num_worker_replicas == 4);
  CHECK(config.num_ps_replicas == 2);
  CHECK(config.global_id_in_cluster == 2);
  CHECK(config.master == "grpc://host4:2222");
  CHECK(config.cluster_spec.num_tasks() == 6);
  CHECK_NOTHROW(config.validate());
  // The tutorial's chief-less cluster needs a strategy.
  std::string message =
      error_message<InvalidArgumentError>([] { RunConfig{}.with_tf_config(kTutorial); });
  CHECK(contains(message, "no \"chief\""));
  // The rule is picked when with_tf_config runs: a strategy set afterwards comes too late.
  CHECK(contains(message, "set it before RunConfig::with_tf_config"));
}

TEST_CASE("run_config: with a strategy, worker 0 of a chief-less cluster is the chief") {
  auto strategy = std::make_shared<MirroredStrategy>(std::vector<std::string>{"/cpu:0"});
  const char* worker0 = R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
                            "task": {"type": "worker", "index": 0}})";
  RunConfig chief = RunConfig{.train_distribute = strategy}.with_tf_config(worker0);
  CHECK(chief.is_chief);
  CHECK(chief.num_worker_replicas == 2);
  CHECK(chief.master == "grpc://localhost:12345");
  CHECK(chief.num_local_tasks == 2);
  RunConfig second = RunConfig{.eval_distribute = strategy}.with_tf_config(kTutorial);
  CHECK_FALSE(second.is_chief);
  CHECK(second.global_id_in_cluster == 1);
  // The evaluator: outside the cluster, zero workers, and it still validates.
  RunConfig evaluator = RunConfig{.train_distribute = strategy}.with_tf_config(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "evaluator", "index": 0}})");
  CHECK(evaluator.task_type == TaskType::kEvaluator);
  CHECK(evaluator.num_worker_replicas == 0);
  CHECK(evaluator.is_chief);
  CHECK_FALSE(evaluator.global_id_in_cluster.has_value());
  CHECK_NOTHROW(evaluator.validate());
}

TEST_CASE("run_config: TF_CONFIG's model_dir fills an empty model_dir and must match a set one") {
  const char* with_dir = R"({"model_dir": "/tmp/from_tf_config"})";
  CHECK(RunConfig{}.with_tf_config(with_dir).model_dir == "/tmp/from_tf_config");
  CHECK(RunConfig{.model_dir = "/tmp/from_tf_config"}.with_tf_config(with_dir).model_dir ==
        "/tmp/from_tf_config");
  std::string message = error_message<InvalidArgumentError>(
      [&] { RunConfig{.model_dir = "/tmp/other"}.with_tf_config(with_dir); });
  CHECK(contains(message, "/tmp/other"));
  CHECK(contains(message, "/tmp/from_tf_config"));
}

TEST_CASE("run_config: the Estimator reads TF_CONFIG from the environment when constructed") {
  std::string dir = (std::filesystem::temp_directory_path() / "est_run_config_test").string();
  auto strategy = std::make_shared<MirroredStrategy>(std::vector<std::string>{"/cpu:0"});
  {
    ScopedTfConfig env(kTutorial);
    Estimator estimator(unused_model_fn, RunConfig{.model_dir = dir, .train_distribute = strategy});
    CHECK(estimator.config().task_type == TaskType::kWorker);
    CHECK(estimator.config().task_id == 1);
    CHECK_FALSE(estimator.config().is_chief);
    CHECK(estimator.config().num_worker_replicas == 2);
    CHECK_FALSE(estimator.config().read_tf_config);

    // Task fields written by hand stay when read_tf_config is cleared.
    RunConfig by_hand{.model_dir = dir, .task_id = 3, .is_chief = false, .read_tf_config = false};
    Estimator kept(unused_model_fn, by_hand);
    CHECK(kept.config().task_id == 3);
    CHECK(kept.config().cluster_spec.empty());

    // A malformed TF_CONFIG stops the Estimator with the parser's message.
    ScopedTfConfig bad(R"({"cluster": {"worker": ["a:1", "b:1"]}})");
    std::string message = error_message<InvalidArgumentError>([&] {
      Estimator(unused_model_fn, RunConfig{.model_dir = dir, .train_distribute = strategy});
    });
    CHECK(contains(message, "no \"task\""));
  }
  {
    // TF_CONFIG unset: hand-written task fields are kept.
    ScopedTfConfig unset(nullptr);
    Estimator local(unused_model_fn, RunConfig{.model_dir = dir, .task_id = 2, .is_chief = false});
    CHECK(local.config().task_id == 2);
    CHECK_FALSE(local.config().is_chief);
  }
  std::filesystem::remove_all(dir);
}
