// scripts/gpu_check.sh where there is no GPU (here, and in CI): from a stage of this build's own
// binaries (GPU_STAGE) it reads backends.txt, then stops cleanly at the first GPU suite, which
// finds no GPU, with exit 77 and the reason in summary.txt (a GPU suite that skips on the GPU
// machine is not a pass); a stage whose backends.txt says "CUDA off" stops before any suite,
// with exit 3. On the GPU machine itself the script is run for real (bench/README.md).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/command.h"
#include "tests/skip.h"

#ifndef EST_BUILD_ROOT
#error "EST_BUILD_ROOT must name the build directory"
#endif

using est::testing::run_program;
using est::testing::ScratchDir;
using est::testing::shell_quote;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A stage in the layout prebuild_gpu.sh unpacks to: build/ with the binaries gpu_check.sh
// starts with (links to this build's) and backends.txt saying `backends`.
void make_stage(const ScratchDir& stage, const std::string& backends) {
  namespace fs = std::filesystem;
  const fs::path build = stage.path() / "build";
  fs::create_directories(build / "bench");
  fs::create_directories(build / "tests" / "ops");
  fs::create_symlink(fs::path(EST_BUILD_ROOT) / "bench" / "gpu_bench",
                     build / "bench" / "gpu_bench");
  fs::create_symlink(fs::path(EST_BUILD_ROOT) / "tests" / "ops" / "test_ops_gpu",
                     build / "tests" / "ops" / "test_ops_gpu");
  std::ofstream(build / "backends.txt") << backends << "\n";
}

std::string check_command(const ScratchDir& stage, const ScratchDir& out) {
  return "env GPU_STAGE=" + shell_quote(stage.str()) + " OUT=" + shell_quote(out.str()) +
         " BUDGET=300 bash " + shell_quote(std::string(EST_SOURCE_ROOT) + "/scripts/gpu_check.sh");
}

}  // namespace

TEST_CASE("gpu_check.sh without a GPU stops at the first GPU suite and says why") {
  const std::string backends = read(std::string(EST_BUILD_ROOT) + "/backends.txt");
  if (backends.find("CUDA on") == std::string::npos)
    return est::testing::skip("this build has no CUDA (" + backends + ")");
  ScratchDir stage, out;
  make_stage(stage, backends.substr(0, backends.find('\n')));
  const auto result = run_program(check_command(stage, out), 120);
  INFO(result.output);
  if (result.exit_code == 0 || result.exit_code == 1)
    return est::testing::skip("a GPU is present: the script ran the suites");
  CHECK(result.exit_code == 77);
  const std::string summary = read(out / "summary.txt");
  CHECK(summary.find("CUDA on") != std::string::npos);
  CHECK(summary.find("ops_gpu rc=77") != std::string::npos);
  CHECK(summary.find("VERDICT: stop: ops_gpu found no GPU (SKIPPED: no GPU: ") !=
        std::string::npos);
  CHECK(read(out / "tests.log").find("===== ops_gpu (timeout 60s) rc=77") != std::string::npos);
  CHECK(read(out / "env.txt").find("lib libcudart.so.13 -> ") != std::string::npos);
}

TEST_CASE("gpu_check.sh stops before any suite unless backends.txt says CUDA on") {
  ScratchDir stage, out;
  make_stage(stage, "Backends: oneDNN on, CUDA off, gRPC on");
  const auto result = run_program(check_command(stage, out), 120);
  INFO(result.output);
  CHECK(result.exit_code == 3);
  const std::string summary = read(out / "summary.txt");
  CHECK(summary.find("VERDICT: stop: not a CUDA build (backends.txt must say 'CUDA on')") !=
        std::string::npos);
  CHECK(!std::filesystem::exists(out / "tests.log"));
}
