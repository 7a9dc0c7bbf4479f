// The parameter-server service in one process (distribute/ps/): PsServers on loopback ports
// and workers' PsClients on threads, so the TCP protocol runs for real. Checked against the
// same updates applied to one VariableStore: the variables land on the tasks the placement
// says, a step's push applies the job's optimizer on the owner, partitioned variables and their
// slots come back whole, asynchronous pushes are all counted, and the job's end and failures
// reach every task.
#include <doctest/doctest.h>

#include <cstdlib>
#include <future>
#include <map>
#include <thread>

#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_server.h"
#include "distribute/ps/ps_variables.h"
#include "nn/optimizers.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "tests/distribute/ps_server_fixture.h"

namespace est::distribute {
namespace {

using namespace std::chrono_literals;
const std::string kToken = "0123456789abcdef0123";

struct Cluster {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::string> addresses;
};

Cluster start_ps(int n, std::optional<nn::optim::Optimizer> optimizer, int num_workers = 1) {
  Cluster cluster{.servers = testing::start_ps_servers(
                      n, {.token = kToken, .num_workers = num_workers, .optimizer = optimizer})};
  cluster.addresses = testing::addresses_of(cluster.servers);
  return cluster;
}

PsClient connect(const Cluster& cluster, const std::string& task, std::string token = kToken) {
  return PsClient(PsClientOptions{.ps_addresses = cluster.addresses,
                                  .token = std::move(token),
                                  .task_name = task,
                                  .connect_timeout = 5s});
}

// A worker's store with global_step and three variables, created in this order.
void make_model(nn::VariableStore& store) {
  ops::NoGradGuard no_grad;
  nn::get_or_create_global_step(store);
  store.create("dense/kernel", ops::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), true);
  store.create("dense/bias", ops::Tensor::from_vector<float>({0.5f, -0.5f}), true);
  store.create("emb", ops::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2}),
               true);
}

// Cuts "emb" in two, as a partitioner under TF's variable_scope for the embedding alone.
Partitioner embedding_in_two() {
  Partitioner two = fixed_size_partitioner(2);
  return [two](const std::string& name, const ops::Shape& shape, ops::DType dtype) {
    return name == "emb" ? two(name, shape, dtype) : 1;
  };
}

std::vector<NamedTensor> values_of(const nn::VariableStore& store) {
  std::vector<NamedTensor> values;
  for (const nn::Variable& v : store.variables()) values.push_back({v.name, v.value.clone()});
  return values;
}

std::vector<nn::GradAndVar> gradients(const nn::VariableStore& store, float scale) {
  std::vector<nn::GradAndVar> grads;
  for (const nn::Variable& v : store.trainable_variables()) {
    ops::Tensor g = ops::Tensor::full(v.value.shape(), scale);
    for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = scale * static_cast<float>(i + 1);
    grads.push_back({v.name, g, v.value});
  }
  return grads;
}

std::vector<float> floats(const nn::VariableStore& store, const std::string& name) {
  return store.get(name).value.to_vector<float>();
}

// A training task `name` of the job: its connection, its placement over the ps tasks, and its
// store with the model, placed (neither initialized nor pulled yet).
struct Task {
  Task(const Cluster& cluster, const std::string& name, PsPlacement over_ps = PsPlacement(2))
      : client(connect(cluster, name)),
        placement(std::move(over_ps)),
        variables(client, placement) {
    make_model(store);
    variables.place(store, store.names());
  }

  PsClient client;
  PsPlacement placement;
  PsVariables variables;
  nn::VariableStore store;
};

}  // namespace

