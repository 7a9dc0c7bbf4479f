// The ps tasks of the one-process parameter-server tests (ps_service_test, ps_strategy_test,
// ps_push_ahead_test, ps_sync_service_test, ps_embedding_test): PsServers of one job, each
// listening on a loopback port the kernel picks, and the TF_CONFIG of a training task of that
// job, so that each test says only what differs (token, optimizer, training tasks).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster/tf_config.h"
#include "distribute/ps/ps_server.h"
#include "tests/process_group.h"

namespace est::testing {

// ps tasks 0..n-1 of one job with `options` (token, num_workers, optimizer); each one's address
// (127.0.0.1, port 0) and task_index are set here.
inline std::vector<std::unique_ptr<distribute::PsServer>> start_ps_servers(
    int n, const distribute::PsServerOptions& options) {
  std::vector<std::unique_ptr<distribute::PsServer>> servers;
  for (int i = 0; i < n; ++i) {
    distribute::PsServerOptions task = options;
    task.address = "127.0.0.1:0";
    task.task_index = i;
    servers.push_back(std::make_unique<distribute::PsServer>(std::move(task)));
  }
  return servers;
}

// "host:port" of each server, in task order: the cluster's "ps" job.
inline std::vector<std::string> addresses_of(
    const std::vector<std::unique_ptr<distribute::PsServer>>& servers) {
  std::vector<std::string> addresses;
  for (const auto& server : servers) addresses.push_back(server->address());
  return addresses;
}

// The TF_CONFIG of `task` in a job of a chief and `workers` workers (no "worker" job when 0),
// each at a free loopback port, and the ps tasks at `ps_addresses`.
inline distribute::TfConfig ps_job_config(const std::vector<std::string>& ps_addresses,
                                          int workers = 0,
                                          distribute::TaskSpec task = {distribute::TaskType::kChief,
                                                                       0}) {
  using distribute::TaskType;
  distribute::ClusterSpec::Jobs jobs = {
      {TaskType::kChief, {"127.0.0.1:" + std::to_string(free_port())}},
      {TaskType::kPs, ps_addresses}};
  for (int i = 0; i < workers; ++i)
    jobs[TaskType::kWorker].push_back("127.0.0.1:" + std::to_string(free_port()));
  return distribute::TfConfig{.cluster = distribute::ClusterSpec(std::move(jobs)), .task = task};
}

}  // namespace est::testing
