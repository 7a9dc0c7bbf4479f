// Training and evaluation throughput of the Estimator tutorial's CNN (examples/cnn_model.h) on
// Fashion-MNIST, in examples/s: train at batch 64 and 256, evaluate at batch 1000. Batches are
// sliced from the images held in memory (as the PyTorch peer does), so this measures the step,
// not the input pipeline. Also reports whether a steady-state step allocated memory from the
// system or built a kernel primitive (it should do neither).
//
//   cnn_bench [--threads T] [--repeats R] [--examples N] [--policy mixed_bfloat16]
// First line: `est roofline threads=<T> gemm=<kind> sgemm_gflops=<G> triad_gb_per_s=<B>
// kernel_calibration=<on|off>`, this machine's bounds measured in the same run
// (bench/roofline.h), and whether kernels are chosen by calibration (ops/kernel_calibration.h;
// EST_KERNEL_CALIBRATION=0: the static table). Then `est <train|eval> batch=<B>
// examples_per_sec=<median> bound=<flops|bytes> roofline_fraction=<F>` (the step's roofline
// bound, max(FLOPs / sgemm rate, bytes / bandwidth), over its median time; `bound` names the
// larger term) and `est steady_state ...`; under another policy
// than float32 (nn/mixed_precision.h) each line carries `policy=<name>` before the fraction (the
// bound stays float32's).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <est/data/data.h>
#include <est/nn/nn.h>
#include <est/ops/allocator.h>
#include <est/ops/ops.h>

#include "bench/fashion_mnist_memory.h"
#include "bench/roofline.h"
#include "examples/cnn_model.h"
#include "ops/kernel_calibration.h"

namespace {

using est::Tensor;
using Clock = std::chrono::steady_clock;

struct Trainer {
  est::nn::VariableStore store;
  est::ModelContext ctx{store, est::nn::Mode::kTrain, 7};

  void step(const Tensor& images, const Tensor& labels) {
    ctx.begin_call();
    Tensor logits = examples::tutorial_cnn(ctx, images);
    Tensor loss = est::nn::sparse_softmax_cross_entropy(labels, logits);
    est::optim::sgd(1e-3).minimize(loss, ctx).run();
  }

  void predict(const Tensor& images) {
    est::ops::NoGradGuard no_grad;
    ctx.begin_call();
    est::ops::argmax(examples::tutorial_cnn(ctx, images), 1);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 5;
  int64_t examples = 32000;
  std::string policy = "float32";
  CLI::App app("Training and evaluation examples/s of the tutorial CNN.", "cnn_bench");
  app.add_option("--threads", threads, "OpenMP threads")->capture_default_str();
  app.add_option("--repeats", repeats, "timed runs per figure (the median is reported)")
      ->capture_default_str();
  app.add_option("--examples", examples, "training examples per timed run")->capture_default_str();
  app.add_option("--policy", policy, "global dtype policy (float32, mixed_bfloat16)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  est::nn::mixed_precision::set_global_policy(policy);
  const std::string suffix = policy == "float32" ? "" : " policy=" + policy;
  est::ops::set_num_threads(threads);
  bench::InMemoryData train = bench::load_fashion_mnist("train");
  bench::InMemoryData test = bench::load_fashion_mnist("test");
  const bench::Roofline roofline = bench::measure_roofline(threads);
  fmt::print(
      "est roofline threads={} gemm={} sgemm_gflops={:.1f} triad_gb_per_s={:.1f} "
      "kernel_calibration={}\n",
      threads, roofline.gemm, roofline.gflops, roofline.gbytes_s,
      est::ops::kernel_calibration_enabled() ? "on" : "off");
  // " bound=<term> roofline_fraction=<F>" for a step at `batch` run at `examples_per_sec`.
  auto fraction = [&](int64_t batch, bool training, double examples_per_sec) {
    bench::StepCost cost = bench::tutorial_cnn_cost(batch, training);
    return fmt::format(" bound={} roofline_fraction={:.3f}", bench::roofline_limit(roofline, cost),
                       bench::roofline_fraction(roofline, cost, batch / examples_per_sec));
  };
  Trainer trainer;

  for (int64_t batch : {64, 256}) {
    Tensor images = Tensor::empty({batch, 28, 28, 1});
    Tensor labels = Tensor::empty({batch}, est::DType::kI64);
    int64_t batches = train.images.dim(0) / batch, next = 0;
    auto run = [&](int64_t steps) {
      for (int64_t s = 0; s < steps; ++s, next = (next + 1) % batches) {
        bench::copy_rows(train, next * batch, images, labels);
        trainer.step(images, labels);
      }
    };
    run(10);  // warm-up: variables, primitives, allocator caches
    auto& allocator = est::ops::allocator_for(est::Device::cpu());
    int64_t system_before = allocator.stats().system_allocations;
    int64_t created_before = est::ops::kernel_cache_stats().created;
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
      int64_t steps = std::max<int64_t>(1, examples / batch);
      auto start = Clock::now();
      run(steps);
      rates.push_back(steps * batch / std::chrono::duration<double>(Clock::now() - start).count());
    }
    double rate = bench::median(rates);
    fmt::print("est train batch={} examples_per_sec={:.1f}{}{}\n", batch, rate, suffix,
               fraction(batch, true, rate));
    fmt::print("est steady_state batch={} system_allocations={} primitives_created={}{}\n", batch,
               allocator.stats().system_allocations - system_before,
               est::ops::kernel_cache_stats().created - created_before, suffix);
  }

  trainer.ctx.set_mode(est::nn::Mode::kEval);
  int64_t batch = 1000;
  Tensor images = Tensor::empty({batch, 28, 28, 1});
  Tensor labels = Tensor::empty({batch}, est::DType::kI64);
  trainer.predict(images);  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    int64_t steps = std::max<int64_t>(1, examples / batch);
    auto start = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      bench::copy_rows(test, (s % 10) * batch, images, labels);
      trainer.predict(images);
    }
    rates.push_back(steps * batch / std::chrono::duration<double>(Clock::now() - start).count());
  }
  double rate = bench::median(rates);
  fmt::print("est eval batch={} examples_per_sec={:.1f}{}{}\n", batch, rate, suffix,
             fraction(batch, false, rate));
  return 0;
}
