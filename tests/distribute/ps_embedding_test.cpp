// Embedding tables on parameter servers (distribute/ps/): a step pulls only the rows its
// lookups read and pushes their gradients as rows, which the ps task applies with the
// optimizer's sparse update, as TF's embedding_lookup and IndexedSlices do on a ps. In one
// process: PsServers on loopback ports and a chief's ParameterServerStrategy (one worker, so the
// asynchronous job is deterministic). Checked: the bytes of a step do not grow with the table;
// the variables after several steps are those of the dense path (the table read through a
// one-hot matmul: pulled whole, dense gradients) and of one process; a partitioned table's ids
// reach the part that holds them; a whole read of a table read by rows so far sees fresh
// values; feature columns' tables move by rows too; row slices survive the wire; ids past the
// table are an error naming the variable and the id.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <thread>

#include "distribute/ps/parameter_server_strategy.h"
#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_server.h"
#include "distribute/ps/ps_variables.h"
#include "feature_column/categorical.h"
#include "feature_column/dense_columns.h"
#include "feature_column/input_layer.h"
#include "feature_column/linear.h"
#include "nn/nn.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "tests/distribute/ps_server_fixture.h"

namespace est::distribute {
namespace {

using namespace std::chrono_literals;
const std::string kToken = "ps-embedding-test-token-01";
constexpr int64_t kDimension = 8;

struct Cluster {
  std::vector<std::unique_ptr<PsServer>> servers;
  TfConfig config;  // the chief's
};

// `workers`: training tasks besides the chief, in the cluster as "worker" tasks.
Cluster start_job(int num_ps, const nn::optim::Optimizer& optimizer, int workers = 0) {
  Cluster cluster{
      .servers = testing::start_ps_servers(
          num_ps, {.token = kToken, .num_workers = 1 + workers, .optimizer = optimizer})};
  cluster.config = testing::ps_job_config(testing::addresses_of(cluster.servers), workers);
  return cluster;
}

enum class Read { kRows, kOneHot, kRowsThenWhole };

// Step `step` of a small model over a table of `rows` rows: 6 distinct ids of the batch, their
// embeddings through a dense layer, a squared error. kRows reads the table through nn::embedding
// (rows only); kOneHot through one_hot(ids) x table (whole, dense gradient); kRowsThenWhole as
// kRows, plus from step 2 on a penalty on the whole table (a whole read of it).
Tensor model_step(ReplicaContext& replica, int64_t rows, int step, Read read,
                  const nn::optim::Optimizer& optimizer = nn::optim::adagrad(0.5)) {
  nn::ModelContext& ctx = replica.model_context();
  ctx.begin_call();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 6; ++i) ids.push_back((step * 5 + i * (rows / 6 + 1)) % rows);
  Tensor id_tensor = Tensor::from_vector(ids);
  const nn::Initializer init = nn::random_uniform(-0.5, 0.5);
  Tensor embedded;
  if (read == Read::kOneHot) {
    Tensor table = ctx.get_variable("embedding/embeddings", {rows, kDimension}, DType::kF32, init);
    embedded = ops::matmul(ops::one_hot(id_tensor, rows), table);
  } else {
    embedded = nn::embedding(
        ctx, id_tensor,
        {.input_dim = rows, .output_dim = kDimension, .embeddings_initializer = init});
  }
  Tensor out = nn::dense(ctx, embedded, {.units = 1});
  std::vector<float> targets = {1, -1, 0.5f, 2, 0, -0.5f};
  Tensor loss = ops::mul(
      ops::sum(ops::squared_difference(out, Tensor::from_vector(targets, {6, 1}))), 1.0 / 6);
  if (read == Read::kRowsThenWhole && step >= 2) {
    Tensor table = ctx.get_variable("embedding/embeddings", {rows, kDimension}, DType::kF32, init);
    loss = ops::add(loss, ops::mul(ops::sum(ops::square(table)), 1e-3));
  }
  replica.run_train_op(optimizer.minimize(loss, ctx));
  return loss;
}

// Every variable and slot after `steps` steps (through the checkpoint's reads).
std::map<std::string, std::vector<float>> values_after(Strategy& strategy) {
  nn::VariableStore& store = strategy.store(0);
  strategy.variable_home().before_checkpoint(store);
  std::map<std::string, std::vector<float>> values;
  for (const nn::Variable& v : store.variables())
    if (v.name != "global_step") values[v.name] = v.value.to_vector<float>();
  return values;
}

std::map<std::string, std::vector<float>> train(
    int num_ps, Partitioner partitioner, Read read, int steps,
    std::optional<SyncReplicasOptions> sync = std::nullopt, uint64_t* last_step_bytes = nullptr,
    int64_t rows = 50, const nn::optim::Optimizer& optimizer = nn::optim::adagrad(0.5)) {
  Cluster cluster = start_job(num_ps, optimizer);
  ParameterServerStrategy chief(
      cluster.config,
      {.token = kToken, .partitioner = std::move(partitioner), .sync_replicas = sync});
  for (int s = 0; s < steps; ++s) {
    uint64_t before = chief.bytes_sent() + chief.bytes_received();
    chief.run([&](ReplicaContext& r) { return model_step(r, rows, s, read, optimizer); });
    if (last_step_bytes) *last_step_bytes = chief.bytes_sent() + chief.bytes_received() - before;
  }
  return values_after(chief);
}

void check_same(const std::map<std::string, std::vector<float>>& got,
                const std::map<std::string, std::vector<float>>& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, values] : want) {
    INFO(name);
    REQUIRE(got.contains(name));
    CHECK(got.at(name) == values);
  }
}

