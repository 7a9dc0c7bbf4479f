// The Estimator under RunConfig::train_distribute / eval_distribute. Every strategy that runs in
// one process (OneDevice, Mirrored and CentralStorage over two logical CPU devices) trains the
// tutorial CNN with per-replica batches B and must end with the variables of unreplicated
// training on the global batch 2B (the same rows in the same order), within
// |a - b| <= 5e-5 * (1 + |b|): float32 sums taken in another order, over several steps.
// Evaluation under a strategy must give the metrics of unreplicated evaluation, and its
// replica threads must run model_fn without recording gradients, as the caller does.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "distribute/distribute.h"
#include "estimator_test_util.h"
#include "examples/cnn_model.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "tests/distribute/owner_applies_path.h"

using namespace est;
using namespace est_test;

namespace {

constexpr double kTolerance = 5e-5;
constexpr int64_t kExamples = 96;

// Fashion-MNIST-shaped synthetic data: float32 images [n, 28, 28, 1], labels in [0, 10) that
// depend on the images (so the loss can fall).
data::Dataset image_dataset(int64_t examples) {
  ops::Generator generator(11);
  std::vector<float> pixels(static_cast<size_t>(examples * 28 * 28));
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < examples; ++i) {
    int64_t label = static_cast<int64_t>(generator.next_u64() % 10);
    labels.push_back(label);
    for (int64_t p = 0; p < 28 * 28; ++p)
      pixels[static_cast<size_t>(i * 784 + p)] =
          float(generator.next_double()) * 0.5f + (p % 10 == label ? 0.5f : 0.0f);
  }
  return data::Dataset::from_tensor_slices(
      Features{{"image", Tensor::from_vector(pixels, {examples, 28, 28, 1})}},
      Tensor::from_vector(labels, {examples}));
}

// input_fn batching `batch` rows; records the InputContext it was called with.
struct RecordingInput {
  int64_t batch;
  int64_t examples = kExamples;
  std::shared_ptr<std::vector<std::optional<InputContext>>> calls =
      std::make_shared<std::vector<std::optional<InputContext>>>();
  InputFn fn() const {
    return [*this](ModeKeys, const InputContext* context) {
      calls->push_back(context ? std::optional<InputContext>(*context) : std::nullopt);
      return image_dataset(examples).batch(batch);
    };
  }
};

// The tutorial CNN; params choose the optimizer ("optimizer": sgd|adam|momentum) and the loss
// reduction ("sum": the summed loss instead of the mean).
EstimatorSpec cnn_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                           ModelContext& ctx) {
  const Params& params = est::params(ctx);
  Tensor logits = examples::tutorial_cnn(ctx, features.at("image"));
  nn::Reduction reduction =
      params.get_bool("sum") ? nn::Reduction::kSum : nn::Reduction::kSumOverBatchSize;
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits, 1.0, reduction);
  if (mode == ModeKeys::kEval)
    return EstimatorSpec::eval(loss,
                               {{"accuracy", metrics::accuracy(labels, ops::argmax(logits, -1))}});
  std::string name = params.get_string("optimizer");
  optim::Optimizer optimizer = name == "adam" ? optim::adam(0.002)
                               : name == "momentum"
                                   ? optim::momentum(0.01, 0.9)
                                   : optim::sgd(params.get_bool("sum") ? 0.002 : 0.1);
  return EstimatorSpec::train(loss, optimizer.minimize(loss, ctx));
}

Params cnn_params(const std::string& optimizer, bool sum = false) {
  Params params{{"optimizer", optimizer}};
  params.set("sum", sum);
  return params;
}

double max_scaled_difference(const Tensor& a, const Tensor& b) {
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i)
    worst = std::max(worst, std::abs(va[i] - vb[i]) / (1 + std::abs(vb[i])));
  return worst;
}

