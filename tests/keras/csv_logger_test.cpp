// CSVLogger writes Keras's CSV (Python's csv module, excel dialect) and TerminateOnNaN stops fit
// after the batch whose loss is not finite, with Keras's message.
#include <doctest/doctest.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "ops/error.h"
#include "tests/keras/callbacks_test_util.h"

using namespace keras_callbacks_test;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string row(int epoch, const K::History& history, const std::vector<std::string>& keys,
                size_t index, const std::string& separator = ",") {
  std::string line = std::to_string(epoch);
  for (const auto& key : keys) line += separator + K::python_float(history[key][index]);
  return line + "\r\n";
}

}  // namespace

TEST_CASE("keras python_float prints as Python's repr of a float") {
  CHECK(K::python_float(1.0) == "1.0");
  CHECK(K::python_float(0.25) == "0.25");
  CHECK(K::python_float(0.1f) == "0.10000000149011612");
  CHECK(K::python_float(1e-05) == "1e-05");
  CHECK(K::python_float(-3.0) == "-3.0");
  CHECK(K::python_float(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(K::python_float(-std::numeric_limits<double>::infinity()) == "-inf");
}

TEST_CASE("keras CSVLogger writes a header of sorted keys and a row per epoch, or appends") {
  ScratchDir dir;
  std::string path = dir / "training.log";
  auto model = compiled_model(dir / "m");
  std::vector<std::string> keys{"accuracy", "loss", "val_accuracy", "val_loss"};
  auto history = model->fit(binary_problem(), {.epochs = 2,
                                               .steps_per_epoch = 4,
                                               .validation_data = binary_problem(false).take(2),
                                               .callbacks = {std::make_shared<K::CSVLogger>(path)},
                                               .verbose = 0});
  std::string expected = "epoch,accuracy,loss,val_accuracy,val_loss\r\n" +
                         row(0, history, keys, 0) + row(1, history, keys, 1);
  CHECK(read_text(path) == expected);
  // append: no second header; the new fit's epochs count from 0 again (initial_epoch 0).
  auto more =
      model->fit(binary_problem(), {.epochs = 1,
                                    .steps_per_epoch = 4,
                                    .validation_data = binary_problem(false).take(2),
                                    .callbacks = {std::make_shared<K::CSVLogger>(path, ",", true)},
                                    .verbose = 0});
  CHECK(read_text(path) == expected + row(0, more, keys, 0));
  // Not appending: overwritten, with another separator.
  auto semicolons =
      model->fit(binary_problem(), {.epochs = 1,
                                    .steps_per_epoch = 4,
                                    .callbacks = {std::make_shared<K::CSVLogger>(path, ";")},
                                    .verbose = 0});
  CHECK(read_text(path) ==
        "epoch;accuracy;loss\r\n" + row(0, semicolons, {"accuracy", "loss"}, 0, ";"));
  // append to an empty file writes the header.
  std::ofstream(dir / "empty.log").close();
  model->fit(binary_problem(),
             {.epochs = 1,
              .steps_per_epoch = 4,
              .callbacks = {std::make_shared<K::CSVLogger>(dir / "empty.log", ",", true)},
              .verbose = 0});
  CHECK(read_text(dir / "empty.log").starts_with("epoch,accuracy,loss\r\n0,"));
  CHECK_THROWS_AS(K::CSVLogger(path, ";;"), est::InvalidArgumentError);
  CHECK_THROWS_AS(model->fit(binary_problem(),
                             {.epochs = 1,
                              .steps_per_epoch = 1,
                              .callbacks = {std::make_shared<K::CSVLogger>(dir / "no/such/f")},
                              .verbose = 0}),
                  est::InvalidArgumentError);
}

TEST_CASE("keras TerminateOnNaN stops fit after the batch whose loss is NaN") {
  ScratchDir dir;
  auto model = compiled_model(dir / "m");
  // The third batch has an infinite feature, so its loss (and the running mean) is not finite
  // (a NaN would be zeroed by relu).
  std::vector<float> x(6 * 4 * 4, 0.5f);
  x[2 * 24 + 3] = std::numeric_limits<float>::infinity();
  std::vector<int64_t> y(16, 1);
  auto dataset = est::data::Dataset::from_tensor_slices(
                     est::data::Features{{"x", est::Tensor::from_vector(x, {16, 6})}},
                     est::Tensor::from_vector(y, {16}))
                     .batch(4)
                     .repeat();
  struct Counter : K::Callback {
    int batches = 0;
    void on_train_batch_end(int64_t, const K::Logs&) override { ++batches; }
  };
  auto counter = std::make_shared<Counter>();
  std::string text;
  auto history = model->fit(
      dataset, {.epochs = 3,
                .steps_per_epoch = 4,
                .callbacks = {std::make_shared<K::TerminateOnNaN>(capture(text)), counter},
                .verbose = 0});
  CHECK(text == "Batch 2: Invalid loss, terminating training\n");
  CHECK(counter->batches == 3);
  CHECK(history.epoch == std::vector<int>{0});  // Keras ends the epoch, then fit
  CHECK_FALSE(std::isfinite(history["loss"][0]));
}
