// EarlyStopping and ModelCheckpoint: Keras's stopping rule, restore_best_weights, baseline and
// start_from_epoch; filepath formatting, save_best_only, save_weights_only and save_freq.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <filesystem>
#include <functional>

#include "ops/error.h"
#include "tests/keras/saving_util.h"

using namespace saving_test;
using est::InvalidArgumentError;

namespace {

// Runs the callback's epoch ends on `values` of `monitor`; returns the epoch it stopped at
// (-1: none). `before_epoch` runs before each epoch end.
int run_epochs(K::Callback& callback, K::Model& model, const std::string& monitor,
               const std::vector<double>& values,
               const std::function<void(int)>& before_epoch = {}) {
  callback.set_model(&model);
  model.stop_training = false;
  callback.on_train_begin({});
  for (int epoch = 0; epoch < static_cast<int>(values.size()); ++epoch) {
    if (before_epoch) before_epoch(epoch);
    callback.on_epoch_end(epoch, {{monitor, values[epoch]}});
    if (model.stop_training) return epoch;
  }
  return -1;
}

}  // namespace

TEST_CASE("keras EarlyStopping stops after `patience` epochs without improvement") {
  Scratch scratch;
  K::clear_session();
  auto model = small_model(false, scratch / "m", 1);
  K::EarlyStopping min_loss({.monitor = "val_loss", .patience = 2});
  CHECK(run_epochs(min_loss, *model, "val_loss", {1.0, 0.9, 0.95, 0.97, 0.5}) == 3);
  CHECK(min_loss.best() == 0.9);
  CHECK(min_loss.best_epoch() == 1);
  // "auto" maximises accuracy; min_delta asks for more than noise.
  K::EarlyStopping accuracy({.monitor = "val_accuracy", .min_delta = 0.05, .patience = 1});
  CHECK(run_epochs(accuracy, *model, "val_accuracy", {0.5, 0.52, 0.9}) == 1);
  K::EarlyStopping forced_max({.monitor = "val_loss", .patience = 1, .mode = "max"});
  CHECK(run_epochs(forced_max, *model, "val_loss", {1.0, 2.0, 1.5}) == 2);
  // A best that does not beat the baseline does not restart the wait.
  K::EarlyStopping baseline({.monitor = "loss", .patience = 2, .baseline = 0.5});
  CHECK(run_epochs(baseline, *model, "loss", {0.9, 0.95, 0.97}) == 1);
  K::EarlyStopping no_baseline({.monitor = "loss", .patience = 2});
  CHECK(run_epochs(no_baseline, *model, "loss", {0.9, 0.95, 0.97}) == 2);
  // Epochs before start_from_epoch are not monitored.
  K::EarlyStopping warmup({.monitor = "loss", .patience = 1, .start_from_epoch = 2});
  CHECK(run_epochs(warmup, *model, "loss", {1.0, 2.0, 3.0, 4.0, 5.0}) == 3);
  // A monitor absent from the logs: a warning, no stop.
  K::EarlyStopping absent({.monitor = "val_auc", .patience = 0});
  CHECK(run_epochs(absent, *model, "loss", {1.0, 2.0, 3.0}) == -1);
  CHECK_THROWS_AS(K::EarlyStopping({.mode = "maximum"}), InvalidArgumentError);
}

TEST_CASE("keras EarlyStopping restore_best_weights sets the best epoch's weights back") {
  Scratch scratch;
  K::clear_session();
  auto model = small_model(false, scratch / "m", 1);
  std::vector<Tensor> initial = model->get_weights();
  std::vector<std::vector<Tensor>> per_epoch;
  K::EarlyStopping stopping({.monitor = "loss", .patience = 2, .restore_best_weights = true});
  int stopped = run_epochs(stopping, *model, "loss", {0.8, 0.5, 0.9, 0.7, 0.1}, [&](int epoch) {
    std::vector<Tensor> weights = initial;  // "training": a different set of weights per epoch
    for (auto& w : weights) w = est::ops::cast(Tensor::full(w.shape(), epoch), w.dtype());
    model->set_weights(weights);
    per_epoch.push_back(weights);
  });
  CHECK(stopped == 3);
  check_close(model->get_weights(), per_epoch[1], 0);  // epoch 2 (index 1) had the best loss
}

TEST_CASE("keras EarlyStopping ends fit") {
  Scratch scratch;
  K::clear_session();
  auto model = small_model(false, scratch / "m", 1);
  model->compile({.optimizer = "sgd", .loss = "sparse_categorical_crossentropy"});
  // Nothing improves by 100: the second epoch end stops training.
  auto stopping = std::make_shared<K::EarlyStopping>(
      K::EarlyStoppingOptions{.monitor = "loss", .min_delta = 100, .patience = 1});
  K::History history =
      model->fit(blobs(32, 16), {.epochs = 10, .callbacks = {stopping}, .verbose = 0});
  CHECK(history.epoch == std::vector<int>{0, 1});
  CHECK(stopping->stopped_epoch() == 1);
}

