// TensorBoard writes Keras's scalars (epoch_* in train/ and validation/, batch_* every
// update_freq batches) and weight histograms into event files, read back here.
#include <doctest/doctest.h>

#include "estimator/event_reader.h"
#include "ops/error.h"
#include "tests/keras/callbacks_test_util.h"

using namespace keras_callbacks_test;

namespace {

std::vector<est::SummaryEvent> summaries_in(const std::string& logdir) {
  std::vector<std::string> files = est::event_files(logdir);
  REQUIRE(files.size() == 1);
  return est::read_summaries(files[0]);
}

// (step, value) of a scalar tag.
std::vector<std::pair<int64_t, double>> scalars(const std::vector<est::SummaryEvent>& events,
                                                const std::string& tag) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& event : events)
    if (event.tag == tag && event.kind == est::SummaryEvent::Kind::kScalar)
      out.emplace_back(event.step, event.scalar);
  return out;
}

std::vector<std::pair<int64_t, double>> as_float32(const std::vector<double>& values) {
  std::vector<std::pair<int64_t, double>> out;
  for (size_t i = 0; i < values.size(); ++i)
    out.emplace_back(static_cast<int64_t>(i), static_cast<float>(values[i]));
  return out;
}

}  // namespace

TEST_CASE("keras TensorBoard writes epoch and batch scalars and weight histograms") {
  ScratchDir dir;
  std::string logs = dir / "logs";
  auto model = compiled_model(dir / "m");
  struct BatchLosses : K::Callback {
    std::vector<double> losses;
    void on_train_batch_end(int64_t, const K::Logs& logs) override {
      losses.push_back(logs.at("loss"));
    }
  };
  auto batches = std::make_shared<BatchLosses>();
  auto board = std::make_shared<K::TensorBoard>(
      K::TensorBoardOptions{.log_dir = logs, .histogram_freq = 2, .update_freq = int64_t{3}});
  auto history = model->fit(binary_problem(), {.epochs = 3,
                                               .steps_per_epoch = 4,
                                               .validation_data = binary_problem(false).take(2),
                                               .callbacks = {board, batches},
                                               .verbose = 0});
  auto train = summaries_in(logs + "/train");
  CHECK(scalars(train, "epoch_loss") == as_float32(history["loss"]));
  CHECK(scalars(train, "epoch_accuracy") == as_float32(history["accuracy"]));
  CHECK(scalars(train, "epoch_val_loss").empty());
  auto validation = summaries_in(logs + "/validation");
  CHECK(scalars(validation, "epoch_loss") == as_float32(history["val_loss"]));
  CHECK(scalars(validation, "epoch_accuracy") == as_float32(history["val_accuracy"]));
  // Every 3rd of the 12 batches, at the batch count (1-based), the running epoch means.
  std::vector<std::pair<int64_t, double>> expected;
  for (int64_t step = 3; step <= 12; step += 3)
    expected.emplace_back(step, static_cast<float>(batches->losses[step - 1]));
  CHECK(scalars(train, "batch_loss") == expected);
  CHECK(scalars(train, "batch_accuracy").size() == 4);
  // Histograms of every weight at epochs 0 and 2.
  std::vector<std::pair<std::string, int64_t>> histograms;
  for (const auto& event : train)
    if (event.kind == est::SummaryEvent::Kind::kHistogram)
      histograms.emplace_back(event.tag, event.step);
  std::vector<std::pair<std::string, int64_t>> weights;
  for (int64_t epoch : {0, 2})
    for (const auto& [name, spec] : model->weights())
      weights.emplace_back(name + "_0/histogram", epoch);
  CHECK(histograms == weights);
  CHECK(weights.front().first == "dense/kernel_0/histogram");
  for (const auto& event : train)
    if (event.tag == "dense/kernel_0/histogram") CHECK(event.histogram.num == 6 * 8);
}

TEST_CASE("keras TensorBoard per epoch only by default, and bad options are errors") {
  ScratchDir dir;
  auto model = compiled_model(dir / "m");
  model->fit(binary_problem(), {.epochs = 2,
                                .steps_per_epoch = 2,
                                .callbacks = {std::make_shared<K::TensorBoard>(
                                    K::TensorBoardOptions{.log_dir = dir / "logs"})},
                                .verbose = 0});
  auto train = summaries_in(dir / "logs/train");
  CHECK(scalars(train, "epoch_loss").size() == 2);
  CHECK(scalars(train, "batch_loss").empty());
  CHECK(est::event_files(dir / "logs/validation").empty());
  CHECK_THROWS_AS(K::TensorBoard({.update_freq = int64_t{0}}), est::InvalidArgumentError);
  CHECK_THROWS_AS(K::TensorBoard({.update_freq = std::string("often")}), est::InvalidArgumentError);
  CHECK_THROWS_AS(K::TensorBoard({.log_dir = ""}), est::InvalidArgumentError);
}
