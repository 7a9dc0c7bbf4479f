// Synchronous parameter-server training in one process (distribute/ps/ps_sync_step.h,
// ps_server_sync.cpp): PsServers on loopback ports, each worker a PsSyncStep on its own thread
// with its own connections. The variables move once per step by the mean of the aggregated
// gradients (checked against the optimizer applied to that mean in one store), a gradient
// computed at an old step changes nothing, a worker with spare tokens supplies several batches
// of one step, and a worker that waits for a token that does not come fails with an error that
// names the wait and the worker whose connection ended. A step is one round trip to each task.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_server.h"
#include "distribute/ps/ps_sync_step.h"
#include "distribute/ps/ps_variables.h"
#include "nn/optimizers.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "tests/distribute/ps_server_fixture.h"

namespace est::distribute {
namespace {

using namespace std::chrono_literals;
const std::string kToken = "0123456789abcdef0123";

std::vector<std::unique_ptr<PsServer>> start_ps(int n, const nn::optim::Optimizer& optimizer) {
  return testing::start_ps_servers(n, {.token = kToken, .optimizer = optimizer});
}

// global_step, then two variables (round-robin on two ps tasks: kernel on ps 1, bias on ps 0).
void make_model(nn::VariableStore& store) {
  ops::NoGradGuard no_grad;
  nn::get_or_create_global_step(store);
  store.create("dense/kernel", ops::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), true);
  store.create("dense/bias", ops::Tensor::from_vector<float>({0.5f, -0.5f}), true);
}

std::vector<nn::GradAndVar> gradients(const nn::VariableStore& store, float scale) {
  std::vector<nn::GradAndVar> grads;
  for (const nn::Variable& v : store.trainable_variables()) {
    ops::Tensor g = ops::Tensor::empty(v.value.shape());
    for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = scale * static_cast<float>(i + 1);
    grads.push_back({v.name, g, v.value});
  }
  return grads;
}

// One training task: its connections, placement, store and synchronous step.
struct Worker {
  Worker(const std::vector<std::unique_ptr<PsServer>>& servers, const std::string& task,
         const SyncReplicasOptions& options, bool chief)
      : client(PsClientOptions{.ps_addresses = testing::addresses_of(servers),
                               .token = kToken,
                               .task_name = task,
                               .connect_timeout = 5s}),
        placement(static_cast<int>(servers.size())),
        variables(client, placement),
        sync(variables, options, task, chief) {
    make_model(store);
    variables.place(store, store.names());
    if (chief) variables.initialize({{"global_step", store.get("global_step").value.clone()}});
    sync.start(store, 5s);
    if (chief) {
      std::vector<NamedTensor> values;
      for (const nn::Variable& v : store.trainable_variables())
        values.push_back({v.name, v.value.clone()});
      variables.initialize(values);
    } else {
      variables.pull(store, 5s);
    }
  }
  std::vector<float> floats(const std::string& name) const {
    return store.get(name).value.to_vector<float>();
  }
  int64_t global_step() const {
    return static_cast<int64_t>(store.get("global_step").value.item());
  }

  PsClient client;
  PsPlacement placement;
  PsVariables variables;
  PsSyncStep sync;
  nn::VariableStore store;
};

}  // namespace

TEST_CASE("ps sync: each step applies the mean of replicas_to_aggregate gradients once") {
  auto optimizer = nn::optim::momentum(0.5, 0.9);
  auto servers = start_ps(2, optimizer);
  // Two of three replicas aggregated, no tokens to start with (lock-step from the first step).
  SyncReplicasOptions options{
      .replicas_to_aggregate = 2, .total_num_replicas = 3, .num_tokens = 0, .token_timeout = 30s};
  Worker chief(servers, "chief 0", options, true);
  Worker first(servers, "worker 0", options, false);
  Worker late(servers, "worker 1", options, false);
  nn::VariableStore local;
  make_model(local);

  for (int step = 0; step < 2; ++step) {
    INFO("step ", step);
    // The chief and worker 0 form the group; each waits for the other's push.
    const uint64_t trips_before = chief.client.round_trips(0) + chief.client.round_trips(1);
    auto chief_step = std::async(std::launch::async,
                                 [&] { chief.sync.step(chief.store, gradients(chief.store, 1)); });
    auto first_step = std::async(std::launch::async,
                                 [&] { first.sync.step(first.store, gradients(first.store, 3)); });
    chief_step.get();
    first_step.get();
    // Push, token and pull in one round trip to each ps task.
    CHECK(chief.client.round_trips(0) + chief.client.round_trips(1) - trips_before == 2);
    optimizer.apply_gradients(local, gradients(local, 2));  // the mean of 1x and 3x
    CHECK(chief.global_step() == step + 1);
    CHECK(chief.sync.local_step() == step + 1);
    for (const char* name : {"dense/kernel", "dense/bias"}) {
      CHECK(chief.floats(name) == local.get(name).value.to_vector<float>());
      CHECK(first.floats(name) == chief.floats(name));
    }
    // Worker 1's push was computed at the step before: stale on every ps task, it changes
    // nothing; its worker takes the step's third token and catches up.
    std::vector<float> kernel = chief.floats("dense/kernel");
    late.sync.step(late.store, gradients(late.store, 100));
    CHECK(late.sync.local_step() == step + 1);
    CHECK(late.global_step() == step + 1);
    CHECK(late.floats("dense/kernel") == kernel);
    chief.variables.push_pull({}, chief.store, 0);
    CHECK(chief.floats("dense/kernel") == kernel);
  }
  for (const auto& server : servers) {
    std::optional<PsServer::SyncStats> stats = server->sync_stats();
    REQUIRE(stats.has_value());
    CHECK(stats->steps == 2);
    CHECK(stats->stale_dropped == 2);  // worker 1's, once a step
    CHECK(server->updates_applied() == 2);
  }
}