// The bytes the chief moves in its fourth step, over a table of `rows` rows.
uint64_t bytes_of_a_step(int64_t rows) {
  Cluster cluster = start_job(1, nn::optim::adagrad(0.5));
  ParameterServerStrategy chief(cluster.config, {.token = kToken});
  auto run = [&](int s) {
    chief.run([&](ReplicaContext& r) { return model_step(r, rows, s, Read::kRows); });
  };
  for (int s = 0; s < 3; ++s) run(s);
  uint64_t before = chief.bytes_sent() + chief.bytes_received();
  run(3);
  return chief.bytes_sent() + chief.bytes_received() - before;
}

// A canned estimator's kind of model over one id feature of `buckets` buckets: an
// embedding_column through input_layer beside a linear_model of the same ids (both tables read
// by rows: safe_embedding_lookup_sparse), a few ids per example, -1 for none.
Tensor columns_step(ReplicaContext& replica, int64_t buckets, int step) {
  namespace fc = feature_column;
  nn::ModelContext& ctx = replica.model_context();
  ctx.begin_call();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 8; ++i) ids.push_back(i % 3 == 2 ? -1 : (step * 7 + i * 997) % buckets);
  fc::Features features{{"id", Tensor::from_vector(ids, {4, 2})}};
  auto id = fc::categorical_column_with_identity("id", buckets);
  Tensor net = fc::input_layer(features, {fc::embedding_column(id, 4)}, ctx);
  Tensor logits =
      ops::add(nn::dense(ctx, net, {.units = 1}), fc::linear_model(features, {id}, ctx));
  Tensor loss = ops::mul(
      ops::sum(ops::squared_difference(logits, Tensor::from_vector<float>({1, 0, 1, 0}, {4, 1}))),
      0.25);
  replica.run_train_op(nn::optim::adagrad(0.5).minimize(loss, ctx));
  return loss;
}

}  // namespace

