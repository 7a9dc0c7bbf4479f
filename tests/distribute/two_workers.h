// Two MultiWorkerMirroredStrategy workers of a loopback cluster (free ports on 127.0.0.1) on
// threads of this process, for the tests that train Estimators across workers without starting
// processes. Each thread builds its own strategy (CPU only, short heartbeats) and a RunConfig
// that names its task; the caller says what a worker trains. The wait for both is bounded, so a
// hung worker fails the test instead of hanging the suite.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "estimator/run_config.h"
#include "tests/process_group.h"

namespace est::testing {

struct TwoWorkerJob {
  std::string token;  // the job token both workers present (32 characters)
  std::chrono::milliseconds heartbeat_timeout;  // a worker silent this long is dead to the other
  std::chrono::seconds bound;                   // how long both workers together may take
};

// Runs train(config, w) for workers w = 0 and 1 (0 is the chief) on their own threads, where
// `config` is `base` with worker w's strategy as train_distribute and its task in the cluster.
// Returns when both are done; a worker's error is rethrown here.
inline void train_on_two_workers(const TwoWorkerJob& job, const RunConfig& base,
                                 const std::function<void(const RunConfig&, int worker)>& train) {
  using namespace std::chrono_literals;
  distribute::ClusterSpec::Jobs jobs;
  for (int i = 0; i < 2; ++i)
    jobs[distribute::TaskType::kWorker].push_back("127.0.0.1:" + std::to_string(free_port()));
  distribute::ClusterSpec cluster(jobs);
  std::vector<std::future<void>> workers;
  for (int w = 0; w < 2; ++w)
    workers.push_back(std::async(std::launch::async, [&, w] {
      distribute::TfConfig tf_config{
          .cluster = cluster, .task = distribute::TaskSpec{distribute::TaskType::kWorker, w}};
      RunConfig config = base;
      config.train_distribute = std::make_shared<distribute::MultiWorkerMirroredStrategy>(
          tf_config, distribute::CommunicationOptions{},
          distribute::MultiWorkerOptions{.token = job.token,
                                         .session_creation_timeout = 30s,
                                         .heartbeat_interval = 200ms,
                                         .heartbeat_timeout = job.heartbeat_timeout,
                                         .devices = {"/cpu:0"}});
      config.read_tf_config = false;
      config.cluster_spec = cluster;
      config.task_id = w;
      config.is_chief = w == 0;
      config.num_worker_replicas = 2;
      train(config, w);
    }));
  for (auto& worker : workers) {
    REQUIRE(worker.wait_for(job.bound) == std::future_status::ready);
    worker.get();
  }
}

}  // namespace est::testing