TEST_CASE("keras ModelCheckpoint formats its filepath as Python's str.format") {
  CHECK(K::format_filepath("weights.{epoch:02d}-{val_loss:.2f}.keras", {{"epoch", 3}},
                           {{"val_loss", 0.12345}}) == "weights.03-0.12.keras");
  CHECK(K::format_filepath("{{x}}-{epoch}-{batch:03d}", {{"epoch", 1}, {"batch", 7}}, {}) ==
        "{x}-1-007");
  CHECK_THROWS_WITH_AS(K::format_filepath("m-{val_acc:.2f}.keras", {{"epoch", 1}}, {{"loss", 1.0}}),
                       doctest::Contains("no value named 'val_acc' (there are: epoch, loss)"),
                       InvalidArgumentError);
  CHECK_THROWS_AS(K::ModelCheckpoint({.filepath = "x.keras", .save_freq = std::string("batch")}),
                  InvalidArgumentError);
  CHECK_THROWS_WITH_AS(K::ModelCheckpoint({.filepath = "w.h5", .save_weights_only = true}),
                       doctest::Contains("must end in `.weights.h5`"), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(K::ModelCheckpoint({.filepath = "model.ckpt"}),
                       doctest::Contains("must end in `.keras`"), InvalidArgumentError);
}

TEST_CASE("keras ModelCheckpoint saves per epoch, the best only, weights only, every N batches") {
  Scratch scratch;
  K::clear_session();
  auto model = small_model(false, scratch / "m", 1);
  model->compile(
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  auto data = blobs(64, 16);  // 4 batches an epoch
  auto every_epoch = std::make_shared<K::ModelCheckpoint>(
      K::ModelCheckpointOptions{.filepath = scratch / "weights.{epoch:02d}-{val_loss:.2f}.keras"});
  auto every_3_batches = std::make_shared<K::ModelCheckpoint>(
      K::ModelCheckpointOptions{.filepath = scratch / "b{epoch}-{batch}.weights.h5",
                                .save_weights_only = true,
                                .save_freq = int64_t{3}});
  K::History history = model->fit(data, {.epochs = 2,
                                         .validation_data = blobs(32, 16, 7),
                                         .callbacks = {every_epoch, every_3_batches},
                                         .verbose = 0});
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::string name =
        fmt::format("weights.{:02d}-{:.2f}.keras", epoch + 1, history["val_loss"][epoch]);
    CHECK_MESSAGE(std::filesystem::exists(scratch / name), name);
  }
  // Batches 3 and 6 of the 8 (epoch 1 batch 3, epoch 2 batch 2).
  CHECK(std::filesystem::exists(scratch / "b1-3.weights.h5"));
  CHECK(std::filesystem::exists(scratch / "b2-2.weights.h5"));
  CHECK(!std::filesystem::exists(scratch / "b2-4.weights.h5"));
  // Saved mid-epoch: the weights after 3 steps, not the last checkpoint's.
  K::clear_session();
  auto three_steps = small_model(false, scratch / "three", 1);
  three_steps->compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
  three_steps->fit(data, {.steps_per_epoch = 3, .verbose = 0});
  auto reloaded = small_model(false, scratch / "reloaded", 2);
  reloaded->load_weights(scratch / "b1-3.weights.h5");
  check_close(reloaded->get_weights(), three_steps->get_weights(), 0);
  // The last epoch's file is the model as fit left it.
  auto last =
      K::load_model(scratch / fmt::format("weights.02-{:.2f}.keras", history["val_loss"][1]));
  check_close(last->get_weights(), model->get_weights(), 0);
  std::filesystem::remove_all(last->model_dir());

  K::ModelCheckpoint best({.filepath = scratch / "best-{epoch}.keras",
                           .monitor = "val_accuracy",
                           .save_best_only = true});
  CHECK(run_epochs(best, *model, "val_accuracy", {0.5, 0.4, 0.6, 0.6}) == -1);
  CHECK(std::filesystem::exists(scratch / "best-1.keras"));
  CHECK(!std::filesystem::exists(scratch / "best-2.keras"));
  CHECK(std::filesystem::exists(scratch / "best-3.keras"));
  CHECK(!std::filesystem::exists(scratch / "best-4.keras"));
  CHECK(best.best() == 0.6);
}
