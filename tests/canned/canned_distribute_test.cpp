// Every canned estimator trains under MirroredStrategy and CentralStorageStrategy over two CPU
// replicas, through train_and_evaluate (evaluation under the same strategy), and must reach the
// metric it reaches alone; a string-label classifier included (labels split over the replicas).
#include <doctest/doctest.h>

#include <functional>
#include <memory>

#include "distribute/distribute.h"
#include "tests/canned/canned_test_util.h"

using namespace canned_test;
using est_test::TempDir;

namespace {

std::shared_ptr<distribute::Strategy> make_strategy(bool central) {
  const std::vector<std::string> devices{"/cpu:0", "/cpu:1"};
  if (central) return std::make_shared<distribute::CentralStorageStrategy>(devices);
  return std::make_shared<distribute::MirroredStrategy>(devices);
}

void train_every_estimator(bool central) {
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    TempDir dir;
    RunConfig run_config = config(dir.str());
    run_config.save_checkpoints_steps = 100;
    auto strategy = make_strategy(central);
    run_config.train_distribute = strategy;
    run_config.eval_distribute = strategy;
    std::unique_ptr<Estimator> estimator = c.make(run_config);
    // Per-replica batch 16: the global batch of 32 that the single-replica tests use.
    auto [metrics, exports] =
        train_and_evaluate(*estimator, {.input_fn = train_input(c.task, 16), .max_steps = 300},
                           {.input_fn = eval_input(c.task), .steps = {}, .throttle_secs = 0});
    check_trained(c, metrics);
  }
}

}  // namespace

TEST_CASE("every canned estimator trains under MirroredStrategy through train_and_evaluate") {
  train_every_estimator(false);
}

TEST_CASE("every canned estimator trains under CentralStorageStrategy") {
  train_every_estimator(true);
}

TEST_CASE(
    "the first step under MirroredStrategy is the unreplicated step, SUM and SUM_OVER_BATCH_SIZE") {
  // Two replicas of batch 1 each see the rows that one unreplicated batch of 2 sees; for either
  // loss reduction (v2's mean, v1's sum) the update must be the same.
  auto input = [](int64_t batch) {
    return [batch](ModeKeys, const InputContext*) {
      return data::Dataset::from_tensor_slices({{"x0", Tensor::from_vector<float>({1, 2})}},
                                               Tensor::from_vector<float>({1, 3}))
          .batch(batch);
    };
  };
  for (bool v1 : {false, true}) {
    CAPTURE(v1);
    auto make = [v1](RunConfig c) -> std::unique_ptr<Estimator> {
      LinearRegressorOptions options{.feature_columns = {fc::numeric_column("x0")},
                                     .optimizer = "SGD",
                                     .config = std::move(c)};
      if (v1) return std::make_unique<compat::v1::LinearRegressor>(std::move(options));
      return std::make_unique<LinearRegressor>(std::move(options));
    };
    TempDir single_dir, mirrored_dir;
    std::unique_ptr<Estimator> single = make(config(single_dir.str()));
    single->train(input(2), {.steps = 1});
    RunConfig mirrored_config = config(mirrored_dir.str());
    mirrored_config.train_distribute = make_strategy(false);
    std::unique_ptr<Estimator> mirrored = make(mirrored_config);
    mirrored->train(input(1), {.steps = 1});
    for (const char* name :
         {"linear/linear_model/x0/weights", "linear/linear_model/bias_weights"}) {
      CAPTURE(name);
      const double expected = single->get_variable_value(name).item();
      CHECK(expected != 0);
      CHECK(mirrored->get_variable_value(name).item() == doctest::Approx(expected).epsilon(1e-6));
    }
  }
}
