// keras fit under strategies (Keras 2.x keras/engine/data_adapter.py, keras/distribute/): the
// dataset yields global batches, split over the replicas and auto-sharded over the workers, so
// MirroredStrategy with 2 replicas and 2 MultiWorkerMirroredStrategy workers (threads of this
// process on a loopback cluster; examples/keras_multi_worker's test runs them as processes) end
// with the weights of one process on the same global batches, to float32 rounding, and report
// the same loss and accuracy (summed over replicas and workers) and validation results (the
// chief's, on every worker). Also: fit's epochs run in one
// training session, callbacks still find each epoch's checkpoint, a finite dataset is counted by
// its cardinality, and fit on tensors holds out the last rows for validation_split.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <random>
#include <regex>
#include <set>

#include "checkpoint/checkpoint.h"
#include "data/cardinality.h"
#include "distribute/distribute.h"
#include "estimator/estimator.h"
#include "keras/keras.h"
#include "nn/nn.h"

#if EST_HAVE_GRPC
#include "tests/distribute/two_workers.h"
#endif

using namespace est;
namespace K = est::keras;
namespace L = est::keras::layers;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "keras_dist_test_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// 8 features, 4 classes from fixed projections; 256 rows, one example per element.
data::Dataset examples() {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  int64_t n = 256;
  std::vector<float> x(n * 8);
  std::vector<int64_t> y(n);
  for (auto& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; ++i) {
    float s[4] = {0, 0, 0, 0};
    for (int j = 0; j < 8; ++j) s[j % 4] += x[i * 8 + j] * (j < 4 ? 1.f : -0.7f);
    y[i] = std::max_element(s, s + 4) - s;
  }
  return data::Dataset::from_tensor_slices(data::Features{{"x", Tensor::from_vector(x, {n, 8})}},
                                           Tensor::from_vector(y, {n}));
}

data::Dataset global_batches(int64_t batch) { return examples().batch(batch); }

// The identity, recording the batch sizes it sees in training (the per-replica batch).
class RowCounter : public K::Layer {
 public:
  RowCounter() : K::Layer("RowCounter", "row_counter") {}
  Shape output_shape(const std::vector<Shape>& inputs) const override { return inputs[0]; }
  Tensor call(ModelContext& ctx, const std::vector<Tensor>& inputs) const override {
    std::lock_guard lock(mutex_);
    if (ctx.mode() == nn::Mode::kTrain) rows.insert(inputs[0].shape()[0]);
    return inputs[0];
  }
  mutable std::set<int64_t> rows;

 private:
  mutable std::mutex mutex_;
};

struct Trained {
  std::map<std::string, std::vector<float>> weights;
  K::History history;
  std::set<int64_t> rows;  // the batch sizes each replica's model_fn saw
};

// The same model, seed and global batches, under `strategy` (null: none).
Trained train(const RunConfig& base, std::shared_ptr<distribute::Strategy> strategy) {
  auto counter = std::make_shared<RowCounter>();
  K::Sequential model({L::InputLayer({.shape = {8}}), counter,
                       L::Dense({.units = 16, .activation = "relu", .name = "dense"}),
                       L::Dense({.units = 4, .name = "dense_1"})});
  model.config() = base;
  model.config().tf_random_seed = 7;
  model.config().train_distribute = std::move(strategy);  // as `with strategy.scope():`
  model.compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.2}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  Trained out;
  out.history = model.fit(global_batches(32),
                          {.epochs = 2, .validation_data = global_batches(64), .verbose = 0});
  out.rows = counter->rows;
  if (model.config().is_chief) {
    Estimator reader([](const Features&, const Tensor&, ModeKeys,
                        ModelContext&) -> EstimatorSpec { throw std::logic_error("unused"); },
                     RunConfig{.model_dir = model.config().model_dir});
    for (const auto& [name, spec] : model.weights())
      out.weights[name] = reader.get_variable_value(name).to_vector<float>();
  }
  return out;
}

