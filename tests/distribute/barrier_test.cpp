// Strategy::barrier: every worker of a MultiWorkerMirroredStrategy job waits until all have
// arrived, over the real coordination service (workers are threads of this process on a
// loopback cluster, or a child process, barrier_worker, where one must die). A late worker is
// waited for, each call is a barrier of its own even under the same name, and a worker that
// never comes, or dies, ends the wait with an error naming the barrier, never a hang. In one
// process the barrier is nothing.
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "distribute/distribute.h"
#include "tests/command.h"
#include "tests/process_group.h"

using namespace est;
using namespace est::distribute;

namespace {

using namespace std::chrono_literals;

const std::string kToken = "barrier-test-token-0123456789abcd";

TfConfig worker_config(const ClusterSpec& cluster, int index) {
  return TfConfig{.cluster = cluster, .task = TaskSpec{TaskType::kWorker, index}};
}

ClusterSpec two_workers() {
  ClusterSpec::Jobs jobs;
  for (int i = 0; i < 2; ++i)
    jobs[TaskType::kWorker].push_back("127.0.0.1:" + std::to_string(testing::free_port()));
  return ClusterSpec(jobs);
}

std::unique_ptr<MultiWorkerMirroredStrategy> join_job(const ClusterSpec& cluster, int index,
                                                      std::optional<double> timeout_seconds = {}) {
  return std::make_unique<MultiWorkerMirroredStrategy>(
      worker_config(cluster, index),
      CommunicationOptions{.timeout_seconds = timeout_seconds,
                           .implementation = CommunicationImplementation::kRing},
      MultiWorkerOptions{.token = kToken,
                         .session_creation_timeout = 30s,
                         .heartbeat_interval = 200ms,
                         .heartbeat_timeout = 2000ms,
                         .devices = {"/cpu:0"}});
}

}  // namespace

TEST_CASE("Strategy::barrier: nothing to wait for in one process") {
  MirroredStrategy mirrored({"/cpu:0", "/cpu:1"});
  CHECK_NOTHROW(mirrored.barrier("a meeting of one"));
  MultiWorkerMirroredStrategy alone(TfConfig{}, {}, {.devices = {"/cpu:0"}});
  CHECK_NOTHROW(alone.barrier("a meeting of one"));
}

TEST_CASE("Strategy::barrier: a late worker is waited for, and each call is its own barrier") {
  ClusterSpec cluster = two_workers();
  // arrived[w][k]: worker w is at its k-th barrier; passed_early[w]: w passed its k-th barrier
  // before the other worker had arrived there.
  std::atomic<bool> arrived[2][2] = {};
  std::atomic<bool> passed_early[2][2] = {};
  auto worker = [&](int w) {
    std::unique_ptr<MultiWorkerMirroredStrategy> strategy = join_job(cluster, w);
    for (int k = 0; k < 2; ++k) {
      // Worker 1 is late at the first meeting, worker 0 at the second (the same name twice).
      if (w == 1 - k) std::this_thread::sleep_for(300ms);
      arrived[w][k] = true;
      strategy->barrier("the test's meeting");
      if (!arrived[1 - w][k]) passed_early[w][k] = true;
    }
  };
  auto first = std::async(std::launch::async, worker, 0);
  auto second = std::async(std::launch::async, worker, 1);
  REQUIRE(first.wait_for(60s) == std::future_status::ready);
  REQUIRE(second.wait_for(60s) == std::future_status::ready);
  first.get();
  second.get();
  for (int w = 0; w < 2; ++w)
    for (int k = 0; k < 2; ++k) {
      CAPTURE(w);
      CAPTURE(k);
      CHECK(!passed_early[w][k]);
    }
}

TEST_CASE("Strategy::barrier: a worker that never comes is named when the barrier times out") {
  ClusterSpec cluster = two_workers();
  std::promise<void> done;
  auto absent = std::async(std::launch::async, [&] {
    std::unique_ptr<MultiWorkerMirroredStrategy> strategy = join_job(cluster, 1, 1.0);
    done.get_future().wait_for(60s);  // alive, but never at the barrier
  });
  std::string message;
  {
    std::unique_ptr<MultiWorkerMirroredStrategy> strategy = join_job(cluster, 0, 1.0);
    try {
      strategy->barrier("the checkpoint's meeting");
    } catch (const DeadlineExceededError& error) {
      message = error.what();
    }
    done.set_value();
  }
  REQUIRE(absent.wait_for(60s) == std::future_status::ready);
  absent.get();
  CAPTURE(message);
  CHECK(message.find("the checkpoint's meeting") != std::string::npos);
  CHECK(message.find("still waiting for worker 1 at " +
                     cluster.task_address(TaskType::kWorker, 1)) != std::string::npos);
}

TEST_CASE("Strategy::barrier: a worker that dies ends the wait with an error, not a hang") {
  ClusterSpec cluster = two_workers();
  testing::ScratchDir dir;
  testing::ProcessGroup group(dir.str());
  TfConfig config = worker_config(cluster, 1);
  group.start({EST_TEST_BARRIER_PROGRAM, "die"},
              {{"TF_CONFIG", to_json(config)}, {"EST_JOB_TOKEN", kToken}});
  std::unique_ptr<MultiWorkerMirroredStrategy> strategy = join_job(cluster, 0);
  strategy->barrier("everyone joined");
  REQUIRE(group.wait(0, 30s) == -SIGKILL);
  std::string message;
  try {
    strategy->barrier("the restore's meeting");
  } catch (const UnavailableError& error) {
    message = error.what();
  }
  CAPTURE(message);
  CHECK(message.find("the restore's meeting") != std::string::npos);
  CHECK(message.find("stopped responding") != std::string::npos);
}

TEST_CASE("Strategy::barrier: a worker process meets a worker thread") {
  ClusterSpec cluster = two_workers();
  testing::ScratchDir dir;
  testing::ProcessGroup group(dir.str());
  group.start({EST_TEST_BARRIER_PROGRAM, "meet"},
              {{"TF_CONFIG", to_json(worker_config(cluster, 1))}, {"EST_JOB_TOKEN", kToken}});
  std::unique_ptr<MultiWorkerMirroredStrategy> strategy = join_job(cluster, 0);
  CHECK_NOTHROW(strategy->barrier("everyone joined"));
  CHECK_NOTHROW(strategy->barrier("the test's meeting"));
  strategy.reset();  // the orderly end: the child's strategy waits for it too
  std::optional<int> code = group.wait(0, 60s);
  CAPTURE(group.output(0));
  CHECK(code == 0);
}
