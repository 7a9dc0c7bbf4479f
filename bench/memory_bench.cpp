// The CPU allocator under changing shapes: the tutorial CNN trained on batches of a fixed size,
// then of random sizes in [1, B] (ragged or padded batches, short final batches), with the
// cache bounded (the default: twice the peak in use) and unbounded (as before the bound), then
// trimmed. Reports ops::memory_stats() after each phase and the system allocations per step.
//
//   memory_bench [--steps N] [--batch B]
// Lines: `phase=<name> steps=<n> system_allocations_per_step=<a> in_use_mb=<m> peak_mb=<m>
// cached_mb=<m> limit_mb=<m> system_frees=<n>`, and `trim released_mb=<m>`.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include <est/ops/allocator.h>
#include <est/ops/ops.h>

#include "bench/cnn_step.h"
#include "bench/estimator_memory.h"

namespace {

using est::Tensor;

double mb(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void report(const std::string& phase, int64_t steps, int64_t allocations_before) {
  const est::ops::AllocatorStats s = est::ops::memory_stats();
  fmt::print(
      "phase={} steps={} system_allocations_per_step={:.2f} in_use_mb={:.1f} peak_mb={:.1f} "
      "cached_mb={:.1f} limit_mb={:.1f} system_frees={}\n",
      phase, steps, static_cast<double>(s.system_allocations - allocations_before) / steps,
      mb(s.bytes_in_use), mb(s.peak_bytes_in_use), mb(s.bytes_cached), mb(s.cache_limit),
      s.system_frees);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 200, batch = 64, estimator_steps = 2000;
  double limit = 1.5;
  CLI::App app(
      "The tutorial program's peak resident size against its cached data (exit 1 over "
      "--limit), then the CPU allocator's cache with fixed and ragged batches of the tutorial "
      "CNN, bounded and unbounded, then trimmed (memory_stats()).",
      "memory_bench");
  app.add_option("--steps", steps, "training steps per phase")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "the largest batch (ragged batches are 1 to it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--estimator_steps", estimator_steps,
                 "train_and_evaluate steps of the tutorial program (0: skip it)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--limit", limit, "the most peak resident bytes per cached byte")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  bool over_limit = false;
  if (estimator_steps > 0) {  // first: the peak is the process's high-water mark
    const bench::MemoryAtPeak at = bench::run_tutorial_program(estimator_steps);
    const int64_t peak = bench::peak_resident_bytes();
    const int64_t data = bench::cached_bytes("train") + bench::cached_bytes("test");
    const double ratio = static_cast<double>(peak) / static_cast<double>(data);
    fmt::print(
        "program steps={} peak_rss_mb={:.1f} cached_data_mb={:.1f} ratio={:.2f} limit={:.2f}\n",
        estimator_steps, mb(peak), mb(data), ratio, limit);
    fmt::print(
        "program_at_peak rss_mb={:.1f} tensors_in_use_mb={:.1f} tensor_cache_mb={:.1f} "
        "malloc_heap_mb={:.1f} malloc_mapped_mb={:.1f}\n",
        mb(at.resident), mb(at.tensors.bytes_in_use), mb(at.tensors.bytes_cached),
        mb(at.malloc_heap), mb(at.malloc_mapped));
    over_limit = ratio > limit;
    est::ops::trim_memory();
  }
  bench::CnnStep cnn(batch);
  std::mt19937 random(5);
  auto ragged_steps = [&](int64_t count) {
    for (int64_t s = 0; s < count; ++s) {
      const int64_t rows = std::uniform_int_distribution<int64_t>(1, batch)(random);
      Tensor images = Tensor::empty({rows, 28, 28, 1});
      Tensor labels = Tensor::empty({rows}, est::DType::kI64);
      std::memcpy(images.raw_data(), cnn.images.raw_data(), images.nbytes());
      std::memcpy(labels.raw_data(), cnn.labels.raw_data(), labels.nbytes());
      cnn.step(images, labels);
    }
  };

  for (int i = 0; i < 5; ++i) cnn.step();  // warm-up: variables, primitives, caches
  int64_t before = est::ops::memory_stats().system_allocations;
  for (int64_t s = 0; s < steps; ++s) cnn.step();
  report("fixed_batch", steps, before);

  before = est::ops::memory_stats().system_allocations;
  ragged_steps(steps);
  report("ragged_bounded", steps, before);

  est::ops::trim_memory();
  est::ops::allocator_for(est::Device::cpu()).set_cache_limit(int64_t{1} << 50);
  before = est::ops::memory_stats().system_allocations;
  ragged_steps(steps);
  report("ragged_unbounded", steps, before);

  est::ops::allocator_for(est::Device::cpu()).set_cache_limit(-1);  // back to the bound
  report("bound_restored", 1, est::ops::memory_stats().system_allocations);
  fmt::print("trim released_mb={:.1f}\n", mb(est::ops::trim_memory()));
  report("trimmed", 1, est::ops::memory_stats().system_allocations);
  if (over_limit)
    fmt::print(stderr, "memory_bench: the program's peak is over {} x the cached data\n", limit);
  return over_limit ? 1 : 0;
}
