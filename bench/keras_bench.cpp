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
// Lines: one per round (`round=i fit_step_ms=... estimator_step_ms=... ratio=...` and the same in
// process CPU time), then `keras_fit_overhead=R range=[min, max]` (fit time / Estimator time per
// step, wall clock: the median of the rounds' ratios, and their range) and
// `keras_fit_overhead_cpu=...` (the same in process CPU time, which a loaded machine disturbs
// less).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
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

// Wall and process CPU seconds of one run.
struct Cost {
  double wall = 0, cpu = 0;
};

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

class Stopwatch {
 public:
  Cost elapsed() const {
    return {std::chrono::duration<double>(Clock::now() - wall_).count(), cpu_now() - cpu_};
  }

 private:
  Clock::time_point wall_ = Clock::now();
  double cpu_ = cpu_now();
};

Cost fit_cost(const est::data::Dataset& dataset, int epochs, int64_t steps) {
  est::keras::clear_session();
  std::string dir = fresh_dir();
  auto model = examples::build_and_compile_cnn_model(nullptr, dir);
  est::keras::ProgbarOutput discard = est::keras::stdout_output();
  discard.write = [](const std::string&) {};
  discard.is_terminal = false;
  Stopwatch stopwatch;
  model->fit(dataset, {.epochs = epochs, .steps_per_epoch = steps, .output = discard});
  Cost cost = stopwatch.elapsed();
  std::filesystem::remove_all(dir);
  return cost;
}

Cost estimator_cost(const est::data::Dataset& dataset, int64_t steps) {
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
  Stopwatch stopwatch;
  est::Estimator estimator(model_fn, est::RunConfig{.model_dir = dir, .tf_random_seed = 42});
  estimator.train([&](est::ModeKeys, const est::InputContext*) { return dataset; }, {.steps = steps});
  Cost cost = stopwatch.elapsed();
  std::filesystem::remove_all(dir);
  return cost;
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
  std::vector<double> ratios, cpu_ratios;
  auto per_step_ms = [steps](double seconds) { return 1e3 * seconds / static_cast<double>(steps); };
  for (int round = 0; round < rounds; ++round) {
    // Alternate which goes first, so that neither always follows the other.
    Cost fit, estimator;
    if (round % 2 == 0) {
      fit = fit_cost(dataset, epochs, steps_per_epoch);
      estimator = estimator_cost(dataset, steps);
    } else {
      estimator = estimator_cost(dataset, steps);
      fit = fit_cost(dataset, epochs, steps_per_epoch);
    }
    ratios.push_back(fit.wall / estimator.wall);
    cpu_ratios.push_back(fit.cpu / estimator.cpu);
    fmt::print(
        "round={} fit_step_ms={:.2f} estimator_step_ms={:.2f} ratio={:.4f} fit_cpu_step_ms={:.2f} "
        "estimator_cpu_step_ms={:.2f} cpu_ratio={:.4f}\n",
        round, per_step_ms(fit.wall), per_step_ms(estimator.wall), ratios.back(),
        per_step_ms(fit.cpu), per_step_ms(estimator.cpu), cpu_ratios.back());
    std::fflush(stdout);
  }
  auto summary = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return fmt::format("{:.4f} range=[{:.4f}, {:.4f}]", values[values.size() / 2], values.front(),
                       values.back());
  };
  fmt::print("keras_fit_overhead={} rounds={} steps={}\n", summary(ratios), rounds, steps);
  fmt::print("keras_fit_overhead_cpu={}\n", summary(cpu_ratios));
  return 0;
} catch (const std::exception& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