K::ProgbarOutput capture(std::string& text) {
  K::ProgbarOutput out = K::stdout_output();
  out.write = [&text](const std::string& s) { text += s; };
  out.is_terminal = false;
  return out;
}

void check_same(const Trained& a, const Trained& b) {
  REQUIRE(a.weights.size() == 4);
  for (const auto& [name, values] : a.weights) {
    const auto& other = b.weights.at(name);
    REQUIRE(values.size() == other.size());
    for (size_t i = 0; i < values.size(); ++i)
      CHECK(other[i] == doctest::Approx(values[i]).epsilon(1e-5));
  }
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"})
    for (size_t e = 0; e < 2; ++e)
      CHECK(b.history[key][e] == doctest::Approx(a.history[key][e]).epsilon(1e-5));
}

}  // namespace

TEST_CASE(
    "keras fit under MirroredStrategy with 2 replicas equals one replica on the global batch") {
  TempDir one, mirrored;
  Trained single = train(RunConfig{.model_dir = one.path.string()}, nullptr);
  Trained replicated = train(
      RunConfig{.model_dir = mirrored.path.string()},
      std::make_shared<distribute::MirroredStrategy>(std::vector<std::string>{"/cpu:0", "/cpu:1"}));
  check_same(single, replicated);
  CHECK(single.rows == std::set<int64_t>{32});
  CHECK(replicated.rows == std::set<int64_t>{16});  // each replica: half the global batch
  CHECK(single.history["loss"][1] < single.history["loss"][0]);
}

TEST_CASE(
    "keras fit under MirroredStrategy: a global batch of 33 splits 17 + 16 as tf.data does, with "
    "Keras's loss scaling") {
  // One SGD step on `dataset` (one batch), from the same seeded weights; the weights, the logged
  // loss and accuracy, and the batch sizes the model saw.
  auto step = [](const data::Dataset& dataset, std::shared_ptr<distribute::Strategy> strategy) {
    K::clear_session();
    TempDir dir;
    auto counter = std::make_shared<RowCounter>();
    K::Sequential model(
        {L::InputLayer({.shape = {8}}), counter, L::Dense({.units = 4, .name = "dense"})});
    model.config().model_dir = dir.path.string();
    model.config().tf_random_seed = 7;
    model.config().train_distribute = std::move(strategy);
    model.compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.5}),
                   .loss = K::losses::SparseCategoricalCrossentropy(true),
                   .metrics = {"accuracy"}});
    Trained out;
    out.history = model.fit(dataset, {.verbose = 0});
    auto weights = model.get_weights();
    out.weights["kernel"] = weights[0].to_vector<float>();
    out.weights["bias"] = weights[1].to_vector<float>();
    out.rows = counter->rows;
    return out;
  };
  auto mirrored = [] {
    return std::make_shared<distribute::MirroredStrategy>(
        std::vector<std::string>{"/cpu:0", "/cpu:1"});
  };
  Trained replicated = step(examples().take(33).batch(33), mirrored());
  CHECK(replicated.rows == std::set<int64_t>{16, 17});
  // Keras: each replica's mean loss over its rows, divided by the 2 replicas in sync, so one
  // SGD step is the mean of a step on rows [0, 17) and a step on rows [17, 33).
  Trained first = step(examples().take(17).batch(17), nullptr);
  Trained second = step(examples().skip(17).take(16).batch(16), nullptr);
  Trained global = step(examples().take(33).batch(33), nullptr);
  double from_global = 0;
  for (const char* name : {"kernel", "bias"}) {
    const auto& w = replicated.weights.at(name);
    REQUIRE(w.size() == first.weights.at(name).size());
    for (size_t i = 0; i < w.size(); ++i) {
      double mean =
          0.5 * (static_cast<double>(first.weights.at(name)[i]) + second.weights.at(name)[i]);
      CHECK(w[i] == doctest::Approx(mean).epsilon(1e-5));
      from_global = std::max(
          from_global, std::abs(static_cast<double>(w[i]) - global.weights.at(name)[i]));
    }
  }
  CHECK(from_global > 1e-4);  // not the step on the global batch's mean
  // The logged loss and accuracy are Keras's Means over all 33 rows: one process's.
  for (const char* key : {"loss", "accuracy"})
    CHECK(replicated.history[key][0] == doctest::Approx(global.history[key][0]).epsilon(1e-5));

  // 256 rows in global batches of 33: 7 of 17 + 16, then 25 rows as 13 + 12.
  Trained epoch = step(global_batches(33), mirrored());
  CHECK(epoch.rows == std::set<int64_t>{12, 13, 16, 17});
  // A global batch with fewer rows than replicas is an error naming both.
  CHECK_THROWS_WITH_AS(step(examples().take(1).batch(1), mirrored()),
                       doctest::Contains("a global batch of 1 rows has fewer rows than the 2"),
                       InvalidArgumentError);
}