TEST_CASE("ps service: variables live on the tasks the placement names, updated there") {
  Cluster cluster = start_ps(2, nn::optim::momentum(0.5, 0.9));
  Task chief(cluster, "chief 0", PsPlacement(2, PsLoadBalancing::kRoundRobin, embedding_in_two()));
  chief.variables.initialize(values_of(chief.store));
  // global_step, then round-robin: kernel on ps 1, bias on ps 0, emb's parts on ps 1 and 0.
  CHECK(cluster.servers[0]->names() ==
        std::vector<std::string>{"dense/bias", "emb/part_1", "global_step"});
  CHECK(cluster.servers[1]->names() == std::vector<std::string>{"dense/kernel", "emb/part_0"});

  // The same two steps on one store, locally.
  nn::VariableStore local;
  make_model(local);
  auto optimizer = nn::optim::momentum(0.5, 0.9);
  for (int step = 0; step < 2; ++step) {
    float scale = step == 0 ? 1.0f : -0.25f;
    int64_t global_step =
        chief.variables.push_pull(gradients(chief.store, scale), chief.store, step);
    CHECK(global_step == step + 1);
    optimizer.apply_gradients(local, gradients(local, scale));
  }
  for (const char* name : {"dense/kernel", "dense/bias", "emb"})
    CHECK(floats(chief.store, name) == floats(local, name));
  CHECK(chief.store.get("global_step").value.item() == 2);
  // Momentum slots live beside their variable (part); the checkpoint's view joins them.
  CHECK(cluster.servers[1]->names() ==
        std::vector<std::string>{"dense/kernel", "dense/kernel/Momentum", "emb/part_0",
                                 "emb/part_0/Momentum"});
  std::map<std::string, ops::Tensor> all;
  for (NamedTensor& t : chief.variables.pull_all()) all[t.name] = t.value;
  CHECK(all.size() == local.size());
  for (const nn::Variable& v : local.variables()) {
    INFO(v.name);
    REQUIRE(all.contains(v.name));
    CHECK(all[v.name].to_vector<double>() == v.value.to_vector<double>());
  }
  CHECK(cluster.servers[0]->updates_applied() == 2);
}

TEST_CASE("ps service: a restored checkpoint's slots go beside their variable's parts") {
  Cluster cluster = start_ps(2, nn::optim::momentum(0.5, 0.9));
  Task chief(cluster, "chief 0", PsPlacement(2, PsLoadBalancing::kRoundRobin, embedding_in_two()));
  std::vector<NamedTensor> restored = values_of(chief.store);
  restored.push_back({"emb/Momentum", ops::Tensor::full({5, 2}, 0.25)});
  restored.push_back({"beta1_power", ops::Tensor::scalar(0.9)});  // no slot: every task
  chief.variables.initialize(restored);
  CHECK(cluster.servers[0]->names() == std::vector<std::string>{"beta1_power", "dense/bias",
                                                                "emb/part_1", "emb/part_1/Momentum",
                                                                "global_step"});
  std::map<std::string, ops::Tensor> all;
  for (NamedTensor& t : chief.variables.pull_all()) all[t.name] = t.value;
  CHECK(all.at("emb/Momentum").shape() == ops::Shape{5, 2});
  CHECK(all.at("emb/Momentum").to_vector<float>() == std::vector<float>(10, 0.25f));
  CHECK(all.at("beta1_power").item() == doctest::Approx(0.9));
}

TEST_CASE("ps service: workers wait for the chief's initialization, then pull") {
  Cluster cluster = start_ps(2, nn::optim::sgd(0.1), 2);
  auto worker_done = std::async(std::launch::async, [&] {
    Task worker(cluster, "worker 0");
    ops::NoGradGuard no_grad;
    worker.store.assign("dense/bias", ops::Tensor::from_vector<float>({9, 9}));  // another seed
    worker.variables.pull(worker.store, 10s);
    return floats(worker.store, "dense/bias");
  });
  std::this_thread::sleep_for(300ms);  // the worker asks before the chief initializes
  Task chief(cluster, "chief 0");
  chief.variables.initialize(values_of(chief.store));
  CHECK(worker_done.get() == std::vector<float>{0.5f, -0.5f});
}

TEST_CASE("ps service: asynchronous workers' pushes are each applied once") {
  Cluster cluster = start_ps(2, nn::optim::sgd(0.01), 3);
  Task chief(cluster, "chief 0");
  chief.variables.initialize(values_of(chief.store));
  constexpr int kSteps = 25;
  std::vector<std::future<void>> workers;
  for (int w = 0; w < 3; ++w)
    workers.push_back(std::async(std::launch::async, [&, w] {
      Task worker(cluster, "worker " + std::to_string(w));
      int64_t step = worker.variables.pull(worker.store, 5s);
      for (int i = 0; i < kSteps; ++i)
        step = worker.variables.push_pull(gradients(worker.store, 1.0f), worker.store, step);
    }));
  for (auto& w : workers) w.get();
  CHECK(chief.variables.pull(chief.store, 1s) == 3 * kSteps);
  // The gradients do not depend on the values: every push moves the bias by -0.01 * (1, 2).
  std::vector<float> bias = floats(chief.store, "dense/bias");
  CHECK(bias[0] == doctest::Approx(0.5 - 0.01 * 75));
  CHECK(bias[1] == doctest::Approx(-0.5 - 0.01 * 75 * 2));
  // Every training task says it is done: the ps tasks end by themselves.
  for (int w = 0; w < 2; ++w) chief.variables.finish("worker " + std::to_string(w), false);
  CHECK_THROWS_AS(cluster.servers[0]->join(300ms), DeadlineExceededError);  // one to go
  chief.variables.finish("worker 2", false);
  for (auto& server : cluster.servers) CHECK_NOTHROW(server->join(5s));
}