TEST_CASE("ps embedding: feature columns' tables are read by rows, with one process's results") {
  const int64_t buckets = 20000;
  const int steps = 4;
  Cluster cluster = start_job(2, nn::optim::adagrad(0.5));
  ParameterServerStrategy chief(cluster.config, {.token = kToken});
  uint64_t last_step = 0;
  for (int s = 0; s < steps; ++s) {
    uint64_t before = chief.bytes_sent() + chief.bytes_received();
    chief.run([&](ReplicaContext& r) { return columns_step(r, buckets, s); });
    last_step = chief.bytes_sent() + chief.bytes_received() - before;
  }
  // Not the tables (20000 x 4 and 20000 x 1 floats): their rows read, and the dense layer.
  CHECK(last_step < 8192);
  ParameterServerStrategy local(TfConfig{}, {});
  for (int s = 0; s < steps; ++s)
    local.run([&](ReplicaContext& r) { return columns_step(r, buckets, s); });
  check_same(values_after(chief), values_after(local));
}

TEST_CASE("ps embedding: a step moves the rows it reads, not the table") {
  const uint64_t small = bytes_of_a_step(600);
  const uint64_t large = bytes_of_a_step(60000);
  // The same 6 rows read and pushed, whatever the table's size.
  CHECK(large == small);
  // Far below one copy of the large table (60000 x 8 floats): 6 rows out, 6 back, and the
  // dense layer's 9 values each way, with names and headers.
  CHECK(large < 4096);
}

TEST_CASE("ps embedding: a worker other than the chief reads a table by rows from its first step") {
  // As TF's workers, which gather rows on the ps from their first lookup: the table is not
  // pulled whole when the worker's model_fn creates it, only the rows it reads (after the chief
  // initialized it). The chief steps twice, the worker once, in turn: one process's 3 steps.
  const int64_t rows = 20000;
  Cluster cluster = start_job(1, nn::optim::adagrad(0.5), 1);
  TfConfig worker_config = cluster.config;
  worker_config.task = TaskSpec{TaskType::kWorker, 0};
  ParameterServerStrategy chief(cluster.config, {.token = kToken});
  for (int s = 0; s < 2; ++s)
    chief.run([&](ReplicaContext& r) { return model_step(r, rows, s, Read::kRows); });
  uint64_t bytes = 0;
  {
    ParameterServerStrategy worker(worker_config, {.token = kToken});
    CHECK_FALSE(worker.is_chief());
    uint64_t before = worker.bytes_sent() + worker.bytes_received();
    worker.run([&](ReplicaContext& r) { return model_step(r, rows, 2, Read::kRows); });
    bytes = worker.bytes_sent() + worker.bytes_received() - before;
  }
  // 6 rows each way, the dense layer pulled at its first read and then each way: not the table
  // (20000 x 8 floats, 640000 bytes).
  MESSAGE("the worker's first step moved ", bytes, " bytes");
  CHECK(bytes < 4096);
  ParameterServerStrategy local(TfConfig{}, {});
  for (int s = 0; s < 3; ++s)
    local.run([&](ReplicaContext& r) { return model_step(r, rows, s, Read::kRows); });
  check_same(values_after(chief), values_after(local));
}

TEST_CASE("ps embedding: a worker's first lookup waits for the chief to initialize the table") {
  Cluster cluster = start_job(2, nn::optim::adagrad(0.5), 1);
  TfConfig worker_config = cluster.config;
  worker_config.task = TaskSpec{TaskType::kWorker, 0};
  std::optional<std::string> worker_error;
  int64_t worker_step = -1;
  std::thread worker_thread([&] {
    try {
      ParameterServerStrategy worker(worker_config,
                                     {.token = kToken, .partitioner = fixed_size_partitioner(3)});
      worker.run([&](ReplicaContext& r) { return model_step(r, 50, 1, Read::kRows); });
      worker_step = worker.store(0).get("global_step").value.item();
    } catch (const std::exception& error) {
      worker_error = error.what();
    }
  });
  // The worker's lookup reaches the ps tasks before the chief has created the table.
  std::this_thread::sleep_for(300ms);
  {
    ParameterServerStrategy chief(cluster.config,
                                  {.token = kToken, .partitioner = fixed_size_partitioner(3)});
    chief.run([&](ReplicaContext& r) { return model_step(r, 50, 0, Read::kRows); });
    worker_thread.join();
  }
  CHECK_MESSAGE(!worker_error, worker_error.value_or(""));
  CHECK(worker_step == 2);  // after the chief's step and its own
}