TEST_CASE("ps sync: with spare tokens one replica supplies several batches of a step") {
  auto servers = start_ps(1, nn::optim::sgd(1.0));
  // TensorFlow's "total_num_replicas < replicas_to_aggregate: replicas compute multiple batches
  // per update"; num_tokens = -1 puts replicas_to_aggregate tokens in the queue at the start.
  SyncReplicasOptions options{
      .replicas_to_aggregate = 2, .total_num_replicas = 1, .token_timeout = 30s};
  Worker only(servers, "chief 0", options, true);
  std::vector<float> bias = only.floats("dense/bias");
  only.sync.step(only.store, gradients(only.store, 1));  // takes a spare token at once
  CHECK(only.sync.local_step() == 0);
  CHECK(only.global_step() == 0);
  CHECK(only.floats("dense/bias") == bias);  // half a step: nothing applied yet
  only.sync.step(only.store, gradients(only.store, 3));
  CHECK(only.global_step() == 1);
  CHECK(only.floats("dense/bias") == std::vector<float>{bias[0] - 2, bias[1] - 4});
}

TEST_CASE("ps sync: a worker waiting for a token that does not come names the wait") {
  auto servers = start_ps(1, nn::optim::sgd(0.1));
  SyncReplicasOptions options{.replicas_to_aggregate = 2, .num_tokens = 0, .token_timeout = 1500ms};
  Worker chief(servers, "chief 0", options, true);
  Worker stalled(servers, "worker 0", options, false);  // connected, but it never pushes step 0
  CHECK_THROWS_WITH_AS(
      chief.sync.step(chief.store, gradients(chief.store, 1)),
      doctest::Contains("chief 0 waited 1 s for the token of synchronous step 0: 1 of "
                        "replicas_to_aggregate = 2 replicas had pushed that step's gradients to "
                        "every ps task (chief 0)"),
      DeadlineExceededError);
}

TEST_CASE("ps sync: a worker that dies leaving too few replicas fails the step at once") {
  // Two ps tasks: the one holding the tokens and the other (which waits for its step's update)
  // each end their wait.
  auto servers = testing::start_ps_servers(
      2, {.token = kToken, .num_workers = 2, .optimizer = nn::optim::sgd(0.1)});
  SyncReplicasOptions options{
      .replicas_to_aggregate = 2, .num_tokens = 0, .token_timeout = std::chrono::minutes(10)};
  Worker chief(servers, "chief 0", options, true);
  {
    Worker dead(servers, "worker 0", options, false);
  }  // its connections close, as when the process dies before pushing step 0
  // Bounded: without the check the step waits for token_timeout (10 minutes).
  auto step = std::async(std::launch::async,
                         [&] { chief.sync.step(chief.store, gradients(chief.store, 1)); });
  bool ended = step.wait_for(30s) == std::future_status::ready;
  if (!ended)
    for (auto& server : servers) server->stop();  // ends the wait (CancelledError)
  CHECK(ended);
  CHECK_THROWS_WITH_AS(step.get(),
                       doctest::Contains("synchronous step 0 cannot complete: the connection from "
                                         "worker 0 ended before it was done, leaving 1 of the "
                                         "job's 2 training tasks for replicas_to_aggregate = 2"),
                       AbortedError);
}

TEST_CASE("ps sync: a gradient whose shape is not its variable's is refused before it counts") {
  auto servers = start_ps(1, nn::optim::sgd(1.0));
  SyncReplicasOptions options{.replicas_to_aggregate = 1, .num_tokens = 0, .token_timeout = 30s};
  Worker chief(servers, "chief 0", options, true);
  std::vector<float> bias = chief.floats("dense/bias");
  std::vector<nn::GradAndVar> wrong = gradients(chief.store, 1);
  wrong.back().gradient = ops::Tensor::from_vector<float>({1, 2, 3});  // dense/bias is [2]
  CHECK_THROWS_WITH_AS(chief.sync.step(chief.store, wrong),
                       doctest::Contains("gradient for 'dense/bias' has shape [3]"),
                       InvalidArgumentError);
  CHECK(servers[0]->sync_stats()->steps == 0);
  chief.sync.step(chief.store, gradients(chief.store, 1));  // the step is still to be done
  CHECK(chief.global_step() == 1);
  CHECK(chief.floats("dense/bias") == std::vector<float>{bias[0] - 1, bias[1] - 2});
}

TEST_CASE("ps sync: a worker that pushes asynchronously to a synchronous job is refused") {
  auto servers = start_ps(1, nn::optim::sgd(0.1));
  SyncReplicasOptions options{.replicas_to_aggregate = 1, .num_tokens = 0};
  Worker chief(servers, "chief 0", options, true);
  CHECK_THROWS_WITH_AS(
      chief.variables.push_pull(gradients(chief.store, 1), chief.store, 0),
      doctest::Contains("give every training task the same ParameterServerOptions::sync_replicas"),
      InvalidArgumentError);
}

}  // namespace est::distribute
