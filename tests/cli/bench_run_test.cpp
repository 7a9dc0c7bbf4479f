// Benchmarks run briefly, where a flag changes what a benchmark runs rather than how long:
// multi_worker_bench --no_exchange starts two independent 1-thread processes in place of the
// 2-worker job, gates them like the workers and prints the ratio no exchange can beat. A few
// steps each, on Fashion-MNIST (skipped with its reason where the data set is not installed).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/command.h"

using namespace est::testing;

namespace {

std::string program(const std::string& relative) {
  return std::string(EST_BUILD_ROOT) + "/" + relative;
}

bool have_fashion_mnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

}  // namespace

#if EST_HAVE_GRPC
TEST_CASE("multi_worker_bench --no_exchange gates two independent processes against one") {
  if (!have_fashion_mnist()) {
    MESSAGE("skipped: Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  ProgramResult run =
      run_program(program("bench/multi_worker_bench") +
                      " --rounds 1 --steps 6 --block_steps 2 --global_batch 16 --no_exchange",
                  180);
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  CHECK_MESSAGE(contains(run.output, "round 0: one_process "), run.output);
  CHECK_MESSAGE(contains(run.output, " two_alone "), run.output);
  CHECK_MESSAGE(contains(run.output, "block_ms one_process "), run.output);
  CHECK_MESSAGE(contains(run.output, "ratio_without_exchange="), run.output);
  CHECK_FALSE(contains(run.output, "two_workers"));

  ProgramResult odd = run_program(program("bench/multi_worker_bench") +
                                  " --rounds 1 --global_batch 15 --no_exchange");
  CHECK(odd.exit_code != 0);
  CHECK_MESSAGE(contains(odd.output, "even --global_batch"), odd.output);
}
#endif