// Every variable of `actual`'s latest checkpoint matches `expected`'s (but those in `skip`).
void check_same_variables(const Estimator& actual, const Estimator& expected,
                          const std::vector<std::string>& skip = {}) {
  std::vector<std::string> names = expected.get_variable_names();
  CHECK(actual.get_variable_names() == names);
  for (const std::string& name : names) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    CAPTURE(name);
    CHECK(max_scaled_difference(actual.get_variable_value(name),
                                expected.get_variable_value(name)) <= kTolerance);
  }
}

std::shared_ptr<distribute::Strategy> make_strategy(const std::string& kind) {
  if (kind == "one_device") return std::make_shared<distribute::OneDeviceStrategy>("/cpu:0");
  if (kind == "central")
    return std::make_shared<distribute::CentralStorageStrategy>(
        std::vector<std::string>{"/cpu:0", "/cpu:1"});
  return std::make_shared<distribute::MirroredStrategy>(
      std::vector<std::string>{"/cpu:0", "/cpu:1"});
}

RunConfig distributed_config(const std::string& dir, std::shared_ptr<distribute::Strategy> train,
                             std::shared_ptr<distribute::Strategy> eval = nullptr) {
  RunConfig config = quiet_config(dir);
  config.train_distribute = std::move(train);
  config.eval_distribute = std::move(eval);
  return config;
}

}  // namespace

TEST_CASE("every in-process strategy trains the tutorial CNN like the global batch unreplicated") {
  for (std::string kind : {"mirrored", "central", "one_device"}) {
    for (auto [optimizer, sum] : {std::pair{"sgd", false}, std::pair{"adam", false},
                                  std::pair{"momentum", false}, std::pair{"sgd", true}}) {
      CAPTURE(kind);
      CAPTURE(optimizer);
      CAPTURE(sum);
      auto strategy = make_strategy(kind);
      int replicas = strategy->num_replicas_in_sync();
      int64_t per_replica = 8, steps = 4;
      TempDir reference_dir, distributed_dir;
      Estimator reference(cnn_model_fn, quiet_config(reference_dir.str()),
                          cnn_params(optimizer, sum));
      reference.train(RecordingInput{per_replica * replicas}.fn(), {.steps = steps});
      Estimator distributed(cnn_model_fn, distributed_config(distributed_dir.str(), strategy),
                            cnn_params(optimizer, sum));
      RecordingInput input{per_replica};
      {
        LogCapture log;
        distributed.train(input.fn(), {.steps = steps});
        CHECK(log.contains("Using " + strategy->description() + " for training."));
      }
      REQUIRE(input.calls->size() == 1);
      REQUIRE(input.calls->front().has_value());
      CHECK(input.calls->front()->num_replicas_in_sync == replicas);
      CHECK(input.calls->front()->num_input_pipelines == 1);
      CHECK(distributed.get_variable_value("global_step").item() == steps);
      check_same_variables(distributed, reference);
      // Training moved the weights (the comparison is not between two initialisations).
      TempDir fresh_dir;
      Estimator fresh(cnn_model_fn, quiet_config(fresh_dir.str()), cnn_params(optimizer, sum));
      fresh.train(RecordingInput{per_replica * replicas}.fn(), {.steps = 1});
      CHECK(max_scaled_difference(distributed.get_variable_value("dense_1/kernel"),
                                  fresh.get_variable_value("dense_1/kernel")) > 1e-3);
    }
  }
}

TEST_CASE("the Estimator's steps go through the strategy's gradient path") {
  // A path that only updates replica 0's copy (the owner) and has replica 1 pull it before its
  // next step (tests/distribute/owner_applies_path.h) trains as the all-reduce path does.
  int64_t steps = 4;
  TempDir mirrored_dir, owner_dir;
  Estimator mirrored(cnn_model_fn,
                     distributed_config(mirrored_dir.str(), make_strategy("mirrored")),
                     cnn_params("adam"));
  mirrored.train(RecordingInput{8}.fn(), {.steps = steps});
  auto path = std::make_shared<est::testing::OwnerAppliesPath>(2);
  auto strategy = std::make_shared<est::testing::OwnerAppliesStrategy>(
      std::vector<std::string>{"/cpu:0", "/cpu:1"}, path);
  Estimator owner(cnn_model_fn, distributed_config(owner_dir.str(), strategy), cnn_params("adam"));
  owner.train(RecordingInput{8}.fn(), {.steps = steps});
  // A step is two runs (model_fn, then the train op): replica 1 pulls once per update.
  CHECK(path->before_steps() == 2 * 2 * steps);
  CHECK(path->pulls() == steps - 1);
  CHECK(path->applies() == 2 * steps);
  CHECK(owner.get_variable_value("global_step").item() == steps);
  for (const std::string& name : mirrored.get_variable_names()) {
    CAPTURE(name);
    CHECK(owner.get_variable_value(name).to_vector<double>() ==
          mirrored.get_variable_value(name).to_vector<double>());
  }
}

