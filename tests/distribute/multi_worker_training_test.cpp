// MultiWorkerMirroredStrategy trains like one process on the global batch: workers run as
// threads of this process, each with its own strategy, seed and replicas, talking over the real
// runtime (gRPC coordination, TCP ring). Each step every worker takes its rows of the global
// batch (rows [w B/W, (w+1) B/W)); after the steps every worker's variables (optimizer slots
// included) must be bitwise the same, and equal to unreplicated training on the global batch
// within |a - b| <= 2e-5 (1 + |b|) (float32 sums in another order). With batch norm the
// statistics are per replica (TensorFlow's default), so the reference is MirroredStrategy with
// the same number of replicas in one process. An embedding model's row-sparse gradients are
// gathered across replicas and workers.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>

#include "checkpoint/checkpoint.h"
#include "distribute/distribute.h"
#include "tests/command.h"
#include "tests/distribute/training_util.h"
#include "tests/process_group.h"

using namespace est;
using namespace est::nn;
using namespace est::distribute;
using namespace est::testing;

namespace {

using namespace std::chrono_literals;
using Variables = std::map<std::string, std::vector<double>>;

const std::string kToken = "multi-worker-test-token-0123";

TfConfig loopback_config(int workers) {
  ClusterSpec::Jobs jobs;
  for (int i = 0; i < workers; ++i)
    jobs[TaskType::kWorker].push_back("127.0.0.1:" + std::to_string(free_port()));
  return TfConfig{.cluster = ClusterSpec(jobs)};
}

Variables snapshot(VariableStore& store) {
  Variables out;
  for (const Variable& v : store.variables()) out[v.name] = v.value.to_vector<double>();
  return out;
}

Tensor bn_model(ModelContext& ctx, const Tensor& x) {
  Tensor h = dense(ctx, x, {.units = 6});
  h = batch_normalization(ctx, h, {.momentum = 0.9});
  return dense(ctx, relu(h), {.units = 3});
}

// One step on `strategy` of its replicas' share of `batch`; the mean loss and 1 /
// num_replicas_in_sync as the gradient scale (the Estimator's way).
void step(Strategy& strategy, const Model& model, const MakeOptimizer& make_optimizer,
          const data::Element& batch) {
  int local = strategy.num_local_replicas();
  std::vector<data::Element> parts = split_batch(batch, strategy.num_replicas_in_sync());
  std::vector<data::Element> mine(parts.begin() + strategy.worker_index() * local,
                                  parts.begin() + (strategy.worker_index() + 1) * local);
  strategy.run(
      [&](ReplicaContext& replica) {
        ModelContext& ctx = replica.model_context();
        ctx.begin_call();
        Tensor logits = model(ctx, replica.input().features.at("x"));
        Tensor loss = sparse_softmax_cross_entropy(replica.input().labels, logits);
        replica.run_train_op(make_optimizer().minimize(loss, ctx),
                             1.0 / replica.num_replicas_in_sync());
        return loss;
      },
      mine);
}

// Trains on `workers` worker threads with `local` replicas each; every worker's variables.
std::vector<Variables> train_workers(int workers, int local, const Model& model,
                                     const MakeOptimizer& make_optimizer, Shape global_shape,
                                     int steps, int64_t bytes_per_pack = 0) {
  TfConfig config = loopback_config(workers);
  std::vector<std::future<Variables>> futures;
  for (int w = 0; w < workers; ++w)
    futures.push_back(std::async(std::launch::async, [&, w] {
      TfConfig mine = config;
      mine.task = TaskSpec{TaskType::kWorker, w};
      std::vector<std::string> devices;
      for (int r = 0; r < local; ++r) devices.push_back("/cpu:" + std::to_string(r));
      // Each worker has another seed: the chief's initial values must win.
      MultiWorkerMirroredStrategy strategy(mine, {.bytes_per_pack = bytes_per_pack},
                                           {.token = kToken,
                                            .session_creation_timeout = 30s,
                                            .heartbeat_interval = 200ms,
                                            .heartbeat_timeout = 3000ms,
                                            .devices = devices,
                                            .seed = kSeed + 1000 * static_cast<uint64_t>(w)});
      for (int s = 0; s < steps; ++s)
        step(strategy, model, make_optimizer, make_batch(global_shape, uint64_t(s)));
      for (int r = 1; r < local; ++r)
        CHECK(snapshot(strategy.store(r)) == snapshot(strategy.store(0)));
      return snapshot(strategy.store(0));
    }));
  std::vector<Variables> results;
  for (auto& future : futures) {
    REQUIRE(future.wait_for(120s) == std::future_status::ready);
    results.push_back(future.get());
  }
  return results;
}

Variables train_unreplicated(const Model& model, const MakeOptimizer& make_optimizer,
                             Shape global_shape, int steps) {
  VariableStore store;
  ModelContext ctx(store, Mode::kTrain, kSeed);
  for (int s = 0; s < steps; ++s) {
    data::Element batch = make_batch(global_shape, uint64_t(s));
    ctx.begin_call();
    Tensor logits = model(ctx, batch.features.at("x"));
    make_optimizer().minimize(sparse_softmax_cross_entropy(batch.labels, logits), ctx).run();
  }
  return snapshot(store);
}

void check_equal_workers_and_close(const std::vector<Variables>& workers,
                                   const Variables& reference) {
  for (size_t w = 1; w < workers.size(); ++w) {
    CAPTURE(w);
    CHECK(workers[w] == workers[0]);  // bitwise, every variable and slot
  }
  REQUIRE(workers[0].size() == reference.size());
  for (const auto& [name, expected] : reference) {
    CAPTURE(name);
    REQUIRE(workers[0].count(name) == 1);
    const std::vector<double>& actual = workers[0].at(name);
    REQUIRE(actual.size() == expected.size());
    double worst = 0;
    for (size_t i = 0; i < actual.size(); ++i)
      worst = std::max(worst, std::abs(actual[i] - expected[i]) / (1 + std::abs(expected[i])));
    CHECK(worst <= kTolerance);
  }
  CHECK(workers[0].at("global_step") == reference.at("global_step"));
}

}  // namespace

