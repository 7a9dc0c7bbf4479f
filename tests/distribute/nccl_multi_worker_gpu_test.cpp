// MultiWorkerMirroredStrategy(communication = NCCL) on GPUs (the GPU suite: exits 77 without
// one). Workers run as threads of this process over the real runtime (gRPC coordination, TCP
// ring), as tests/distribute/multi_worker_training_test.cpp runs them, each with one GPU: NCCL
// allows the ranks of one communicator on distinct GPUs only, so these cases need 2 GPUs and
// are skipped with that reason on fewer. Cases:
// - two workers on /gpu:0 and /gpu:1 with NCCL: the log line says NCCL, the ops reduce device
//   tensors, both workers end with the same variables (the chief's initial values broadcast
//   with ncclBroadcast, the gradients summed with ncclAllReduce), equal within
//   |a - b| <= 1e-4 (1 + |b|) to the same job with RING (host copies) on the same GPUs;
// - two workers on one GPU (any GPU machine): AUTO falls back to RING on both, saying why,
//   and NCCL is a FailedPreconditionError naming the shared GPU on both;
// - a worker that fails after a step: the other, in its next step's NCCL all-reduce, stops with
//   the job's error naming it (the communicator aborted), within the test's bound, never a hang.
#include <doctest/doctest.h>

#include <future>
#include <map>
#include <stdexcept>

#include "distribute/distribute.h"
#include "tests/distribute/training_util.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/process_group.h"
#include "tests/skip.h"

#if EST_HAVE_GRPC && EST_HAVE_CUDA

using namespace est;
using namespace est::distribute;
using namespace est::testing;

namespace {

using namespace std::chrono_literals;
using Variables = std::map<std::string, std::vector<double>>;

const std::string kToken = "nccl-multi-worker-test-token-01";
constexpr double kNcclTolerance = 1e-4;

int gpu_count() {
  int n = 0;
  for (const std::string& device : local_devices()) n += Device::parse(device).is_cuda() ? 1 : 0;
  return n;
}

TfConfig loopback_config(int workers) {
  ClusterSpec::Jobs jobs;
  for (int i = 0; i < workers; ++i)
    jobs[TaskType::kWorker].push_back("127.0.0.1:" + std::to_string(free_port()));
  return TfConfig{.cluster = ClusterSpec(jobs)};
}

MultiWorkerOptions worker_options(int worker) {
  return {.token = kToken,
          .session_creation_timeout = 60s,
          .heartbeat_interval = 200ms,
          .heartbeat_timeout = 3000ms,
          .devices = {"/gpu:" + std::to_string(worker)},
          .seed = kSeed + 1000 * static_cast<uint64_t>(worker)};  // the chief's values win
}

Tensor mlp(ModelContext& ctx, const Tensor& x) {
  Tensor h = nn::dense(ctx, x, {.units = 16, .activation = nn::relu});
  return nn::dense(ctx, h, {.units = 3});
}

// `steps` steps of every worker's rows of the global batch; this worker's variables.
Variables train_worker(MultiWorkerMirroredStrategy& strategy, int steps) {
  for (int s = 0; s < steps; ++s) {
    std::vector<data::Element> parts =
        split_batch(make_batch({16, 5}, uint64_t(s)), strategy.num_replicas_in_sync());
    std::vector<data::Element> mine{parts[static_cast<size_t>(strategy.worker_index())]};
    strategy.run(
        [&](ReplicaContext& replica) {
          ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor logits = mlp(ctx, replica.input().features.at("x"));
          Tensor loss = nn::sparse_softmax_cross_entropy(replica.input().labels, logits);
          replica.run_train_op(optim::adam(0.01).minimize(loss, ctx),
                               1.0 / replica.num_replicas_in_sync());
          return loss;
        },
        mine);
  }
  Variables out;
  for (const nn::Variable& v : strategy.store(0).variables())
    out[v.name] = v.value.to(Device::cpu()).to_vector<double>();
  return out;
}

std::vector<Variables> train_job(CommunicationImplementation implementation, int steps) {
  TfConfig config = loopback_config(2);
  std::vector<std::future<Variables>> futures;
  for (int w = 0; w < 2; ++w)
    futures.push_back(std::async(std::launch::async, [&, w] {
      TfConfig mine = config;
      mine.task = TaskSpec{TaskType::kWorker, w};
      MultiWorkerMirroredStrategy strategy(mine, {.implementation = implementation},
                                           worker_options(w));
      CHECK(strategy.cross_device_ops().reduces_device_tensors() ==
            (implementation == CommunicationImplementation::kNccl));
      Variables variables = train_worker(strategy, steps);
      CHECK(strategy.store(0).get("dense/kernel").value.device() == Device::cuda(w));
      return variables;
    }));
  std::vector<Variables> results;
  for (auto& future : futures) {
    REQUIRE(future.wait_for(180s) == std::future_status::ready);
    results.push_back(future.get());
  }
  return results;
}

double worst_difference(const Variables& got, const Variables& expected) {
  double worst = 0;
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, values] : expected) {
    CAPTURE(name);
    REQUIRE(got.count(name) == 1);
    const std::vector<double>& actual = got.at(name);
    REQUIRE(actual.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i)
      worst = std::max(worst, std::abs(actual[i] - values[i]) / (1 + std::abs(values[i])));
  }
  return worst;
}

}  // namespace