TEST_CASE("mirrored training resumes from a checkpoint restored onto every replica") {
  // 3 steps, then 3 more in a new train() call (a fresh restore), must equal 6 steps of
  // unreplicated training: a replica left unrestored would send other gradients.
  TempDir reference_dir, distributed_dir;
  Estimator reference(cnn_model_fn, quiet_config(reference_dir.str()), cnn_params("adam"));
  reference.train(RecordingInput{16}.fn(), {.steps = 6});
  for (int part = 0; part < 2; ++part) {
    Estimator distributed(cnn_model_fn,
                          distributed_config(distributed_dir.str(), make_strategy("mirrored")),
                          cnn_params("adam"));
    distributed.train(RecordingInput{8}.fn(), {.max_steps = 3 * (part + 1)});
  }
  Estimator distributed(cnn_model_fn, distributed_dir.str(), quiet_config(distributed_dir.str()),
                        cnn_params("adam"));
  CHECK(distributed.get_variable_value("global_step").item() == 6);
  check_same_variables(distributed, reference);
}

TEST_CASE("a step needs one batch per replica: the leftover batch at the end is not trained on") {
  TempDir dir;
  Estimator estimator(cnn_model_fn, distributed_config(dir.str(), make_strategy("mirrored")),
                      cnn_params("sgd"));
  LogCapture log;
  RecordingInput input{8, 40};
  estimator.train(input.fn());  // 5 per-replica batches: 2 steps, 1 left over
  CHECK(estimator.get_variable_value("global_step").item() == 2);
  CHECK(log.contains("left for 2 replicas"));
  // The saved input position is after the 4 batches trained on: the leftover one is not consumed.
  checkpoint::TensorBundle saved = checkpoint::load(dir.str() + "/model.ckpt-2.h5");
  const checkpoint::Blob* position = saved.find_blob("iterator");
  REQUIRE(position != nullptr);
  data::Iterator resumed = input.fn()(ModeKeys::kTrain, nullptr).iterator();
  resumed.restore_state(position->bytes);
  int64_t left = 0;
  while (resumed.next()) ++left;
  CHECK(left == 1);
}

TEST_CASE("evaluation under a strategy merges the replicas' metrics") {
  TempDir dir;
  Estimator trainer(cnn_model_fn, quiet_config(dir.str()), cnn_params("sgd"));
  trainer.train(RecordingInput{16}.fn(), {.steps = 5});
  Metrics expected = trainer.evaluate(RecordingInput{16}.fn());
  for (std::string kind : {"mirrored", "central", "one_device"}) {
    CAPTURE(kind);
    auto strategy = make_strategy(kind);
    int replicas = strategy->num_replicas_in_sync();
    Estimator evaluator(cnn_model_fn, distributed_config(dir.str(), nullptr, strategy),
                        cnn_params("sgd"));
    RecordingInput input{16 / replicas};
    LogCapture log;
    Metrics actual = evaluator.evaluate(input.fn());
    CHECK(log.contains("Using " + strategy->description() + " for evaluation."));
    REQUIRE(input.calls->front().has_value());
    CHECK(input.calls->front()->num_replicas_in_sync == replicas);
    CHECK(actual.at("accuracy") == expected.at("accuracy"));
    CHECK(actual.at("loss") == doctest::Approx(expected.at("loss")).epsilon(1e-5));
    CHECK(actual.at("global_step") == 5);
  }
  // An uneven end (5 per-replica batches over 2 replicas): the last step runs on one replica,
  // and accuracy still counts every example once.
  Metrics by_batch = trainer.evaluate(RecordingInput{8, 40}.fn());
  Estimator evaluator(cnn_model_fn,
                      distributed_config(dir.str(), nullptr, make_strategy("mirrored")),
                      cnn_params("sgd"));
  CHECK(evaluator.evaluate(RecordingInput{8, 40}.fn()).at("accuracy") == by_batch.at("accuracy"));
}

