// The tutorial program's memory (issue 32, item 3): examples/mnist_estimator's train_and_evaluate
// (the tutorial CNN, Fashion-MNIST cached in memory, an evaluation after each checkpoint) run in
// this process, its peak resident size (what `/usr/bin/time -f %M` reports) against the bytes
// the two caches record, and where the resident bytes were at the peak: tensors in use, the
// tensor allocator's cache, glibc's heaps and mappings, and the rest (code, stacks, oneDNN).
#pragma once

#include <fmt/format.h>
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <est/est.h>

#include "examples/cnn_estimator.h"

namespace bench {

struct MemoryAtPeak {
  int64_t resident = 0;  // VmRSS when it was highest, sampled every 2 ms
  est::ops::AllocatorStats tensors;
  int64_t malloc_heap = 0;    // glibc's arenas (mallinfo2 arena)
  int64_t malloc_mapped = 0;  // glibc's own mappings (hblkhd): large blocks
};

inline int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

// The bytes that `cache()` records of a split: float32 28x28 images and int64 labels.
inline int64_t cached_bytes(const std::string& split) {
  const std::string prefix = split == "train" ? "train" : "t10k";
  const est::Tensor labels = est::data::read_idx(std::string(est::data::kFashionMnistDirectory) +
                                                 "/" + prefix + "-labels-idx1-ubyte.gz");
  return labels.dim(0) * (28 * 28 * 4 + 8);
}

// Runs mnist_estimator's train_and_evaluate for `steps` and samples the memory meanwhile.
inline MemoryAtPeak run_tutorial_program(int64_t steps) {
  MemoryAtPeak peak;
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) {
      const int64_t now = resident_bytes();
      if (now > peak.resident) {
        const struct mallinfo2 heap = mallinfo2();
        peak = {now, est::ops::memory_stats(), static_cast<int64_t>(heap.arena),
                static_cast<int64_t>(heap.hblkhd)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const std::string dir =
      std::filesystem::temp_directory_path() / ("est_memory_bench_" + std::to_string(::getpid()));
  {
    est::RunConfig config{.model_dir = dir,
                          .tf_random_seed = 42,
                          .save_checkpoints_steps = 1000,
                          .save_checkpoints_secs = std::nullopt};
    est::Estimator classifier(examples::cnn_model_fn, config, {{"learning_rate", 0.05}});
    auto input_fn = [](est::ModeKeys mode, const est::InputContext* ctx) {
      return examples::fashion_mnist_input_fn(mode, ctx, 64);
    };
    est::train_and_evaluate(classifier, {.input_fn = input_fn, .max_steps = steps},
                            {.input_fn = input_fn, .steps = std::nullopt, .throttle_secs = 0});
  }
  done = true;
  sampler.join();
  std::filesystem::remove_all(dir);
  return peak;
}

// The process's peak resident bytes so far (the kernel's, as /usr/bin/time's %M).
inline int64_t peak_resident_bytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return int64_t{usage.ru_maxrss} * 1024;
}

}  // namespace bench
