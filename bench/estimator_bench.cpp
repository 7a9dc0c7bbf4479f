// The Estimator's cost over a bare training loop, on the tutorial CNN at batch 64
// (bench/cnn_bench.cpp's step): the same batches from the same in-memory generator, the same
// model and optimizer, once in a plain loop (begin_call, model, minimize, run) and once through
// Estimator::train with its default hooks (stop, NaN check, loss log, step counter, summaries
// every 100 steps, checkpoints at start and end). Also the start-to-first-step time: from
// constructing the Estimator to the end of its first step (input pipeline, first model_fn
// call, variable creation, the start checkpoint).
//
//   estimator_bench [--threads T] [--steps N] [--repeats R]
// Lines: `bare median_step_ms=...`, `estimator median_step_ms=...`, `overhead_percent=...`,
// `start_to_first_step_sec=...` (in-memory batches, then the example's file pipeline).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <est/est.h>

#include "bench/fashion_mnist_memory.h"
#include "examples/cnn_model.h"

namespace {

using est::Tensor;
using Clock = std::chrono::steady_clock;
constexpr int64_t kBatch = 64;

using Data = bench::InMemoryData;

// Batch `index` (cycling) as a fresh element: what both loops consume.
est::data::Element batch_at(const Data& data, int64_t index) {
  int64_t batches = data.images.dim(0) / kBatch;
  int64_t first = (index % batches) * kBatch;
  Tensor images = Tensor::empty({kBatch, 28, 28, 1});
  Tensor labels = Tensor::empty({kBatch}, est::DType::kI64);
  bench::copy_rows(data, first, images, labels);
  return est::data::Element(est::Features{{"image", images}}, labels);
}

est::Tensor train_loss(est::ModelContext& ctx, const est::data::Element& element) {
  Tensor logits = examples::tutorial_cnn(ctx, element.features.at("image"));
  return est::nn::sparse_softmax_cross_entropy(element.labels, logits);
}

est::EstimatorSpec model_fn(const est::Features& features, const Tensor& labels, est::ModeKeys,
                            est::ModelContext& ctx) {
  Tensor loss = train_loss(ctx, est::data::Element(features, labels));
  return est::EstimatorSpec::train(loss, est::optim::sgd(1e-3).minimize(loss, ctx));
}

// Durations (seconds) of `steps` plain steps after a warm-up of 10, each measured from the
// end of the previous step: what the Estimator's steps are measured as, too.
std::vector<double> bare_steps(const Data& data, int64_t steps) {
  est::nn::VariableStore store;
  est::ModelContext ctx(store, est::nn::Mode::kTrain, 7);
  std::vector<double> durations;
  Clock::time_point previous = Clock::now();
  for (int64_t s = 0; s < steps + 10; ++s) {
    est::data::Element element = batch_at(data, s);
    ctx.begin_call();
    Tensor loss = train_loss(ctx, element);
    est::optim::sgd(1e-3).minimize(loss, ctx).run();
    Clock::time_point now = Clock::now();
    if (s >= 10) durations.push_back(std::chrono::duration<double>(now - previous).count());
    previous = now;
  }
  return durations;
}

// Records when each step's after_run reaches it: the time between two of them is one whole
// step of the loop (input, model_fn, train op, every hook).
class TimingHook : public est::SessionRunHook {
 public:
  void after_run(est::SessionRunContext&, const est::SessionRunValues& values) override {
    Clock::time_point now = Clock::now();
    if (values.global_step == 1) first_step_end = now;
    if (values.global_step > 10)
      durations.push_back(std::chrono::duration<double>(now - previous).count());
    previous = now;
  }
  Clock::time_point first_step_end, previous;
  std::vector<double> durations;
};

struct EstimatorRun {
  std::vector<double> step_durations;
  double start_to_first_step;
};

EstimatorRun estimator_rate(const Data& data, int64_t steps) {
  std::string pattern = (std::filesystem::temp_directory_path() / "est_bench_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw est::PermissionDeniedError("mkdtemp failed");
  auto input_fn = [&data](est::ModeKeys, const est::InputContext*) {
    return est::data::Dataset::from_generator([&data] {
      return [&data, index = int64_t{0}]() mutable -> std::optional<est::data::Element> {
        return batch_at(data, index++);
      };
    });
  };
  auto timing = std::make_shared<TimingHook>();
  auto start = Clock::now();
  est::Estimator estimator(model_fn, est::RunConfig{.model_dir = pattern, .tf_random_seed = 7});
  estimator.train(input_fn, {.hooks = {timing}, .steps = steps + 10});
  std::filesystem::remove_all(pattern);
  return {timing->durations, std::chrono::duration<double>(timing->first_step_end - start).count()};
}

// Start-to-first-step with the example's real input pipeline: the IDX files are read, scaled
// and a 10000-image shuffle buffer filled before the first batch.
double start_to_first_step_with_files() {
  std::string pattern = (std::filesystem::temp_directory_path() / "est_bench_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw est::PermissionDeniedError("mkdtemp failed");
  auto input_fn = [](est::ModeKeys, const est::InputContext*) {
    return est::data::fashion_mnist("train")
        .map(est::data::scale)
        .cache()
        .shuffle(10000, 42)
        .repeat()
        .batch(kBatch)
        .prefetch(2);
  };
  auto timing = std::make_shared<TimingHook>();
  auto start = Clock::now();
  est::Estimator estimator(model_fn, est::RunConfig{.model_dir = pattern, .tf_random_seed = 7});
  estimator.train(input_fn, {.hooks = {timing}, .steps = 1});
  std::filesystem::remove_all(pattern);
  return std::chrono::duration<double>(timing->first_step_end - start).count();
}

}  // namespace

int main(int argc, char** argv) try {
  int threads = 2, repeats = 3;
  int64_t steps = 500;
  CLI::App app("The Estimator's per-step cost over a bare loop, and start to first step.",
               "estimator_bench");
  app.add_option("--threads", threads, "OpenMP threads")->capture_default_str();
  app.add_option("--steps", steps, "steps per timed run")->capture_default_str();
  app.add_option("--repeats", repeats, "timed runs of each loop, interleaved")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  est::ops::set_num_threads(threads);
  est::log::set_level(est::log::Level::kWarning);  // the Estimator's INFO lines off
  Data data = bench::load_fashion_mnist("train");
  // Per-step durations, interleaved runs: the median step is robust to other processes'
  // bursts on a shared machine, which throughput over a run is not.
  std::vector<double> bare, estimator, first_step;
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> plain = bare_steps(data, steps);
    bare.insert(bare.end(), plain.begin(), plain.end());
    EstimatorRun run = estimator_rate(data, steps);
    estimator.insert(estimator.end(), run.step_durations.begin(), run.step_durations.end());
    first_step.push_back(run.start_to_first_step);
  }
  double bare_median = bench::median(bare), estimator_median = bench::median(estimator);
  fmt::print("bare batch={} median_step_ms={:.3f} steps_per_sec={:.1f}\n", kBatch,
             1e3 * bare_median, 1.0 / bare_median);
  fmt::print("estimator batch={} median_step_ms={:.3f} steps_per_sec={:.1f}\n", kBatch,
             1e3 * estimator_median, 1.0 / estimator_median);
  fmt::print("overhead_percent={:.2f} (target <= 3)\n",
             100.0 * (estimator_median / bare_median - 1.0));
  fmt::print("start_to_first_step_sec={:.3f} (in-memory batches; target < 1)\n",
             bench::median(first_step));
  fmt::print("start_to_first_step_sec={:.3f} (fashion_mnist input_fn, shuffle(10000))\n",
             start_to_first_step_with_files());
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