TEST_CASE("eval_distribute: every replica's model_fn runs with the caller's thread modes") {
  // Estimator::evaluate holds a NoGradGuard; the replica threads must take it on (and the
  // caller's BackendGuard), or distributed evaluation records an autograd tape.
  struct Call {
    ModeKeys mode;
    bool grad_enabled;
    std::optional<ops::Backend> backend;  // the guard's, if any
    bool loss_recorded;
  };
  auto calls = std::make_shared<std::vector<Call>>();
  auto mutex = std::make_shared<std::mutex>();
  auto recording_model_fn = [calls, mutex](const Features& features, const Tensor& labels,
                                           ModeKeys mode, ModelContext& ctx) {
    EstimatorSpec spec = linear_model_fn(features, labels, mode, ctx);
    std::lock_guard lock(*mutex);
    calls->push_back(
        {mode, ops::grad_enabled(), ops::forced_cpu_backend(), spec.loss.requires_grad()});
    return spec;
  };
  TempDir dir;
  auto strategy = make_strategy("mirrored");
  Estimator estimator(recording_model_fn, distributed_config(dir.str(), strategy, strategy));
  estimator.train(linear_input_fn(32, 4), {.steps = 2});
  REQUIRE(calls->size() == 4);  // 2 steps x 2 replicas
  for (const Call& call : *calls) {
    CHECK(call.grad_enabled);
    CHECK(call.loss_recorded);
  }
  for (ops::Backend backend : ops::available_cpu_backends()) {
    CAPTURE(ops::backend_name(backend));
    calls->clear();
    ops::BackendGuard guard(backend);
    estimator.evaluate(linear_input_fn(32, 4), {.steps = 3});
    REQUIRE(calls->size() == 6);  // 3 steps x 2 replicas
    for (const Call& call : *calls) {
      CHECK(call.mode == ModeKeys::kEval);
      CHECK_FALSE(call.grad_enabled);
      CHECK_FALSE(call.loss_recorded);
      CHECK(call.backend == backend);
    }
  }
}

namespace {

// A batch-normalized model. The input repeats each block of rows twice, so with per-replica
// batches of one block each replica's batch statistics equal those of the global batch, and
// replicated training must match unreplicated training: a moving average applied twice, or not
// averaged over replicas, would differ. Batch norm sees [N, 6] (after a dense layer), TF's
// non-fused path: the moving variance follows the biased batch variance, which is the same
// for one block and for the block twice over (a Bessel correction would differ: 8/7 vs 16/15).
EstimatorSpec bn_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                          ModelContext& ctx) {
  Tensor x = nn::dense(ctx, features.at("x"), {.units = 6});
  x = nn::batch_normalization(ctx, x, {.momentum = 0.9});
  Tensor logits = nn::dense(ctx, nn::relu(x), {.units = 3});
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  if (mode == ModeKeys::kEval) return EstimatorSpec::eval(loss);
  return EstimatorSpec::train(loss, optim::sgd(0.1).minimize(loss, ctx));
}