TEST_CASE("multi-worker: 2 workers train the MLP like one process, every optimizer") {
  // Both ways of reducing one local replica's gradients: after the backward pass, and bucket
  // by bucket during it (what a worker with a core to spare does; strategy.h).
  for (const char* overlap : {"0", "1"}) {
    CAPTURE(overlap);
    ::setenv("EST_OVERLAP_GRADIENT_REDUCTION", overlap, 1);
    for (const NamedOptimizer& optimizer : all_optimizers()) {
      CAPTURE(optimizer.name);
      auto workers = train_workers(2, 1, mlp, optimizer.make, {8, 5}, 5);
      check_equal_workers_and_close(workers, train_unreplicated(mlp, optimizer.make, {8, 5}, 5));
    }
    ::unsetenv("EST_OVERLAP_GRADIENT_REDUCTION");
  }
}

TEST_CASE("multi-worker: 3 workers x 2 local replicas train the CNN like one process") {
  MakeOptimizer adam = [] { return optim::adam(0.01); };
  // Small packs: the gradients travel in several packs and alone.
  auto workers = train_workers(3, 2, cnn, adam, {12, 8, 8, 1}, 4, /*bytes_per_pack=*/256);
  check_equal_workers_and_close(workers, train_unreplicated(cnn, adam, {12, 8, 8, 1}, 4));
}

TEST_CASE("multi-worker: batch norm statistics per replica, as MirroredStrategy in one process") {
  MakeOptimizer momentum = [] { return optim::momentum(0.1, 0.9); };
  MirroredStrategy mirrored({"/cpu:0", "/cpu:1"}, nullptr, kSeed);
  for (int s = 0; s < 4; ++s) step(mirrored, bn_model, momentum, make_batch({8, 5}, uint64_t(s)));
  for (const char* overlap : {"0", "1"}) {  // the moving statistics ride in the first bucket
    CAPTURE(overlap);
    ::setenv("EST_OVERLAP_GRADIENT_REDUCTION", overlap, 1);
    auto workers = train_workers(2, 1, bn_model, momentum, {8, 5}, 4);
    ::unsetenv("EST_OVERLAP_GRADIENT_REDUCTION");
    check_equal_workers_and_close(workers, snapshot(mirrored.store(0)));
  }
}

namespace {

// Ids from the features ([B, 5] floats -> [B, 5] ids in [0, 1000)) into a 1000 x 4 table, then a
// dense layer: the table's gradient is row-sparse (IndexedSlices) and small against the table,
// so the all-reduce gathers the rows across replicas and workers (distribute/sparse_all_reduce.h).
Tensor embedding_mlp(ModelContext& ctx, const Tensor& x) {
  std::vector<int64_t> ids;
  for (float v : x.to_vector<float>()) ids.push_back(int64_t(std::abs(v) * 997) % 1000);
  Tensor table_rows = embedding(
      ctx, Tensor::from_vector(ids, x.shape()),
      {.input_dim = 1000, .output_dim = 4, .embeddings_initializer = random_uniform(-0.5, 0.5)});
  return dense(ctx, ops::reshape(table_rows, {x.dim(0), x.dim(1) * 4}), {.units = 3});
}

}  // namespace

