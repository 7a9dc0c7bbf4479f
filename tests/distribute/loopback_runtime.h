// ClusterRuntimes on threads of one process, one per task of a loopback cluster: the
// coordination service, the data plane and the ring collectives run for real (gRPC, TCP or
// shared memory) but fast. For the runtime and collective tests.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/net/coordination_client.h"
#include "tests/process_group.h"

namespace est::testing {

inline const std::string kToken = "0123456789abcdef0123";

// `workers` worker tasks (and a chief before them when `chief`) on free ports of 127.0.0.1.
inline distribute::ClusterSpec loopback_cluster(int workers, bool chief) {
  using distribute::TaskType;
  distribute::ClusterSpec::Jobs jobs;
  if (chief) jobs[TaskType::kChief] = {"127.0.0.1:" + std::to_string(free_port())};
  for (int i = 0; i < workers; ++i)
    jobs[TaskType::kWorker].push_back("127.0.0.1:" + std::to_string(free_port()));
  return distribute::ClusterSpec(jobs);
}

inline distribute::ClusterRuntime::Options options_for(const distribute::ClusterSpec& cluster,
                                                       distribute::TaskSpec task) {
  using namespace std::chrono_literals;
  return {.cluster = cluster,
          .task = task,
          .token = kToken,
          .session_creation_timeout = 20s,
          .heartbeat_interval = 200ms,
          .heartbeat_timeout = 2000ms,
          .shutdown_timeout = 20s};
}

// Runs body(runtime) on one thread per training task, then shuts every runtime down; returns
// what each body returned, by rank. An exception on any thread is rethrown.
template <class Result>
std::vector<Result> run_tasks(const distribute::ClusterSpec& cluster,
                              const std::function<Result(distribute::ClusterRuntime&)>& body,
                              bool shared_memory = true) {
  using distribute::ClusterRuntime;
  std::vector<distribute::TaskSpec> tasks = ClusterRuntime::training_tasks(cluster);
  std::vector<std::future<Result>> futures;
  for (distribute::TaskSpec task : tasks)
    futures.push_back(std::async(std::launch::async, [&, task] {
      ClusterRuntime::Options options = options_for(cluster, task);
      options.shared_memory = shared_memory;
      ClusterRuntime runtime(options);
      Result result = body(runtime);
      if (!runtime.coordination().has_error()) runtime.shutdown();
      return result;
    }));
  std::vector<Result> results;
  for (auto& future : futures) results.push_back(future.get());
  return results;
}

}  // namespace est::testing