TEST_CASE("nccl multi-worker: two GPU workers with NCCL train as with RING on the same GPUs") {
  if (gpu_count() < 2)
    return skip(
        "needs 2 GPUs (NCCL allows one rank of a communicator per GPU, and each worker "
        "thread takes one); this machine has " +
        std::to_string(gpu_count()));
  est_test::LogCapture log;
  std::vector<Variables> nccl = train_job(CommunicationImplementation::kNccl, 5);
  CHECK(log.text().find("communication = NCCL") != std::string::npos);
  CHECK(log.text().find("NCCL communicator of 2 ranks ready") != std::string::npos);
  std::vector<Variables> ring = train_job(CommunicationImplementation::kRing, 5);
  CHECK(worst_difference(nccl[1], nccl[0]) <= 1e-6);  // every rank gets the same sums
  CHECK(ring[1] == ring[0]);
  CHECK(worst_difference(nccl[0], ring[0]) <= kNcclTolerance);
  CHECK(nccl[0].at("global_step") == ring[0].at("global_step"));
  // AUTO on GPU workers is NCCL.
  std::vector<Variables> automatic = train_job(CommunicationImplementation::kAuto, 1);
  CHECK(log.text().find("communication = NCCL") != std::string::npos);
  CHECK(automatic[0].size() == nccl[0].size());
}

TEST_CASE("nccl multi-worker: two workers sharing a GPU: AUTO is RING, NCCL an error") {
  est_test::LogCapture log;
  for (auto implementation :
       {CommunicationImplementation::kAuto, CommunicationImplementation::kNccl}) {
    CAPTURE(communication_name(implementation));
    TfConfig config = loopback_config(2);
    std::vector<std::future<std::string>> futures;
    for (int w = 0; w < 2; ++w)
      futures.push_back(std::async(std::launch::async, [&, w]() -> std::string {
        TfConfig mine = config;
        mine.task = TaskSpec{TaskType::kWorker, w};
        MultiWorkerOptions options = worker_options(0);  // both on /gpu:0
        options.seed += static_cast<uint64_t>(w);
        try {
          MultiWorkerMirroredStrategy strategy(mine, {.implementation = implementation}, options);
          train_worker(strategy, 1);
          return strategy.cross_device_ops().reduces_device_tensors() ? "device" : "host";
        } catch (const FailedPreconditionError& error) {
          return error.what();
        } catch (const Error& error) {  // the other task left first, with its error
          return std::string("other: ") + error.what();
        }
      }));
    std::vector<std::string> results;
    for (auto& future : futures) {
      REQUIRE(future.wait_for(120s) == std::future_status::ready);
      results.push_back(future.get());
    }
    CAPTURE(results[0]);
    CAPTURE(results[1]);
    if (implementation == CommunicationImplementation::kAuto) {
      CHECK(results[0] == "host");
      CHECK(results[1] == "host");
    } else {  // both decide so; one may hear of the other's leaving first
      bool named = false;
      for (const std::string& result : results) {
        CHECK(result != "device");
        CHECK(result != "host");
        named = named || (result.find("cannot join the job's GPUs") != std::string::npos &&
                          result.find("share GPU") != std::string::npos);
      }
      CHECK(named);
    }
  }
  CHECK(log.text().find("communication AUTO: RING, not NCCL, because") != std::string::npos);
  CHECK(log.text().find("communication = RING") != std::string::npos);
}

TEST_CASE("nccl multi-worker: a worker that fails mid-job stops the other's NCCL all-reduce") {
  if (gpu_count() < 2)
    return skip(
        "needs 2 GPUs (NCCL allows one rank of a communicator per GPU); this machine "
        "has " +
        std::to_string(gpu_count()));
  TfConfig config = loopback_config(2);
  std::promise<void> ready;
  std::shared_future<void> chief_ready = ready.get_future().share();
  auto chief = std::async(std::launch::async, [&]() -> std::string {
    TfConfig mine = config;
    mine.task = TaskSpec{TaskType::kWorker, 0};
    MultiWorkerMirroredStrategy strategy(
        mine, {.implementation = CommunicationImplementation::kNccl}, worker_options(0));
    train_worker(strategy, 1);  // with worker 1
    ready.set_value();
    try {
      train_worker(strategy, 3);  // worker 1 has left
    } catch (const std::exception& error) {
      strategy.report_error(error);
      return error.what();
    }
    return "no error";
  });
  auto failing = std::async(std::launch::async, [&] {
    TfConfig mine = config;
    mine.task = TaskSpec{TaskType::kWorker, 1};
    MultiWorkerMirroredStrategy strategy(
        mine, {.implementation = CommunicationImplementation::kNccl}, worker_options(1));
    train_worker(strategy, 1);
    chief_ready.wait_for(120s);  // bounded: the chief may have failed first
    strategy.report_error(std::runtime_error("the input_fn failed"));
  });
  REQUIRE(chief.wait_for(120s) == std::future_status::ready);
  REQUIRE(failing.wait_for(30s) == std::future_status::ready);
  failing.get();
  std::string message = chief.get();
  CAPTURE(message);
  CHECK(message.find("worker 1") != std::string::npos);  // named by the runtime
  CHECK(message.find("the input_fn failed") != std::string::npos);
  CHECK(message.find("no error") == std::string::npos);
}

#else

TEST_CASE("nccl multi-worker: NCCL across workers") {
  return est::testing::skip("this build has no CUDA or no gRPC (the multi-worker runtime)");
}

#endif
