// A program of the reproducibility tests (thread_count_training_test.cpp): trains the tutorial
// CNN (examples/cnn_model.h) with the Estimator, seeded, on synthetic images that are the same
// in every run, up to a global step, and saves its checkpoint there. It runs with the process's
// default thread count and the thread governor on (unless the environment says otherwise), and
// prints the intra-op thread counts its steps saw, so a test can tell that the governor shed
// threads while a neighbour kept the cores busy.
//
//   seeded_cnn_trainer --model_dir D --max_steps N [--optimizer sgd|adam]
// Prints "threads seen: <counts>" and exits 0; 1 with "error: <message>" on an est::Error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <set>

#include "estimator/estimator.h"
#include "examples/cnn_model.h"
#include "nn/nn.h"
#include "ops/backend.h"

namespace {

using namespace est;

// Examples and batch: 8 batches an epoch, so a run resumed at a multiple of 8 steps reads the
// same batches as an uninterrupted one (the input restarts with the resumed run).
constexpr int64_t kExamples = 512;
constexpr int64_t kBatch = 64;

data::Dataset synthetic_images() {
  ops::Generator generator(5);
  Tensor images = ops::random_uniform({kExamples, 28, 28, 1}, 0, 1, generator);
  Tensor labels = ops::cast(ops::random_uniform({kExamples}, 0, 10, generator), DType::kI64);
  return data::Dataset::from_tensor_slices({{"image", images}}, labels);
}

// Records the intra-op thread count (ops::active_threads) before each step.
class ThreadCountHook : public SessionRunHook {
 public:
  SessionRunArgs before_run(SessionRunContext& /*run_context*/) override {
    seen_.insert(ops::active_threads());
    return {};
  }
  const std::set<int>& seen() const { return seen_; }

 private:
  std::set<int> seen_;
};

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir, optimizer = "sgd";
  int64_t max_steps = 32;
  CLI::App app("trains the tutorial CNN, seeded, for est's reproducibility tests",
               "seeded_cnn_trainer");
  app.add_option("--model_dir", model_dir)->required();
  app.add_option("--max_steps", max_steps, "the global step to train to");
  app.add_option("--optimizer", optimizer, "sgd or adam")->check(CLI::IsMember({"sgd", "adam"}));
  CLI11_PARSE(app, argc, argv);

  // One checkpoint, when training ends (the run lasts seconds, the default cadence 10 minutes).
  RunConfig config;
  config.model_dir = model_dir;
  config.tf_random_seed = 7;
  config.save_summary_steps = 0;
  auto input_fn = [](ModeKeys, const InputContext*) {
    return synthetic_images().repeat().batch(kBatch);
  };
  auto model_fn = [optimizer](const Features& features, const Tensor& labels, ModeKeys,
                              ModelContext& ctx) {
    Tensor logits = examples::tutorial_cnn(ctx, features.at("image"));
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
    optim::Optimizer opt = optimizer == "adam" ? optim::adam(1e-3) : optim::sgd(0.05);
    return EstimatorSpec::train(loss, opt.minimize(loss, ctx));
  };
  Estimator estimator(model_fn, config);
  auto hook = std::make_shared<ThreadCountHook>();
  estimator.train(input_fn, {.hooks = {hook}, .max_steps = max_steps});
  std::printf("threads seen: %s\n", fmt::format("{}", fmt::join(hook->seen(), " ")).c_str());
  return 0;
} catch (const est::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 1;
}