TEST_CASE("ps embedding: rows pulled and pushed sparse give the dense path's variables") {
  const int steps = 5;
  auto dense = train(1, {}, Read::kOneHot, steps);
  auto sparse = train(1, {}, Read::kRows, steps);
  CHECK(sparse.contains("embedding/embeddings/Adagrad"));
  check_same(sparse, dense);
  // And those of one process (no ps tasks: ParameterServerStrategy trains locally).
  ParameterServerStrategy local(TfConfig{}, {});
  for (int s = 0; s < steps; ++s)
    local.run([&](ReplicaContext& r) { return model_step(r, 50, s, Read::kRows); });
  check_same(sparse, values_after(local));
}

TEST_CASE("ps embedding: a partitioned table's ids reach the parts that hold them") {
  const int steps = 5;
  auto whole = train(1, {}, Read::kRows, steps);
  // 50 rows in 3 parts (17, 17, 16 rows) over 2 ps tasks: the batches' ids fall in every part.
  auto parts = train(2, fixed_size_partitioner(3), Read::kRows, steps);
  check_same(parts, whole);

  // The rows themselves: a table whose row i holds i, cut in 3 parts on 2 tasks.
  Cluster cluster = start_job(2, nn::optim::sgd(0.1));
  PsClient client(PsClientOptions{.ps_addresses = cluster.config.cluster.job_tasks(TaskType::kPs),
                                  .token = kToken,
                                  .task_name = "chief 0",
                                  .connect_timeout = 5s});
  PsPlacement placement(2, PsLoadBalancing::kRoundRobin, fixed_size_partitioner(3));
  PsVariables variables(client, placement);
  std::vector<float> table(10 * 2);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i / 2);
  variables.place("emb", Tensor::from_vector(table, {10, 2}));
  variables.initialize({{"emb", Tensor::from_vector(table, {10, 2})}});
  Tensor cache = Tensor::full({10, 2}, -1.0);
  variables.pull_rows("emb", Tensor::from_vector<int64_t>({9, 0, 4, -1, 3, 9}), cache);
  // Parts hold rows 0-3, 4-6, 7-9: ids 0, 3 from the first, 4 from the second, 9 from the last.
  std::vector<float> want(20, -1.0f);
  for (int row : {0, 3, 4, 9}) want[2 * row] = want[2 * row + 1] = static_cast<float>(row);
  CHECK(cache.to_vector<float>() == want);
}

TEST_CASE("ps embedding: synchronous training moves rows too, with the asynchronous result") {
  // One training task aggregating its own gradients: each step as the asynchronous one (the
  // accumulator's mean of one row-sparse gradient, applied by the ps task).
  const int steps = 4;
  uint64_t bytes = 0;
  auto sync =
      train(2, fixed_size_partitioner(3), Read::kRows, steps,
            SyncReplicasOptions{.replicas_to_aggregate = 1, .num_tokens = 0}, &bytes, 20000);
  check_same(sync, train(1, {}, Read::kRows, steps, std::nullopt, nullptr, 20000));
  // 6 rows each way, the dense layer, the token: not the table (20000 x 8 floats).
  CHECK(bytes < 4096);
}

TEST_CASE("ps embedding: synchronous momentum updates only the rows read, as TF's sparse apply") {
  // Each step reads other rows. The accumulator's mean stays rows and the ps applies momentum's
  // sparse update, so a row read at step 0 only keeps its value afterwards: the asynchronous
  // (sparse) result exactly, and not that of densifying the mean (momentum would go on moving
  // every row it ever touched).
  const int steps = 4;
  const nn::optim::Optimizer momentum = nn::optim::momentum(0.1, 0.9);
  auto sync = train(2, fixed_size_partitioner(3), Read::kRows, steps,
                    SyncReplicasOptions{.replicas_to_aggregate = 1, .num_tokens = 0}, nullptr, 50,
                    momentum);
  check_same(sync, train(1, {}, Read::kRows, steps, std::nullopt, nullptr, 50, momentum));
  auto dense = train(1, {}, Read::kOneHot, steps, std::nullopt, nullptr, 50, momentum);
  CHECK(dense.at("embedding/embeddings") != sync.at("embedding/embeddings"));
}