TEST_CASE("ps service: the chief ends the job, or a failure ends it with the error") {
  SUBCASE("end") {
    Cluster cluster = start_ps(2, nn::optim::sgd(0.1), 4);
    auto worker = std::make_unique<PsClient>(connect(cluster, "worker 0"));
    PsClient client = connect(cluster, "chief 0");
    PsPlacement placement(2);
    PsVariables(client, placement).finish("chief 0", true);
    // worker 0 is still connected (stepping): the job waits for it...
    CHECK_THROWS_AS(cluster.servers[0]->join(300ms), DeadlineExceededError);
    // ...until it goes away (done, or dead: an asynchronous job does not wait for the dead).
    worker.reset();
    for (auto& server : cluster.servers) CHECK_NOTHROW(server->join(5s));
  }
  SUBCASE("abort") {
    Cluster cluster = start_ps(2, nn::optim::sgd(0.1), 4);
    PsClient client = connect(cluster, "worker 1");
    PsPlacement placement(2);
    PsVariables(client, placement).abort("ps 3 at 10.0.0.1:1 stopped responding");
    for (auto& server : cluster.servers)
      CHECK_THROWS_WITH_AS(server->join(5s), doctest::Contains("ps 3 at 10.0.0.1:1"), AbortedError);
  }
}

TEST_CASE("ps service: a ps task that dies is named by the worker's next step") {
  Cluster cluster = start_ps(2, nn::optim::sgd(0.1));
  Task chief(cluster, "chief 0");
  chief.variables.initialize(values_of(chief.store));
  chief.variables.push_pull(gradients(chief.store, 1.0f), chief.store, 0);
  cluster.servers[1]->stop();  // its connections close, as when the process dies
  CHECK_THROWS_WITH_AS(chief.variables.push_pull(gradients(chief.store, 1.0f), chief.store, 1),
                       doctest::Contains(("ps 1 at " + cluster.addresses[1]).c_str()),
                       UnavailableError);
}

TEST_CASE("ps service: a worker on the ps task's machine talks to it over shared memory") {
  // Frames larger than the 4 MiB channels too: a 6 MB variable streams through in pieces.
  Cluster cluster = start_ps(1, nn::optim::sgd(0.5), 2);
  auto make = [](nn::VariableStore& store) {
    ops::NoGradGuard no_grad;
    nn::get_or_create_global_step(store);
    store.create("big", ops::Tensor::full({1500, 1000}, 0.25f), true);
    store.create("small", ops::Tensor::from_vector<float>({1, 2, 3}), true);
  };
  nn::VariableStore local;
  make(local);
  auto optimizer = nn::optim::sgd(0.5);
  // Both connections stay open to the end (a ps task stops once no training task is left).
  std::vector<std::unique_ptr<PsClient>> clients;
  for (const char* mode : {"", "tcp"}) {
    INFO("EST_DATA_PLANE=" << mode);
    if (*mode) ::setenv("EST_DATA_PLANE", mode, 1);
    clients.push_back(std::make_unique<PsClient>(connect(cluster, *mode ? "worker 1" : "chief 0")));
    PsClient& client = *clients.back();
    client.connect();
    ::unsetenv("EST_DATA_PLANE");
    CHECK(client.shared_memory(0) == !*mode);
    PsPlacement placement(1);
    PsVariables variables(client, placement);
    nn::VariableStore store;
    make(store);
    variables.place(store, store.names());
    if (!*mode) variables.initialize(values_of(store));
    for (int step = 0; step < 2; ++step) {
      float scale = step == 0 ? 1.0f : -0.5f;
      variables.push_pull(gradients(store, scale), store, step);
      optimizer.apply_gradients(local, gradients(local, scale));
    }
    for (const char* name : {"big", "small"}) CHECK(floats(store, name) == floats(local, name));
  }
  CHECK(cluster.servers[0]->updates_applied() == 4);
}