#if EST_HAVE_GRPC
TEST_CASE(
    "keras fit on 2 MultiWorkerMirroredStrategy workers equals one process on the global "
    "batch") {
  using namespace std::chrono_literals;
  TempDir one, shared;
  Trained single = train(RunConfig{.model_dir = one.path.string()}, nullptr);
  std::mutex mutex;
  std::vector<Trained> workers(2);
  testing::train_on_two_workers(
      {.token = "keras-multi-worker-test-01234567", .heartbeat_timeout = 5000ms, .bound = 180s},
      RunConfig{.model_dir = shared.path.string()}, [&](const RunConfig& config, int w) {
        Trained trained = train(config, config.train_distribute);
        std::lock_guard lock(mutex);
        workers[static_cast<size_t>(w)] = std::move(trained);
      });
  check_same(single, workers[0]);
  for (const auto& worker : workers)  // each worker: its half of every global batch
    CHECK(worker.rows == std::set<int64_t>{16});
  // The worker's logs are the job's (summed over both workers), as the chief's.
  for (const char* key : {"accuracy", "val_loss"})
    for (size_t e = 0; e < 2; ++e) CHECK(workers[1].history[key][e] == workers[0].history[key][e]);
}
#endif

TEST_CASE("keras fit runs its epochs in one session; with callbacks each epoch's end is saved") {
  K::clear_session();
  TempDir plain, with_callback;
  auto fit = [](const std::string& dir, K::Callbacks callbacks) {
    K::clear_session();
    K::Sequential model({L::InputLayer({.shape = {8}}), L::Dense({.units = 4})});
    model.config().model_dir = dir;
    model.compile({.optimizer = "sgd", .loss = K::losses::SparseCategoricalCrossentropy(true)});
    model.fit(global_batches(64), {.epochs = 3, .callbacks = callbacks, .verbose = 0});
  };
  fit(plain.path.string(), {});
  // 4 steps per epoch: saved at the session's start and end only.
  auto state = checkpoint::read_checkpoint_state(plain.path.string());
  REQUIRE(state);
  CHECK(state->all_model_checkpoint_paths.size() == 2);

  struct SeesCheckpoint : K::Callback {
    std::string dir;
    std::vector<std::string> seen;
    void on_epoch_end(int, const K::Logs&) override {
      seen.push_back(checkpoint::latest_checkpoint(dir).value_or(""));
    }
  };
  auto callback = std::make_shared<SeesCheckpoint>();
  callback->dir = with_callback.path.string();
  fit(with_callback.path.string(), {callback});
  REQUIRE(callback->seen.size() == 3);
  for (int e = 0; e < 3; ++e)
    CHECK(std::regex_search(callback->seen[static_cast<size_t>(e)],
                            std::regex("model\\.ckpt-" + std::to_string(4 * (e + 1)) + "(\\.|$)")));
}

