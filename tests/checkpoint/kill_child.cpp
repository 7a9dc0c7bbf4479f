// Helper process for the crash tests (not a test itself).
//
//   checkpoint_kill_child loop DIR   resume from DIR's latest checkpoint, then save a new one
//                                    at every step until killed (background writer, keep 3);
//                                    tensor values encode the step, so a reader can check them
//   checkpoint_kill_child exit DIR   start one large background save and call std::exit(0)
//                                    at once: the atexit drain must finish the file
//
// Exit status: 0 done, 2 usage, 3 a restored checkpoint had values not matching its step,
// 4 an est::Error (printed).
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "checkpoint/checkpoint.h"

namespace {

using namespace est;
using namespace est::checkpoint;

constexpr int kVariables = 6;
constexpr int64_t kElements = 1 << 16;  // 512 KiB of float64 per variable, 3 MiB a checkpoint

// Every element of variable i at step s is s * 1000 + i: exact in float64.
TensorBundle bundle_for_step(int64_t step) {
  TensorBundle bundle;
  bundle.global_step = step;
  for (int i = 0; i < kVariables; ++i)
    bundle.add_variable(
        fmt::format("layer_{}/kernel", i),
        Tensor::full({kElements}, static_cast<double>(step * 1000 + i), DType::kF64));
  bundle.add_blob("iterator", fmt::format("step={}", step));
  return bundle;
}

int loop(const std::string& dir) {
  CheckpointManager manager({.directory = dir, .keep_checkpoint_max = 3});
  TensorBundle state = bundle_for_step(0);
  if (auto restored = manager.restore(state)) {
    for (int i = 0; i < kVariables; ++i) {
      const Tensor& value = state.tensors[static_cast<size_t>(i)].value;
      if (value.at({0}) != static_cast<double>(state.global_step * 1000 + i) ||
          value.at({kElements - 1}) != value.at({0}))
        return 3;
    }
  }
  for (int64_t step = state.global_step + 1;; ++step) manager.save(bundle_for_step(step));
}

int exit_during_save(const std::string& dir) {
  auto* manager = new CheckpointManager({.directory = dir});  // never destroyed
  TensorBundle big;
  big.global_step = 77;
  big.add_variable("big", Tensor::full({16 << 20}, 77.0));  // 64 MiB
  manager->save(big);
  std::exit(0);  // no destructor runs; the atexit drain must finish the save
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: checkpoint_kill_child loop|exit DIR\n");
    return 2;
  }
  std::string mode = argv[1];
  try {
    if (mode == "loop") return loop(argv[2]);
    if (mode == "exit") return exit_during_save(argv[2]);
  } catch (const est::Error& error) {
    fmt::print(stderr, "checkpoint_kill_child: {}\n", error.what());
    return 4;
  }
  return 2;
}