TEST_CASE("ps service: frames that fit the shared-memory channel decode in place, wrapped too") {
  // 2.4 MB frames through 4 MiB channels: every other one wraps at the channel's end, where the
  // reader still sees it as one span (the buffer is mapped twice); the values must match SGD
  // applied locally, step after step.
  Cluster cluster = start_ps(1, nn::optim::sgd(0.25), 1);
  auto make = [](nn::VariableStore& store) {
    ops::NoGradGuard no_grad;
    nn::get_or_create_global_step(store);
    std::vector<float> ramp(600000);
    for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i % 977) * 0.01f;
    store.create("medium", ops::Tensor::from_vector<float>(ramp, {600, 1000}), true);
  };
  nn::VariableStore local, store;
  make(local);
  make(store);
  auto optimizer = nn::optim::sgd(0.25);
  auto client = std::make_unique<PsClient>(connect(cluster, "chief 0"));
  client->connect();
  REQUIRE(client->shared_memory(0));
  PsPlacement placement(1);
  PsVariables variables(*client, placement);
  variables.place(store, store.names());
  variables.initialize(values_of(store));
  for (int step = 0; step < 7; ++step) {
    float scale = step % 2 == 0 ? 1.0f : -0.75f;
    variables.push_pull(gradients(store, scale), store, step);
    optimizer.apply_gradients(local, gradients(local, scale));
    CHECK(floats(store, "medium") == floats(local, "medium"));
  }
  CHECK(cluster.servers[0]->updates_applied() == 7);
}

TEST_CASE("ps service: a ps task's serving threads take its host's share of the cores") {
  // As a training task's replicas: cores / the job's tasks on this host, from TF_CONFIG unless
  // the options say how many processes share the host.
  const char* saved = std::getenv("TF_CONFIG");
  std::optional<std::string> previous = saved ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv(
      "TF_CONFIG",
      R"({"cluster": {"chief": ["localhost:1"], "worker": ["127.0.0.1:2", "elsewhere.example:3"],
               "ps": ["127.0.0.1:4"]}, "task": {"type": "ps", "index": 0}})",
      1);
  PsServer from_tf_config({.address = "127.0.0.1:0", .token = kToken});
  PsServer told({.address = "127.0.0.1:0", .token = kToken, .local_processes = 1 << 10});
  ::unsetenv("TF_CONFIG");
  PsServer alone({.address = "127.0.0.1:0", .token = kToken});
  if (previous) ::setenv("TF_CONFIG", previous->c_str(), 1);
  CHECK(from_tf_config.serving_threads() == ops::threads_for_local_processes(3));
  CHECK(told.serving_threads() == ops::threads_for_local_processes(1 << 10));
  CHECK(alone.serving_threads() == ops::threads_for_local_processes(1));
}

TEST_CASE("ps wire: a reply's values decode straight into tensors of their dtype and shape") {
  PsReply reply;
  reply.tensors = {{"a", ops::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                   {"b", ops::Tensor::from_vector<float>({7, 8})},
                   {"c", ops::Tensor::from_vector<float>({9})}};
  ops::Tensor a = ops::Tensor::zeros({2, 3});
  ops::Tensor b = ops::Tensor::zeros({3});  // another shape: decoded into a fresh tensor
  ops::Tensor c = ops::Tensor::zeros({1}, ops::DType::kF64);  // another dtype: the same
  std::map<std::string, ops::Tensor*> into{{"a", &a}, {"b", &b}, {"c", &c}};
  PsReply decoded =
      decode_reply(encode(reply), "a test", [&](const std::string& name) { return into.at(name); });
  REQUIRE(decoded.tensors.size() == 3);
  CHECK(decoded.tensors[0].value.raw_data() == a.raw_data());
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(decoded.tensors[1].value.raw_data() != b.raw_data());
  CHECK(decoded.tensors[1].value.to_vector<float>() == std::vector<float>{7, 8});
  CHECK(b.to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(decoded.tensors[2].value.raw_data() != c.raw_data());
  CHECK(c.to_vector<double>() == std::vector<double>{0});
}

TEST_CASE("ps service: a connection without the job token is refused") {
  Cluster cluster = start_ps(1, nn::optim::sgd(0.1));
  CHECK_THROWS_WITH_AS(connect(cluster, "intruder", "another-token-0123456"),
                       doctest::Contains("job token"), UnavailableError);
  CHECK_NOTHROW(connect(cluster, "chief 0"));
}

}  // namespace est::distribute
