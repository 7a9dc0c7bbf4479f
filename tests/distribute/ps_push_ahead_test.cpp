// A parameter-server step's traffic (distribute/ps/ps_gradient_path.h): one round trip per ps
// task per step, with the large gradients sent ahead during the backward pass (frames without a
// reply) and applied by their owner in the step's one update. In one process: PsServers on
// loopback ports, a chief ParameterServerStrategy in the custom loop. Checked: the counts of
// round trips and frames per ps task; a job gives bit-identical values with and without sending
// ahead (Adam: its beta powers would show a second update); a failed step's staged gradients
// are dropped, not applied with the next push; a ps task that stops while gradients are in
// flight is named by the step within 10 s.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>

#include "distribute/ps/parameter_server_strategy.h"
#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_server.h"
#include "distribute/ps/ps_variables.h"
#include "nn/nn.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "tests/distribute/ps_server_fixture.h"

namespace est::distribute {
namespace {

using namespace std::chrono_literals;
const std::string kToken = "ps-push-ahead-test-token-01";

std::vector<std::unique_ptr<PsServer>> start_ps(int n, const nn::optim::Optimizer& optimizer) {
  return testing::start_ps_servers(n, {.token = kToken, .num_workers = 1, .optimizer = optimizer});
}

// The chief's TF_CONFIG in a job of the chief alone and these ps tasks.
TfConfig chief_of(const std::vector<std::unique_ptr<PsServer>>& servers) {
  return testing::ps_job_config(testing::addresses_of(servers));
}

Tensor inputs(int64_t rows, int64_t cols, double phase) {
  Tensor t = Tensor::empty({rows, cols});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase));
  return t;
}

// Two dense layers: "w1" [128, 256] (128 KiB) and "w2" [256, 64] (64 KiB) are sent ahead at
// the default threshold (64 KiB); the biases go with the request.
Tensor step(ReplicaContext& replica, const nn::optim::Optimizer& optimizer, int s) {
  nn::ModelContext& ctx = replica.model_context();
  ctx.begin_call();
  Tensor w1 = ctx.get_variable("w1", {128, 256}, DType::kF32, nn::constant(0.01));
  Tensor b1 = ctx.get_variable("b1", {256}, DType::kF32, nn::zeros());
  Tensor w2 = ctx.get_variable("w2", {256, 64}, DType::kF32, nn::constant(-0.02));
  Tensor b2 = ctx.get_variable("b2", {64}, DType::kF32, nn::zeros());
  Tensor hidden = ops::tanh(ops::add(ops::matmul(inputs(8, 128, s), w1), b1));
  Tensor out = ops::add(ops::matmul(hidden, w2), b2);
  Tensor loss = ops::mean(ops::square(ops::sub(out, inputs(8, 64, 1.0 + s))));
  replica.run_train_op(optimizer.minimize(loss, ctx));
  return loss;
}

// The values (and optimizer state) the ps tasks hold after `steps` steps of a one-worker job.
std::map<std::string, std::vector<float>> train(size_t push_ahead_bytes, int steps) {
  auto optimizer = nn::optim::adam(0.01);
  auto servers = start_ps(2, optimizer);
  std::map<std::string, std::vector<float>> values;
  {
    ParameterServerStrategy chief(chief_of(servers),
                                  {.token = kToken, .push_ahead_bytes = push_ahead_bytes});
    for (int s = 0; s < steps; ++s)
      chief.run([&](ReplicaContext& r) { return step(r, optimizer, s); });
    nn::VariableStore& store = chief.store(0);
    chief.variable_home().before_checkpoint(store);  // everything the ps tasks hold
    for (const nn::Variable& v : store.variables())
      values[v.name] = v.name == "global_step"
                           ? std::vector<float>{static_cast<float>(v.value.item())}
                           : v.value.to_vector<float>();
  }
  for (auto& server : servers) server->join(5s);
  return values;
}

}  // namespace