// 4 blocks of `kBlock` rows, each block twice in a row; batched by `batch`.
constexpr int64_t kBlock = 8;
InputFn repeated_halves_input(int64_t batch) {
  return [=](ModeKeys, const InputContext*) {
    ops::Generator generator(5);
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t block = 0; block < 4; ++block) {
      std::vector<float> bx;
      std::vector<int64_t> by;
      for (int64_t i = 0; i < kBlock; ++i) {
        for (int j = 0; j < 4; ++j) bx.push_back(float(generator.next_normal()) + float(block));
        by.push_back(int64_t(generator.next_u64() % 3));
      }
      for (int copy = 0; copy < 2; ++copy) {
        x.insert(x.end(), bx.begin(), bx.end());
        y.insert(y.end(), by.begin(), by.end());
      }
    }
    auto n = static_cast<int64_t>(y.size());
    return data::Dataset::from_tensor_slices(Features{{"x", Tensor::from_vector(x, {n, 4})}},
                                             Tensor::from_vector(y, {n}))
        .batch(batch);
  };
}

}  // namespace

TEST_CASE("batch normalization under a strategy: per-replica statistics, averaged moving stats") {
  for (std::string kind : {"mirrored", "central"}) {
    CAPTURE(kind);
    TempDir reference_dir, distributed_dir;
    // Unreplicated: each global batch is a per-replica batch twice over.
    Estimator reference(bn_model_fn, quiet_config(reference_dir.str()));
    reference.train(repeated_halves_input(2 * kBlock), {.steps = 4});
    Estimator distributed(bn_model_fn,
                          distributed_config(distributed_dir.str(), make_strategy(kind)));
    distributed.train(repeated_halves_input(kBlock), {.steps = 4});
    check_same_variables(distributed, reference);
    CHECK(max_scaled_difference(distributed.get_variable_value("batch_normalization/moving_mean"),
                                Tensor::zeros({6})) > 1e-2);
    CHECK(
        max_scaled_difference(distributed.get_variable_value("batch_normalization/moving_variance"),
                              Tensor::ones({6})) > 1e-2);
  }
}

TEST_CASE("a strategy's errors reach the caller of train") {
  TempDir dir;
  // model_fn failing on one replica: the error names the failure, nobody hangs.
  auto failing = [](const Features& features, const Tensor& labels, ModeKeys mode,
                    ModelContext& ctx) -> EstimatorSpec {
    if (ctx.global_step() >= 1 && features.at("image").dim(0) > 0)
      throw InvalidArgumentError("model_fn: deliberate failure");
    return cnn_model_fn(features, labels, mode, ctx);
  };
  Estimator estimator(failing, distributed_config(dir.str(), make_strategy("mirrored")),
                      cnn_params("sgd"));
  CHECK_THROWS_WITH_AS(estimator.train(RecordingInput{8}.fn(), {.steps = 3}),
                       doctest::Contains("deliberate failure"), InvalidArgumentError);
}

TEST_CASE("train_and_evaluate with one strategy for training and evaluation") {
  // The same strategy object serves both: evaluations run between training steps (from the
  // checkpoint listener), while the replica threads are idle.
  TempDir reference_dir, distributed_dir;
  RunConfig reference_config = quiet_config(reference_dir.str());
  reference_config.save_checkpoints_steps = 2;
  Estimator reference(cnn_model_fn, reference_config, cnn_params("sgd"));
  auto [expected, unused] = train_and_evaluate(
      reference, {.input_fn = RecordingInput{16}.fn(), .max_steps = 4},
      {.input_fn = RecordingInput{16}.fn(), .steps = std::nullopt, .throttle_secs = 0});
  auto strategy = make_strategy("mirrored");
  RunConfig config = distributed_config(distributed_dir.str(), strategy, strategy);
  config.save_checkpoints_steps = 2;
  Estimator distributed(cnn_model_fn, config, cnn_params("sgd"));
  LogCapture log;
  auto [actual, exports] = train_and_evaluate(
      distributed, {.input_fn = RecordingInput{8}.fn(), .max_steps = 4},
      {.input_fn = RecordingInput{8}.fn(), .steps = std::nullopt, .throttle_secs = 0});
  CHECK(log.count("for evaluation.") >= 2);  // after the save at step 2 and at the end
  CHECK(actual.at("global_step") == 4);
  CHECK(actual.at("accuracy") == expected.at("accuracy"));
  CHECK(actual.at("loss") == doctest::Approx(expected.at("loss")).epsilon(1e-4));
}
