// bench/gpu_bench.sh on the CPU with tiny step counts (scripts/gpu_check.sh runs it on the GPU):
// both sides print their lines in the format the script parses, in rounds that alternate which
// side runs first, the ratio table has a row per measurement (a GPU-only row says why it is
// skipped), est's captured-step row still trains through the CapturedStep's eager path, the
// ResNet's line says how its convolutions compute, --resnet-policy reaches both sides, and
// without PyTorch est's figures still come with the reason each ratio is missing.
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

const std::string kFigures = R"( steps_per_sec=[0-9.]+ examples_per_sec=[0-9.]+ loss=[-0-9.na]+)";
const std::string kCapturedOnCpu =
    R"( skipped="CUDA graphs need a GPU; the CapturedStep's eager path trained 3 steps")";

// Why /usr/bin/python3 cannot run the torch side here, or "" when it can.
std::string torch_missing() {
  const auto probe = run_program("/usr/bin/python3 -c 'import torch'", 120);
  return probe.exit_code == 0 ? "" : "PyTorch is not installed for /usr/bin/python3";
}

}  // namespace

TEST_CASE("gpu_bench.sh --device cpu: est and torch lines, then the ratios") {
  if (const std::string why = torch_missing(); !why.empty()) return est::testing::skip(why);
  const auto result = run_program("env PYTHON=/usr/bin/python3 " + script() + kTiny, 300);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const std::string& out = result.output;
  CHECK(has_line(out, "est device=/cpu:0 threads=2"));
  CHECK(has_line(out, "est precision: float32 rows run with TF32 off.*"));
  CHECK(has_line(out, "torch precision: float32 rows run with TF32 off.*"));
  // Two rounds, torch first in the second.
  const size_t round2 = out.find("== round 2 of 2: torch first");
  REQUIRE(round2 != std::string::npos);
  CHECK(out.find("== round 1 of 2: est first") < round2);
  CHECK(out.find("== torch (", round2) < out.find("== est (", round2));
  for (const char* batch : {"2", "4"}) {
    const std::string cnn = std::string("train model=cnn batch=") + batch;
    CHECK(has_line(out, "est " + cnn + " mode=eager precision=float32" + kFigures));
    CHECK(has_line(out, "est " + cnn + " mode=graph precision=float32" + kCapturedOnCpu));
    CHECK(
        has_line(out, "est " + cnn + " mode=eager precision=tf32 skipped=\"TF32 is a GPU mode\""));
    CHECK(has_line(out, "torch " + cnn + " mode=eager precision=float32" + kFigures));
    CHECK(has_line(
        out, "torch " + cnn + " mode=graph precision=float32 skipped=\"CUDA graphs need a GPU\""));
    CHECK(has_line(
        out,
        std::string("cnn batch=") + batch +
            R"( float32 steps/s \(est eager / torch eager\) +[0-9.]+ +[0-9.]+ +[0-9.]+  reported)"));
    CHECK(has_line(
        out,
        std::string("cnn batch=") + batch +
            R"( float32 steps/s \(est graph / torch eager\) +- +[0-9.]+ +-  skipped: CUDA graphs need a GPU.*)"));
  }
  CHECK(has_line(out,
                 "est train model=resnet batch=2 mode=eager precision=mixed_bfloat16 "
                 "convs=float32_via_casts" +
                     kFigures));
  CHECK(has_line(out, "torch train model=resnet batch=2 mode=eager precision=bfloat16" + kFigures));
  CHECK(has_line(
      out,
      R"(resnet batch=2 examples/s \(mixed_bfloat16, convs float32_via_casts / bfloat16\) +[0-9.]+ +[0-9.]+ +[0-9.]+  reported)"));
  CHECK(out.find("ratio missing") == std::string::npos);
  // --resnet-policy reaches both sides.
  const auto float32 = run_program(
      "env PYTHON=/usr/bin/python3 " + script() + kTiny + " --rounds 1 --resnet-policy float32",
      300);
  INFO(float32.output);
  CHECK(float32.exit_code == 0);
  CHECK(has_line(float32.output,
                 "est train model=resnet batch=2 mode=eager precision=float32 "
                 "convs=float32" +
                     kFigures));
  CHECK(has_line(float32.output,
                 "torch train model=resnet batch=2 mode=eager precision=float32" + kFigures));
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
  CHECK(has_line(out, "est train model=cnn batch=4 mode=graph precision=float32" + kCapturedOnCpu));
  CHECK(out.find("torch: to install PyTorch: apt-get install python3-torch") != std::string::npos);
  CHECK(has_line(out, R"(cnn batch=4 float32 steps/s \(est eager / torch eager\) +[0-9.]+ +- +-  )"
                      R"(ratio missing: PyTorch is not installed for /usr/bin/python3 .*)"));
  CHECK(has_line(out,
                 R"(resnet batch=2 examples/s \(mixed_bfloat16, convs float32_via_casts / -\) )"
                 R"(.* ratio missing: PyTorch is not installed.*)"));
  // --resnet-policy reaches est's side (torch's: the case above, where torch is installed).
  const auto float32 =
      run_program("env PYTHON=/usr/bin/python3 PYTHONPATH=" + shell_quote(dir.str()) + " " +
                      script() + kTiny + " --rounds 1 --resnet-policy float32",
                  300);
  CHECK(has_line(float32.output,
                 "est train model=resnet batch=2 mode=eager precision=float32 "
                 "convs=float32" +
                     kFigures));
  CHECK(out.find("== torch") != std::string::npos);
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
  result = run_program(script() + " --device cpu --rounds 0");
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("--rounds is a positive number, not '0'") != std::string::npos);
}
