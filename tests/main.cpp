// doctest's main for every suite, with a reporter that counts run-time skips (tests/skip.h).
// The reporter is doctest's console reporter (defined in doctest's implementation, hence in
// this file) with two changes: a case that called est::testing::skip() and did not fail moves
// from "passed" to "skipped" in the closing line, and each skip prints its reason; a case
// skipped by the `* doctest::skip()` decorator prints its name too. It is the default reporter;
// an explicit --reporters=... on the command line still chooses doctest's own. A suite built
// with EST_TEST_REQUIRES_GPU (the GPU tests) exits 77, meson's "skipped", where no GPU can run.
// Suites keep their intra-op thread count fixed (EST_ADAPTIVE_THREADS=0, inherited by the
// processes they start) unless the environment says otherwise: results that depend on the
// thread count (the order of a sum) must not depend on how busy the machine is. The thread
// governor has its own tests (tests/ops/thread_governor_test.cpp).
// Suites also keep the static kernel table (EST_KERNEL_CALIBRATION=0, and no calibration cache
// file under $HOME: EST_KERNEL_CALIBRATION_CACHE=0), inherited likewise, unless the environment
// says otherwise: tests that compare two processes' results bit for bit must not see each
// process time the backends on its own. Calibration has its own tests
// (tests/ops/kernel_calibration_test.cpp), which turn it on.
// The GPU suites compare GPU results with the float32 reference, so they turn TensorFloat-32 off
// first, as TensorFlow's test cases do: it is on by default (ops/tensor_float_32.h) and rounds
// float32 GEMM and convolution inputs to 10 mantissa bits (the op harness turns it off in its
// gpu/cuda cases, tests/ops/harness_test.cpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "tests/skip.h"
#ifdef EST_TEST_REQUIRES_GPU
#include "ops/backend.h"
#endif
#ifdef EST_TEST_REQUIRES_GPU
#include "ops/tensor_float_32.h"
#endif

namespace {

// The reason given by the running case, if it skipped. Cases run one at a time, on the main
// thread; skip() from another thread of the same case would still mark that case.
std::optional<std::string> g_skip_reason;

class SkipCountingReporter : public doctest::ConsoleReporter {
 public:
  explicit SkipCountingReporter(const doctest::ContextOptions& options)
      : doctest::ConsoleReporter(options) {}

  void test_case_start(const doctest::TestCaseData& data) override {
    g_skip_reason.reset();
    doctest::ConsoleReporter::test_case_start(data);
  }

  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    doctest::ConsoleReporter::test_case_end(stats);
    if (g_skip_reason && stats.testCaseSuccess) {
      ++skipped_;
      std::cout << "SKIPPED test case \"" << tc->m_name << "\": " << *g_skip_reason << std::endl;
    }
    g_skip_reason.reset();
  }

  void test_case_skipped(const doctest::TestCaseData& data) override {
    if (data.m_skip)  // the decorator (cases left out by a filter are not listed)
      std::cout << "SKIPPED test case \"" << data.m_name << "\": doctest::skip() decorator"
                << std::endl;
  }

  void test_run_end(const doctest::TestRunStats& stats) override {
    // doctest prints "passed" as cases run minus failed, and "skipped" as cases registered
    // minus cases run: a run-time skip is a case that did not (really) run.
    doctest::TestRunStats adjusted = stats;
    adjusted.numTestCasesPassingFilters -= skipped_;
    doctest::ConsoleReporter::test_run_end(adjusted);
  }

 private:
  unsigned skipped_ = 0;
};

// True when the command line names reporters itself (-r=..., --reporters=..., --dt-r=...).
bool reporters_chosen(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    while (arg.starts_with("-")) arg.remove_prefix(1);
    if (arg.starts_with("dt-")) arg.remove_prefix(3);
    if (arg.starts_with("r=") || arg.starts_with("reporters=")) return true;
  }
  return false;
}

}  // namespace

REGISTER_REPORTER("est", 1, SkipCountingReporter);

namespace est::testing {

void skip(const std::string& reason) { g_skip_reason = reason; }

}  // namespace est::testing

int main(int argc, char** argv) {
  ::setenv("EST_ADAPTIVE_THREADS", "0", /*overwrite=*/0);
  ::setenv("EST_KERNEL_CALIBRATION", "0", /*overwrite=*/0);
  ::setenv("EST_KERNEL_CALIBRATION_CACHE", "0", /*overwrite=*/0);
#ifdef EST_TEST_REQUIRES_GPU
  est::ops::enable_tensor_float_32_execution(false);
  if (!est::ops::backend_available(est::ops::Backend::kCuda)) {
    std::cout << "SKIPPED: " << est::ops::backend_unavailable_reason(est::ops::Backend::kCuda)
              << std::endl;
    return 77;
  }
#endif
  doctest::Context context;
  if (!reporters_chosen(argc, argv)) context.setOption("reporters", "est");
  context.applyCommandLine(argc, argv);
  return context.run();
}
