// A canned estimator under MultiWorkerMirroredStrategy: two workers of a loopback cluster, on
// threads of this process, train a wide & deep classifier with string labels (two optimizers,
// the labels' vocabulary) on their shards; the chief's checkpoint then evaluates as well as
// single-process training does.
#include <doctest/doctest.h>

#include <future>

#include "distribute/distribute.h"
#include "tests/canned/canned_test_util.h"
#include "tests/process_group.h"

using namespace canned_test;
using namespace std::chrono_literals;
using est_test::TempDir;

namespace {

DNNLinearCombinedClassifierOptions wide_and_deep(RunConfig config) {
  return {.linear_feature_columns = linear_columns(),
          .linear_optimizer = optim::ftrl(0.1),
          .dnn_feature_columns = dnn_columns(),
          .dnn_optimizer = optim::adagrad(0.05),
          .dnn_hidden_units = {8},
          .label_vocabulary = {"no", "yes"},
          .config = std::move(config)};
}

}  // namespace

TEST_CASE("DNNLinearCombinedClassifier trains under MultiWorkerMirroredStrategy") {
  TempDir dir;
  distribute::ClusterSpec::Jobs jobs;
  for (int i = 0; i < 2; ++i)
    jobs[distribute::TaskType::kWorker].push_back("127.0.0.1:" +
                                                  std::to_string(testing::free_port()));
  distribute::ClusterSpec cluster(jobs);
  std::vector<std::future<void>> workers;
  for (int w = 0; w < 2; ++w)
    workers.push_back(std::async(std::launch::async, [&, w] {
      distribute::TfConfig tf_config{
          .cluster = cluster, .task = distribute::TaskSpec{distribute::TaskType::kWorker, w}};
      auto strategy = std::make_shared<distribute::MultiWorkerMirroredStrategy>(
          tf_config, distribute::CommunicationOptions{},
          distribute::MultiWorkerOptions{.token = "canned-multi-worker-test-0123456",
                                         .session_creation_timeout = 30s,
                                         .heartbeat_interval = 200ms,
                                         .heartbeat_timeout = 5000ms,
                                         .devices = {"/cpu:0"}});
      RunConfig run_config = config(dir.str());
      run_config.train_distribute = strategy;
      run_config.read_tf_config = false;
      run_config.cluster_spec = cluster;
      run_config.task_id = w;
      run_config.is_chief = w == 0;
      run_config.num_worker_replicas = 2;
      DNNLinearCombinedClassifier classifier(wide_and_deep(run_config));
      // Per-worker batch 16 of each worker's shard: a global batch of 32.
      classifier.train(train_input(Task::kStringBinary, 16), {}, {}, 300);
    }));
  for (auto& worker : workers) {
    REQUIRE(worker.wait_for(180s) == std::future_status::ready);
    worker.get();
  }
  DNNLinearCombinedClassifier trained(wide_and_deep(config(dir.str())));
  Metrics metrics = trained.evaluate(eval_input(Task::kStringBinary));
  CHECK(metrics.at("global_step") == 300);
  CHECK(metrics.at("accuracy") > 0.9);
}