TEST_CASE("ParameterServerStrategy: a step is one round trip per ps task, large gradients ahead") {
  auto optimizer = nn::optim::sgd(0.1);
  auto servers = start_ps(2, optimizer);
  {
    ParameterServerStrategy chief(chief_of(servers), {.token = kToken});
    chief.run([&](ReplicaContext& r) { return step(r, optimizer, 0); });  // creates, initializes
    const PsClient& client = *chief.ps_client();
    std::vector<uint64_t> trips, frames;
    for (int ps = 0; ps < 2; ++ps) {
      trips.push_back(client.round_trips(ps));
      frames.push_back(client.frames_sent(ps));
    }
    constexpr int kSteps = 3;
    for (int s = 1; s <= kSteps; ++s)
      chief.run([&](ReplicaContext& r) { return step(r, optimizer, s); });
    uint64_t ahead = 0;
    for (int ps = 0; ps < 2; ++ps) {
      CHECK(client.round_trips(ps) - trips[static_cast<size_t>(ps)] == kSteps);
      ahead += client.frames_sent(ps) - frames[static_cast<size_t>(ps)] - kSteps;
    }
    // w1 and w2, each in its own frame as the backward pass completed it, every step.
    CHECK(ahead == 2 * kSteps);
    CHECK(servers[0]->updates_applied() + servers[1]->updates_applied() >= 2 * (kSteps + 1));
    CHECK(chief.store(0).get("global_step").value.item() == kSteps + 1);
  }
  for (auto& server : servers) CHECK_NOTHROW(server->join(5s));
}

TEST_CASE("ParameterServerStrategy: sending gradients ahead gives the same values, bit for bit") {
  auto ahead = train(size_t{64} << 10, 4);
  auto batched = train(0, 4);
  CHECK(ahead.size() >= 9);  // 4 variables, their 8 Adam slots, beta powers, global_step
  CHECK(ahead == batched);
  CHECK(ahead.at("global_step") == std::vector<float>{4});
}

TEST_CASE("ps service: a failed step's staged gradients are dropped, not applied later") {
  auto servers = start_ps(1, nn::optim::sgd(1.0));
  PsClient client(PsClientOptions{.ps_addresses = {servers[0]->address()},
                                  .token = kToken,
                                  .task_name = "chief 0",
                                  .connect_timeout = 5s});
  PsPlacement placement(1);
  PsVariables variables(client, placement);
  nn::VariableStore store;
  {
    ops::NoGradGuard no_grad;
    nn::get_or_create_global_step(store);
    store.create("w", Tensor::from_vector<float>({1, 2}), true);
  }
  variables.place(store, store.names());
  variables.initialize({{"global_step", Tensor::scalar(0.0, DType::kI64)},
                        {"w", Tensor::from_vector<float>({1, 2})}});
  Tensor w = store.get("w").value;
  variables.stage({{"w", Tensor::from_vector<float>({100, 100}), w}});
  variables.discard_staged();
  variables.push_pull({{"w", Tensor::from_vector<float>({0.5f, 0.25f}), w}}, store, 0);
  CHECK(store.get("w").value.to_vector<float>() == std::vector<float>{0.5f, 1.75f});
  // Staged, then pushed: applied together, in one update.
  variables.stage({{"w", Tensor::from_vector<float>({0.5f, 0.75f}), w}});
  CHECK(variables.push_pull({}, store, 1) == 2);
  CHECK(store.get("w").value.to_vector<float>() == std::vector<float>{0, 1});
  CHECK(servers[0]->updates_applied() == 2);
}

TEST_CASE("ParameterServerStrategy: a ps task that stops with gradients in flight is named") {
  auto optimizer = nn::optim::sgd(0.1);
  auto servers = start_ps(2, optimizer);
  std::string second = servers[1]->address();
  ParameterServerStrategy chief(chief_of(servers), {.token = kToken});
  chief.run([&](ReplicaContext& r) { return step(r, optimizer, 0); });
  servers[1]->stop();  // its connections close, as when the process dies
  auto begin = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(chief.run([&](ReplicaContext& r) { return step(r, optimizer, 1); }),
                       doctest::Contains(("ps 1 at " + second).c_str()), UnavailableError);
  CHECK(std::chrono::steady_clock::now() - begin < 10s);
  chief.report_error(UnavailableError("ps 1 stopped"));  // as train_and_evaluate does
}

}  // namespace est::distribute
