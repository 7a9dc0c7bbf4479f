// Crash consistency: a process saving checkpoints in a loop is SIGKILLed at random moments,
// many times; after every kill the latest checkpoint must load, pass its checksums and hold
// the values of its step. And a normal exit with a background save in flight finishes it.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <random>
#include <thread>

#include "checkpoint/file_util.h"
#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

#ifndef EST_TEST_KILL_CHILD
#error "EST_TEST_KILL_CHILD must name the checkpoint_kill_child executable"
#endif
constexpr const char* kChild = EST_TEST_KILL_CHILD;

pid_t spawn(const std::string& mode, const std::string& dir) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(kChild, kChild, mode.c_str(), dir.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Checks that `path` holds the values checkpoint_kill_child writes for its step.
void check_child_checkpoint(const std::string& path) {
  TensorBundle bundle = load(path);  // throws DataLossError on any checksum failure
  REQUIRE(bundle.tensors.size() == 6);
  for (const TensorEntry& entry : bundle.tensors) {
    int index = entry.name[6] - '0';  // "layer_<i>/kernel"
    double expected = static_cast<double>(bundle.global_step * 1000 + index);
    std::vector<double> values = entry.value.to_vector<double>();
    CHECK_MESSAGE(
        std::all_of(values.begin(), values.end(), [&](double v) { return v == expected; }), path,
        " ", entry.name);
  }
  REQUIRE(bundle.find_blob("iterator") != nullptr);
  CHECK(bundle.find_blob("iterator")->bytes == fmt::format("step={}", bundle.global_step));
}

// Polls the state file until its latest checkpoint is past `step`; false after `limit`. A
// checkpoint that retention deletes while it is read counts as not yet.
bool wait_for_step_after(const std::string& dir, int64_t step, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      std::optional<std::string> latest = latest_checkpoint(dir);
      if (latest && read_info(*latest).global_step > step) return true;
    } catch (const Error&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace

TEST_CASE("SIGKILL at random points during saves never damages the latest checkpoint") {
  REQUIRE_MESSAGE(fs::exists(kChild), "build the checkpoint_kill_child target first: ", kChild);
  TempDir dir;
  std::mt19937 random(20240601);
  std::uniform_int_distribution<int> delay_ms(5, 250);
  const int kills = 30;
  int64_t previous_step = 0;
  int temporaries_seen = 0;
  for (int round = 0; round < kills; ++round) {
    CAPTURE(round);
    pid_t pid = spawn("loop", dir.str());
    REQUIRE(pid > 0);
    // Kill only after the child has completed a checkpoint past the previous round's (however
    // loaded the machine), then at a random moment of a later save.
    REQUIRE_MESSAGE(wait_for_step_after(dir.str(), previous_step, std::chrono::seconds(60)),
                    "the child completed no checkpoint past step ", previous_step, " in 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(random)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE_MESSAGE(WIFSIGNALED(status), "the child exited by itself with status ",
                    WEXITSTATUS(status),
                    " (3: restored values did not match their step, 4: an error)");

    for (const std::string& name : list_dir(dir.path()))
      if (is_temporary_name(name)) ++temporaries_seen;
    std::optional<std::string> latest = latest_checkpoint(dir.str());
    REQUIRE_MESSAGE(latest.has_value(), "no readable latest checkpoint after round ", round);
    check_child_checkpoint(*latest);
    int64_t step = read_info(*latest).global_step;
    CHECK(step >= previous_step);  // progress is never lost
    previous_step = step;
    // Everything the state file lists is intact too.
    for (const std::string& path : checkpoint_candidates(dir.str())) check_child_checkpoint(path);
  }
  MESSAGE(fmt::format("{} kills; reached step {}; {} kills left a half-written temporary file",
                      kills, previous_step, temporaries_seen));
  CHECK(previous_step >= kills);  // each round completed a checkpoint before its kill
}

TEST_CASE("a normal exit finishes the background save in progress") {
  REQUIRE_MESSAGE(fs::exists(kChild), "build the checkpoint_kill_child target first: ", kChild);
  TempDir dir;
  pid_t pid = spawn("exit", dir.str());
  REQUIRE(pid > 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::optional<std::string> latest = latest_checkpoint(dir.str());
  REQUIRE(latest.has_value());
  CHECK(*latest == dir / "model.ckpt-77.h5");
  Tensor big = load_variable(*latest, "big");
  CHECK(big.numel() == (16 << 20));
  CHECK(big.at({(16 << 20) - 1}) == 77.0);
}