TEST_CASE("keras fit counts a finite in-memory dataset by its cardinality, without a pass") {
  K::clear_session();
  TempDir dir;
  auto mapped = std::make_shared<std::atomic<int>>(0);
  data::Dataset rows = data::Dataset::from_tensor_slices(
      data::Features{{"x", Tensor::full({256, 8}, 0.5)}}, Tensor::full({256}, 1, DType::kI64));
  data::Dataset dataset = rows.map([mapped](data::Element e) {
                                ++*mapped;
                                return e;
                              })
                              .shuffle(100, 3)
                              .batch(64);
  // tf.data's cardinality for the stages Keras's fit meets.
  CHECK(data::cardinality(dataset) == 4);
  CHECK(data::cardinality(rows.batch(100)) == 3);
  CHECK(data::cardinality(rows.batch(100, true)) == 2);
  CHECK(data::cardinality(rows.take(10).repeat(3)) == 30);
  CHECK(data::cardinality(rows.skip(250).prefetch()) == 6);
  CHECK(data::cardinality(rows.shard(3, 1)) == 85);
  CHECK(data::cardinality(rows.repeat()) == data::kInfiniteCardinality);
  CHECK(data::cardinality(rows.repeat().take(7)) == 7);
  CHECK(data::cardinality(rows.filter([](const data::Element&) { return true; })) ==
        data::kUnknownCardinality);
  CHECK(data::cardinality(data::Dataset::range(1, 10, 4)) == 3);
  CHECK(*mapped == 0);  // none of that iterated

  K::Sequential model({L::InputLayer({.shape = {8}}), L::Dense({.units = 4})});
  model.config().model_dir = dir.path.string();
  model.compile({.optimizer = "sgd", .loss = K::losses::SparseCategoricalCrossentropy(true)});
  auto history = model.fit(dataset, {.epochs = 2, .verbose = 0});
  CHECK(history["loss"].size() == 2);
  // Two epochs of one pass each, and the first batch that built the model (a shuffle buffer and
  // 64 rows): no third pass to count the batches.
  CHECK(*mapped >= 2 * 256);
  CHECK(*mapped < 3 * 256);
}

TEST_CASE("keras fit on tensors: validation_split holds out the last rows; errors name the fix") {
  K::clear_session();
  TempDir dir;
  // 100 rows: the first 80 of class 0, the last 20 of class 1 (x says which).
  std::vector<float> x(100 * 8, 0.f);
  std::vector<int64_t> y(100, 0);
  for (int i = 80; i < 100; ++i) {
    y[static_cast<size_t>(i)] = 1;
    for (int j = 0; j < 8; ++j) x[static_cast<size_t>(i * 8 + j)] = 1.f;
  }
  Tensor xs = Tensor::from_vector(x, {100, 8}), ys = Tensor::from_vector(y, {100});
  K::Sequential model({L::InputLayer({.shape = {8}}), L::Dense({.units = 2})});
  model.config().model_dir = dir.path.string();
  model.config().tf_random_seed = 1;
  model.compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.5}),
                 .loss = K::losses::SparseCategoricalCrossentropy(true),
                 .metrics = {"accuracy"}});
  std::string text;
  auto history = model.fit(
      xs, ys, {.epochs = 3, .output = capture(text), .batch_size = 16, .validation_split = 0.2});
  // Keras's split: training rows [0, 80) (all class 0: 5 batches of 16), validation [80, 100)
  // (all class 1, never trained on, so the model learns class 0 only and misses all of them).
  CHECK(text.find("5/5 [") != std::string::npos);
  CHECK(history["accuracy"][2] == 1.0);
  CHECK(history["val_accuracy"][2] == 0.0);
  auto results = model.evaluate(xs, ys, {.verbose = 0}, 25);
  CHECK(results.at("accuracy") == doctest::Approx(0.8));

  CHECK_THROWS_WITH_AS(model.fit(global_batches(16), {.validation_split = 0.1}),
                       doctest::Contains("validation_split is only supported for tensors"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(model.fit(xs, ys, {.validation_split = 0.999}),
                       doctest::Contains("leaves 0 training and 100 validation rows"),
                       InvalidArgumentError);
  CHECK_THROWS_WITH_AS(model.fit(xs, Tensor::from_vector(y, {100}).reshape({50, 2})),
                       doctest::Contains("same number of rows"), InvalidArgumentError);
}