TEST_CASE("multi-worker: row-sparse embedding gradients, gathered across workers, train as one") {
  MakeOptimizer adagrad = [] { return optim::adagrad(0.3); };
  const Variables reference = train_unreplicated(embedding_mlp, adagrad, {8, 5}, 4);
  for (const char* overlap : {"0", "1"}) {  // overlapped: the callback path reduces them dense
    CAPTURE(overlap);
    ::setenv("EST_OVERLAP_GRADIENT_REDUCTION", overlap, 1);
    check_equal_workers_and_close(train_workers(2, 1, embedding_mlp, adagrad, {8, 5}, 4),
                                  reference);
    ::unsetenv("EST_OVERLAP_GRADIENT_REDUCTION");
  }
  // 2 workers x 2 local replicas: gathered locally, then across the workers.
  check_equal_workers_and_close(train_workers(2, 2, embedding_mlp, adagrad, {8, 5}, 4), reference);
}

namespace {

// A custom training loop under MultiWorkerMirroredStrategy with Keras's BackupAndRestore: the
// variables exist after one forward pass, the backup (the chief's) is restored into them, and
// training runs to `steps`; `interrupt_at` stops it there without on_train_end, as a crash.
Variables train_with_backup(const TfConfig& config, int worker, const std::string& backup_dir,
                            int steps, std::optional<int> interrupt_at) {
  TfConfig mine = config;
  mine.task = TaskSpec{TaskType::kWorker, worker};
  MultiWorkerMirroredStrategy strategy(mine, {},
                                       {.token = kToken,
                                        .session_creation_timeout = 30s,
                                        .heartbeat_interval = 200ms,
                                        .heartbeat_timeout = 3000ms,
                                        .seed = kSeed + static_cast<uint64_t>(worker)});
  MakeOptimizer sgd = [] { return optim::sgd(0.1); };
  data::Element first = make_batch({8, 5}, 0);
  strategy.run([&](ReplicaContext& replica) {
    ModelContext& ctx = replica.model_context();
    ctx.begin_call();
    mlp(ctx, first.features.at("x"));
    get_or_create_global_step(ctx.store());
    return Tensor();
  });
  checkpoint::BackupAndRestore backup({.backup_dir = backup_dir,
                                       .save_freq_steps = 2,
                                       .is_chief = strategy.is_chief(),
                                       .task_id = strategy.worker_index(),
                                       .async = false});
  checkpoint::TensorBundle state = checkpoint::bundle_from_store(strategy.store(0));
  auto resumed = backup.restore(state);
  int start = resumed ? static_cast<int>(resumed->restored.global_step) : 0;
  for (int s = start; s < steps; ++s) {
    if (interrupt_at && s == *interrupt_at) return snapshot(strategy.store(0));
    step(strategy, mlp, sgd, make_batch({8, 5}, uint64_t(s)));
    backup.on_step_end(checkpoint::bundle_from_store(strategy.store(0)));
  }
  backup.on_train_end();
  return snapshot(strategy.store(0));
}

std::vector<Variables> run_backup_job(const std::string& backup_dir, int steps,
                                      std::optional<int> interrupt_at) {
  TfConfig config = loopback_config(2);
  std::vector<std::future<Variables>> futures;
  for (int w = 0; w < 2; ++w)
    futures.push_back(std::async(std::launch::async, [&, w] {
      return train_with_backup(config, w, backup_dir, steps, interrupt_at);
    }));
  std::vector<Variables> results;
  for (auto& future : futures) {
    REQUIRE(future.wait_for(120s) == std::future_status::ready);
    results.push_back(future.get());
  }
  return results;
}

}  // namespace

TEST_CASE("multi-worker: BackupAndRestore resumes an interrupted job, the chief's backup only") {
  ScratchDir dir;
  std::string backup_dir = dir / "backup";
  run_backup_job(backup_dir, 8, /*interrupt_at=*/5);
  // The chief's backup of step 4 is there; the other worker's temporary copy is gone.
  CHECK(checkpoint::latest_checkpoint(backup_dir) == backup_dir + "/backup.ckpt-4.h5");
  CHECK_FALSE(std::filesystem::exists(backup_dir + "/workertemp_1"));
  std::vector<Variables> resumed = run_backup_job(backup_dir, 8, std::nullopt);
  CHECK_FALSE(std::filesystem::exists(backup_dir));  // deleted when training finished
  std::vector<Variables> uninterrupted = run_backup_job(dir / "other", 8, std::nullopt);
  CHECK(resumed[0] == resumed[1]);
  CHECK(resumed[0] == uninterrupted[0]);  // bitwise
  CHECK(resumed[0].at("global_step") == std::vector<double>{8});
}
