// Every canned classifier and regressor under MultiWorkerMirroredStrategy: two workers of a
// loopback cluster, on threads of this process, train on their shards (per-worker batch 16,
// the global batch of 32 the other tests use); the chief's checkpoint then evaluates as well as
// single-process training does. Wide & deep runs its two optimizers, the string-label
// classifier its vocabulary, across workers.
#include <doctest/doctest.h>

#include <future>

#include "distribute/distribute.h"
#include "tests/canned/canned_test_util.h"
#include "tests/process_group.h"

using namespace canned_test;
using namespace std::chrono_literals;
using est_test::TempDir;

namespace {

// Trains c on two worker threads into `model_dir`.
void train_on_two_workers(const Case& c, const std::string& model_dir) {
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
      RunConfig run_config = config(model_dir);
      run_config.train_distribute = strategy;
      run_config.read_tf_config = false;
      run_config.cluster_spec = cluster;
      run_config.task_id = w;
      run_config.is_chief = w == 0;
      run_config.num_worker_replicas = 2;
      c.make(run_config)->train(train_input(c.task, 16), {}, {}, 300);
    }));
  for (auto& worker : workers) {
    REQUIRE(worker.wait_for(180s) == std::future_status::ready);
    worker.get();
  }
}

}  // namespace

TEST_CASE("every canned estimator trains under MultiWorkerMirroredStrategy") {
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    TempDir dir;
    train_on_two_workers(c, dir.str());
    Metrics metrics = c.make(config(dir.str()))->evaluate(eval_input(c.task));
    CHECK(metrics.at("global_step") == 300);
    if (std::string(c.metric) == "accuracy")
      CHECK(metrics.at("accuracy") > c.bound);
    else
      CHECK(metrics.at("average_loss") < c.bound);
  }
}
