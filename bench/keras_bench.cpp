// keras fit's cost per step over Estimator::train on the same model: the multi-worker tutorial's
// CNN (examples/keras_tutorial.h) on its Fashion-MNIST dataset at batch 64, once as
// model.fit(dataset, epochs=E, steps_per_epoch=S) (progress to a discarded non-terminal
// output: Keras's one line per epoch) and once as Estimator::train(steps = E x S) with a model_fn
// that calls the same Keras model, loss and optimizer (no metrics, no callbacks). Each run
// starts from a fresh model_dir and is timed whole (session start, input, every step, checkpoint
// saves), divided by its steps; rounds alternate fit and Estimator so that both see the same
// machine load.
//
//   keras_bench [--epochs E] [--steps_per_epoch S] [--rounds R] [--threads T]
// Lines: one per round (`round=i fit_step_ms=... estimator_step_ms=... ratio=...`), then
// `keras_fit_overhead=R range=[min, max]` (fit time / Estimator time per step: the median of the
// rounds' ratios, and their range).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <est/est.h>

#include "examples/keras_tutorial.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string fresh_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "keras_bench_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw est::PermissionDeniedError("mkdtemp failed");
  return pattern;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double fit_seconds(const est::data::Dataset& dataset, int epochs, int64_t steps) {
  est::keras::clear_session();
  std::string dir = fresh_dir();
  auto model = examples::build_and_compile_cnn_model(nullptr, dir);
  est::keras::ProgbarOutput discard = est::keras::stdout_output();
  discard.write = [](const std::string&) {};
  discard.is_terminal = false;
  auto start = Clock::now();
  model->fit(dataset, {.epochs = epochs, .steps_per_epoch = steps, .output = discard});
  double seconds = seconds_since(start);
  std::filesystem::remove_all(dir);
  return seconds;
}

double estimator_seconds(const est::data::Dataset& dataset, int64_t steps) {
  est::keras::clear_session();
  std::string dir = fresh_dir();
  // The same Keras model (its layers and variable names), loss and optimizer in a model_fn.
  auto model = examples::build_and_compile_cnn_model(nullptr, dir);
  model->build({28, 28});
  auto loss_fn = est::keras::losses::SparseCategoricalCrossentropy(true).fn;
  auto optimizer = est::keras::optimizers::SGD({.learning_rate = 0.001}).optimizer;
  auto model_fn = [&](const est::Features& features, const est::Tensor& labels, est::ModeKeys,
                      est::ModelContext& ctx) {
    est::Tensor logits = model->call(ctx, {features.at("x")})[0];
    est::Tensor loss = loss_fn(labels, logits);
    return est::EstimatorSpec::train(loss, optimizer.minimize(loss, ctx));
  };
  auto start = Clock::now();
  est::Estimator estimator(model_fn, est::RunConfig{.model_dir = dir, .tf_random_seed = 42});
  estimator.train([&](est::ModeKeys, const est::InputContext*) { return dataset; }, {}, steps);
  double seconds = seconds_since(start);
  std::filesystem::remove_all(dir);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) try {
  int epochs = 3, rounds = 5, threads = 2;
  int64_t steps_per_epoch = 70;
  CLI::App app("keras fit's time per step over Estimator::train on the same model.", "keras_bench");
  app.add_option("--epochs", epochs, "fit's epochs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--steps_per_epoch", steps_per_epoch, "steps per epoch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rounds", rounds, "interleaved fit/Estimator rounds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "compute threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  est::ops::set_num_threads(threads);
  est::log::set_level(est::log::Level::kWarning);

  est::data::Dataset dataset = examples::mnist_dataset(64);
  int64_t steps = epochs * steps_per_epoch;
  std::vector<double> ratios;
  for (int round = 0; round < rounds; ++round) {
    // Alternate which goes first, so that neither always follows the other.
    double fit = 0, estimator = 0;
    if (round % 2 == 0) {
      fit = fit_seconds(dataset, epochs, steps_per_epoch);
      estimator = estimator_seconds(dataset, steps);
    } else {
      estimator = estimator_seconds(dataset, steps);
      fit = fit_seconds(dataset, epochs, steps_per_epoch);
    }
    ratios.push_back(fit / estimator);
    fmt::print("round={} fit_step_ms={:.2f} estimator_step_ms={:.2f} ratio={:.4f}\n", round,
               1e3 * fit / static_cast<double>(steps), 1e3 * estimator / static_cast<double>(steps),
               ratios.back());
    std::fflush(stdout);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  fmt::print("keras_fit_overhead={:.4f} range=[{:.4f}, {:.4f}] rounds={} steps={}\n",
             sorted[sorted.size() / 2], sorted.front(), sorted.back(), rounds, steps);
  return 0;
} catch (const std::exception& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
