// The learning rate that callbacks set (Model::learning_rate), LearningRateScheduler and
// ReduceLROnPlateau: the rate they set is the one the updates use.
#include <doctest/doctest.h>

#include "nn/optimizers.h"
#include "ops/error.h"
#include "tests/keras/callbacks_test_util.h"

using namespace keras_callbacks_test;

TEST_CASE("keras LearningRateScheduler's rate drives the updates like a compiled rate") {
  ScratchDir dir;
  auto direct = compiled_model(dir / "direct", 0.05);
  auto direct_history =
      direct->fit(binary_problem(), {.epochs = 2, .steps_per_epoch = 4, .verbose = 0});
  auto scheduled = compiled_model(dir / "scheduled", 0.5);
  std::vector<double> seen;
  auto scheduler = std::make_shared<K::LearningRateScheduler>([&](int, double rate) {
    seen.push_back(rate);
    return 0.05;
  });
  auto history =
      scheduled->fit(binary_problem(),
                     {.epochs = 2, .steps_per_epoch = 4, .callbacks = {scheduler}, .verbose = 0});
  CHECK(history["loss"] == direct_history["loss"]);
  CHECK(predictions(*scheduled) == predictions(*direct));
  // The schedule saw the compiled rate, then its own (as float32, Keras's variable).
  CHECK(seen == std::vector<double>{static_cast<float>(0.5), static_cast<float>(0.05)});
  CHECK(scheduled->learning_rate() == 0.05);
  // Without the scheduler the rate 0.5 trains otherwise.
  auto unscheduled = compiled_model(dir / "unscheduled", 0.5);
  unscheduled->fit(binary_problem(), {.epochs = 2, .steps_per_epoch = 4, .verbose = 0});
  CHECK(predictions(*unscheduled) != predictions(*direct));
}

TEST_CASE("keras LearningRateScheduler changes the rate from the next epoch, verbose line") {
  ScratchDir dir;
  // Epoch 0 at 0.1, epoch 1 at 0.02: the same as two fits with those compiled rates.
  auto two_rates = compiled_model(dir / "two", 0.1);
  two_rates->fit(binary_problem(), {.epochs = 1, .steps_per_epoch = 4, .verbose = 0});
  two_rates->set_learning_rate(0.02);
  two_rates->fit(binary_problem(), {.epochs = 1, .steps_per_epoch = 4, .verbose = 0});
  std::string text;
  auto model = compiled_model(dir / "scheduled", 0.1);
  auto scheduler = std::make_shared<K::LearningRateScheduler>(
      [](int epoch, double rate) { return epoch == 0 ? rate : 0.02; }, 1, capture(text));
  model->fit(binary_problem(),
             {.epochs = 2, .steps_per_epoch = 4, .callbacks = {scheduler}, .verbose = 0});
  CHECK(predictions(*model) == predictions(*two_rates));
  // save() keeps the rate in force, as Keras's optimizer config does; load_model compiles it.
  model->save(dir / "m.keras");
  CHECK(K::load_model(dir / "m.keras")->learning_rate() == 0.02);
  CHECK(text ==
        "\nEpoch 1: LearningRateScheduler setting learning rate to 0.10000000149011612.\n"
        "\nEpoch 2: LearningRateScheduler setting learning rate to 0.02.\n");
}

TEST_CASE("keras ReduceLROnPlateau lowers the rate after `patience` epochs without improvement") {
  ScratchDir dir;
  std::string text;
  auto model = compiled_model(dir / "m", 0.1);
  // mode "max" on a falling loss: no epoch after the first improves.
  auto reduce =
      std::make_shared<K::ReduceLROnPlateau>(K::ReduceLROnPlateauOptions{.monitor = "loss",
                                                                         .factor = 0.5,
                                                                         .patience = 1,
                                                                         .verbose = 1,
                                                                         .mode = "max",
                                                                         .cooldown = 2,
                                                                         .min_lr = 0.02,
                                                                         .output = capture(text)});
  std::vector<double> rates;
  struct RateRecorder : K::Callback {
    std::vector<double>* rates;
    void on_epoch_begin(int, const K::Logs&) override {
      rates->push_back(model()->learning_rate());
    }
  };
  auto recorder = std::make_shared<RateRecorder>();
  recorder->rates = &rates;
  auto history = model->fit(
      binary_problem(),
      {.epochs = 6, .steps_per_epoch = 4, .callbacks = {reduce, recorder}, .verbose = 0});
  REQUIRE(history["loss"][1] < history["loss"][0]);
  float lr = 0.1f;
  double half = static_cast<double>(lr) * 0.5;
  float half32 = static_cast<float>(half);
  double quarter = static_cast<double>(half32) * 0.5;
  // Epoch 0 improves (the first value); epoch 1 waits 1 = patience: 0.05; epochs 2 (and 4)
  // cool down (2 epochs from the reduction, the first one being the count down at 1 -> 0);
  // epoch 3 reduces again: 0.025; epoch 5 would give 0.0125 < min_lr: 0.02.
  CHECK(rates == std::vector<double>{0.1, 0.1, half, half, quarter, quarter});
  CHECK(model->learning_rate() == 0.02);
  CHECK(text == "\nEpoch 2: ReduceLROnPlateau reducing learning rate to " + K::python_float(half) +
                    ".\n\nEpoch 4: ReduceLROnPlateau reducing learning rate to " +
                    K::python_float(quarter) +
                    ".\n\nEpoch 6: ReduceLROnPlateau reducing learning rate to 0.02.\n");
  CHECK_THROWS_WITH_AS(K::ReduceLROnPlateau({.factor = 1.0}),
                       "ReduceLROnPlateau does not support a factor >= 1.0. Got 1",
                       est::InvalidArgumentError);
}

TEST_CASE("keras learning rate: errors before compile and with a schedule") {
  ScratchDir dir;
  K::clear_session();
  K::Sequential model({K::layers::InputLayer({.shape = {6}}), K::layers::Dense({.units = 2})});
  CHECK_THROWS_AS(model.set_learning_rate(0.1), est::FailedPreconditionError);
  model.compile({.optimizer = K::Optimizer{"SGD", est::optim::sgd(
                                                      est::optim::exponential_decay(0.1, 10, 0.5))},
                 .loss = "sparse_categorical_crossentropy"});
  CHECK(model.learning_rate() == 0.1);
  CHECK_THROWS_WITH_AS(model.set_learning_rate(0.01), doctest::Contains("learning-rate schedule"),
                       est::InvalidArgumentError);
  auto plain = compiled_model(dir / "m");
  CHECK_THROWS_AS(plain->set_learning_rate(-1), est::InvalidArgumentError);
}
