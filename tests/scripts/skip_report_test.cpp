// Skips are counted and explained: a suite whose case calls est::testing::skip() reports it in
// doctest's closing line as skipped, not passed, with its reason (tests/main.cpp's reporter),
// and scripts/summarize_tests.py turns meson's log into "N passed, N failed, M skipped" after a
// list of every skip and its reason. The suite that skips is skip_fixture.cpp, run here.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/command.h"

using namespace est::testing;

namespace {

#if !defined(EST_SKIP_FIXTURE) || !defined(EST_SOURCE_ROOT)
#error "EST_SKIP_FIXTURE and EST_SOURCE_ROOT must be defined"
#endif

// Runs of spaces as one, so that doctest's column padding does not matter.
std::string squeeze(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::string kSkipLine =
    "SKIPPED test case \"fixture: a case that skips at run time\": the fixture's reason";
const std::string kDecoratorLine =
    "SKIPPED test case \"fixture: a case the decorator skips\": doctest::skip() decorator";

}  // namespace

TEST_CASE("a run-time skip counts as skipped, not passed, and prints its reason") {
  ProgramResult run = run_program(EST_SKIP_FIXTURE);
  CHECK_MESSAGE(run.exit_code == 0, run.output);
  CHECK_MESSAGE(contains(squeeze(run.output), "test cases: 1 | 1 passed | 0 failed | 2 skipped"),
                run.output);
  CHECK(contains(run.output, kSkipLine));
  CHECK(contains(run.output, kDecoratorLine));
}

TEST_CASE("a case that fails before it skips counts as failed") {
  ProgramResult run = run_program("env EST_SKIP_FIXTURE_FAIL=1 " + std::string(EST_SKIP_FIXTURE));
  CHECK(run.exit_code == 1);
  CHECK_MESSAGE(contains(squeeze(run.output), "test cases: 2 | 1 passed | 1 failed | 1 skipped"),
                run.output);
  CHECK_FALSE(contains(run.output, kSkipLine));
  CHECK(contains(run.output, "failing on request"));
}

TEST_CASE("an explicit --reporters=console is doctest's own, which counts the skip as passed") {
  ProgramResult run = run_program(std::string(EST_SKIP_FIXTURE) + " --reporters=console");
  CHECK(contains(squeeze(run.output), "test cases: 2 | 2 passed | 0 failed | 1 skipped"));
}

TEST_CASE("summarize_tests.py sums meson's log and lists every skip with its reason") {
  ScratchDir dir;
  const std::string fixture_output = run_program(EST_SKIP_FIXTURE).output;
  const std::string failing_output =
      run_program("env EST_SKIP_FIXTURE_FAIL=1 " + std::string(EST_SKIP_FIXTURE)).output;
  // One line per meson test, as meson-logs/testlog.json holds them.
  const std::vector<nlohmann::json> entries = {
      {{"name", "est:fixture / fixture"}, {"result", "OK"}, {"stdout", fixture_output}},
      {{"name", "est:gpu / gpu"}, {"result", "SKIP"}, {"stdout", "SKIPPED: no GPU here\n"}},
      {{"name", "est:silent / silent"}, {"result", "SKIP"}, {"stdout", ""}},
      {{"name", "est:crash / crash"}, {"result", "FAIL"}, {"stdout", "Segmentation fault\n"}},
      {{"name", "est:script / script"}, {"result", "OK"}, {"stdout", "fine\n"}},
      {{"name", "est:failing / failing"}, {"result", "FAIL"}, {"stdout", failing_output}},
  };
  {
    std::ofstream log(dir / "testlog.json");
    for (const nlohmann::json& entry : entries) log << entry.dump() << '\n';
  }
  ProgramResult summary =
      run_program("/usr/bin/python3 " +
                  shell_quote(std::string(EST_SOURCE_ROOT) + "/scripts/summarize_tests.py") + " " +
                  shell_quote(dir / "testlog.json"));
  REQUIRE_MESSAGE(summary.exit_code == 0, summary.output);
  std::vector<std::string> lines = lines_of(summary.output);
  REQUIRE(!lines.empty());
  // Passed: the fixture's passing case (twice) and the script. Failed: the crash and the
  // failing fixture's case. Skipped: the fixture's two (once only in the failing run), the
  // whole gpu and silent programs.
  CHECK(lines.back() == "3 passed, 2 failed, 5 skipped");
  CHECK(lines.front() == "Skipped:");
  CHECK(contains(summary.output,
                 "  fixture: \"fixture: a case that skips at run time\": "
                 "the fixture's reason\n"));
  CHECK(contains(summary.output,
                 "  fixture: \"fixture: a case the decorator skips\": "
                 "doctest::skip() decorator\n"));
  CHECK(contains(summary.output, "  failing: \"fixture: a case the decorator skips\""));
  CHECK_FALSE(contains(summary.output, "  failing: \"fixture: a case that skips at run time\""));
  CHECK(contains(summary.output, "  gpu: no GPU here\n"));
  CHECK(contains(summary.output, "  silent: exited 77 (skipped) without printing a reason\n"));
  CHECK(lines.size() == 7);  // "Skipped:", five reasons, the counts
}