TEST_CASE("ps embedding: a whole read of a table read by rows so far sees fresh values") {
  // Steps 0-1 read rows; from step 2 on the table is also read whole (pulled whole then, and
  // with every later step): the same as in one process.
  const int steps = 4;
  auto ps = train(1, {}, Read::kRowsThenWhole, steps);
  ParameterServerStrategy local(TfConfig{}, {});
  for (int s = 0; s < steps; ++s)
    local.run([&](ReplicaContext& r) { return model_step(r, 50, s, Read::kRowsThenWhole); });
  check_same(ps, values_after(local));
}

TEST_CASE("ps embedding: row slices cross the wire; malformed ones are a DataLossError") {
  PsRequest push{.kind = PsRequestKind::kPushPull};
  push.tensors.push_back(
      {.name = "emb",
       .rows = ops::make_indexed_slices(Tensor::from_vector<int64_t>({4, 1}),
                                        Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), {5, 2})});
  push.tensors.push_back({.name = "dense/bias", .value = Tensor::from_vector<float>({7})});
  PsRequest got = decode_request(encode(push), "chief 0");
  REQUIRE(got.tensors.size() == 2);
  CHECK_FALSE(got.tensors[0].value.defined());
  CHECK(got.tensors[0].rows.dense_shape == Shape{5, 2});
  CHECK(got.tensors[0].rows.indices.to_vector<int64_t>() == std::vector<int64_t>{4, 1});
  CHECK(got.tensors[0].rows.values.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK_FALSE(got.tensors[1].rows.defined());
  CHECK(got.tensors[1].value.to_vector<float>() == std::vector<float>{7});
  // Row 5 of a 5-row variable (slices built unchecked, as a corrupt peer would send them).
  push.tensors[0].rows.indices = Tensor::from_vector<int64_t>({5, 1});
  CHECK_THROWS_WITH_AS(decode_request(encode(push), "chief 0"),
                       doctest::Contains("malformed row slices for 'emb'"), DataLossError);
}

TEST_CASE("ps embedding: an id past the table names the variable and the id") {
  Cluster cluster = start_job(1, nn::optim::sgd(0.1));
  SUBCASE("in a model_fn's lookup") {
    ParameterServerStrategy chief(cluster.config, {.token = kToken});
    chief.run([&](ReplicaContext& r) { return model_step(r, 50, 0, Read::kRows); });
    auto bad_step = [&](ReplicaContext& r) {
      nn::ModelContext& ctx = r.model_context();
      ctx.begin_call();
      Tensor rows = nn::embedding(ctx, Tensor::from_vector<int64_t>({3, 57}),
                                  {.input_dim = 50, .output_dim = kDimension});
      return ops::sum(rows);
    };
    CHECK_THROWS_WITH_AS(chief.run(bad_step),
                         doctest::Contains("row 57 of 'embedding/embeddings', which has 50 rows"),
                         InvalidArgumentError);
  }
  SUBCASE("asked of the ps task directly") {
    PsClient client(PsClientOptions{.ps_addresses = cluster.config.cluster.job_tasks(TaskType::kPs),
                                    .token = kToken,
                                    .task_name = "chief 0",
                                    .connect_timeout = 5s});
    client.exchange({PsRequest{.kind = PsRequestKind::kInitialize,
                               .tensors = {{"emb", Tensor::zeros({4, 2})}}}},
                    "initializing");
    PsRequest pull{.kind = PsRequestKind::kPullRows,
                   .tensors = {{"emb", Tensor::from_vector<int64_t>({1, 4})}}};
    CHECK_THROWS_WITH_AS(client.exchange({pull}, "pulling rows"),
                         doctest::Contains("row 4 of 'emb', which has rows [0, 4)"),
                         InvalidArgumentError);
  }
}

}  // namespace est::distribute
