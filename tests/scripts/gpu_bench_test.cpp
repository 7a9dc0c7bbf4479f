// bench/gpu_bench.sh on the CPU with tiny step counts (the H100 suite runs it on the GPU): both
// sides print their lines in the format the script parses, the ratio table has a row per
// measurement, and without PyTorch est's figures still come with the reason each ratio is
// missing.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <string>

#include "tests/command.h"
#include "tests/skip.h"

#ifndef EST_BUILD_ROOT
#error "EST_BUILD_ROOT must name the build directory"
#endif

using est::testing::run_program;
using est::testing::shell_quote;

namespace {

const std::string kTiny =
    " --device cpu --warmup 3 --steps 1 --repeats 1 --cnn-batches 2,4 --resnet-batch 2"
    " --resnet-size 4 --resnet-width 4 --resnet-blocks 1";

std::string script() {
  return shell_quote(std::string(EST_SOURCE_ROOT) + "/bench/gpu_bench.sh") + " --build " +
         shell_quote(EST_BUILD_ROOT);
}

bool has_line(const std::string& output, const std::string& pattern) {
  return std::regex_search(output, std::regex("(^|\n)" + pattern + "(\n|$)"));
}

// The interpreter gpu_bench.sh would pick: the first of python3 on PATH and /usr/bin/python3
// that imports torch; empty when neither does (PyTorch is not installed).
std::string python_with_torch() {
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (run_program(std::string(candidate) + " -c 'import torch'", 60).exit_code == 0)
      return candidate;
  return "";
}

const std::string kFigures = R"( steps_per_sec=[0-9.]+ examples_per_sec=[0-9.]+ loss=[-0-9.na]+)";

}  // namespace

TEST_CASE("gpu_bench.sh --device cpu: est and torch lines, then the ratios") {
  const std::string python = python_with_torch();
  if (python.empty())
    return est::testing::skip(
        "PyTorch is not installed for python3 or /usr/bin/python3 (the peer of gpu_bench.sh; "
        "on Debian: apt-get install python3-torch)");
  const auto result = run_program("env PYTHON=" + python + " " + script() + kTiny, 300);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const std::string& out = result.output;
  CHECK(has_line(out, "est device=/cpu:0 threads=2"));
  for (const char* batch : {"2", "4"}) {
    CHECK(has_line(out, std::string("est train model=cnn batch=") + batch +
                            " mode=eager precision=float32" + kFigures));
    CHECK(has_line(out, std::string("est train model=cnn batch=") + batch +
                            " mode=graph precision=float32 skipped=\"CUDA graphs need a GPU\""));
    CHECK(has_line(out, std::string("torch train model=cnn batch=") + batch +
                            " mode=eager precision=float32" + kFigures));
    CHECK(has_line(out, std::string("cnn batch=") + batch +
                            R"( steps/s \(est eager\) +[0-9.]+ +[0-9.]+ +[0-9.]+  reported)"));
  }
  CHECK(has_line(
      out, "est train model=resnet batch=2 mode=eager precision=mixed_bfloat16" + kFigures));
  CHECK(has_line(out, "torch train model=resnet batch=2 mode=eager precision=bfloat16" + kFigures));
  CHECK(has_line(
      out,
      R"(resnet batch=2 examples/s \(mixed_bfloat16/bfloat16\) +[0-9.]+ +[0-9.]+ +[0-9.]+  reported)"));
  CHECK(out.find("ratio missing") == std::string::npos);
}

TEST_CASE("gpu_bench.sh without PyTorch: est's figures and why each ratio is missing") {
  // A torch module that fails to import stands for a machine without PyTorch.
  est::testing::ScratchDir dir;
  std::ofstream(dir / "torch.py") << "raise ImportError(\"No module named 'torch'\")\n";
  const auto result = run_program(
      "env PYTHON=/usr/bin/python3 PYTHONPATH=" + shell_quote(dir.str()) + " " + script() + kTiny,
      300);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const std::string& out = result.output;
  CHECK(has_line(out, "est train model=cnn batch=2 mode=eager precision=float32" + kFigures));
  CHECK(has_line(out,
                 "torch: missing: PyTorch is not installed for /usr/bin/python3 \\(ImportError: No "
                 "module named 'torch'\\)"));
  CHECK(has_line(out, R"(cnn batch=4 steps/s \(est eager\) +[0-9.]+ +- +-  ratio missing: )"
                      R"(PyTorch is not installed for /usr/bin/python3 .*)"));
  CHECK(has_line(
      out,
      R"(resnet batch=2 examples/s \(mixed_bfloat16/-\) .* ratio missing: PyTorch is not installed.*)"));
  CHECK(out.find("== torch") != std::string::npos);
  CHECK(out.find("torch: to install PyTorch: apt-get install python3-torch") != std::string::npos);
  // No interpreter at all says so.
  const auto none = run_program("env PYTHON=/nonexistent/python3 " + script() + kTiny, 300);
  CHECK(none.exit_code == 0);
  CHECK(has_line(none.output,
                 "torch: missing: no Python interpreter /nonexistent/python3 \\(set PYTHON to one "
                 "with torch\\)"));
}

TEST_CASE("gpu_bench.sh: a missing binary or a wrong device is an error that says what to do") {
  auto result = run_program(shell_quote(std::string(EST_SOURCE_ROOT) + "/bench/gpu_bench.sh") +
                            " --build /nonexistent --device cpu");
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("/nonexistent/bench/gpu_bench is not built (ninja -C /nonexistent "
                           "bench/gpu_bench)") != std::string::npos);
  result = run_program(script() + " --device tpu");
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("--device is gpu or cpu, not 'tpu'") != std::string::npos);
}
