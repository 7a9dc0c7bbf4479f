// keras BackupAndRestore: a fit interrupted (a callback throwing, as a crash) and run again
// with the same callback ends with the weights and History values of an uninterrupted fit,
// backing up per epoch or every N batches (resuming mid-epoch); the backup is deleted at the
// end, kept after an interruption.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "checkpoint/state_file.h"
#include "ops/error.h"
#include "tests/keras/callbacks_test_util.h"

using namespace keras_callbacks_test;

namespace {

// Throws before the `at`-th batch of the fit (0-based count over epochs): the process "dies".
struct Crash : K::Callback {
  explicit Crash(int at) : at(at) {}
  void on_train_batch_begin(int64_t, const K::Logs&) override {
    if (seen++ == at) throw std::runtime_error("crash");
  }
  int at;
  int seen = 0;
};

// After the `at`-th batch of the fit, once `backup_dir`'s latest backup is of global step
// `backed_up` (backups are written in the background): writes `marker` and waits (at most a
// minute) to be killed, as a worker dying mid-epoch.
struct Hang : K::Callback {
  Hang(int at, std::string backup_dir, int backed_up, std::string marker)
      : at(at),
        backup_dir(std::move(backup_dir)),
        backed_up(backed_up),
        marker(std::move(marker)) {}
  void on_train_batch_end(int64_t, const K::Logs&) override {
    if (++seen != at) return;
    std::string expected = fmt::format("{}/backup.ckpt-{}.h5", backup_dir, backed_up);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (est::checkpoint::latest_checkpoint(backup_dir) != expected &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ofstream(marker) << "batch " << seen << "\n";
    std::this_thread::sleep_for(std::chrono::seconds(60));
    throw std::runtime_error("Hang: not killed within a minute");
  }
  int at;
  std::string backup_dir;
  int backed_up;
  std::string marker;
  int seen = 0;
};

// The batches a fit runs, as (epoch, batch).
struct Batches : K::Callback {
  void on_epoch_begin(int e, const K::Logs&) override { epoch = e; }
  void on_train_batch_end(int64_t b, const K::Logs&) override { seen.emplace_back(epoch, b); }
  int epoch = 0;
  std::vector<std::pair<int, int64_t>> seen;
};

struct Outcome {
  K::History history;
  std::vector<float> predictions;
  std::vector<std::pair<int, int64_t>> batches;
};

// A fresh model (a new process: a new model_dir) fit for 3 epochs of 4 steps; a learning
// rate scheduler sets the rate 0.05 in epoch 0 and keeps the current one afterwards, so a
// resumed fit trains as the first one only if the backup brought the rate back (compiled:
// 0.1).
// `stopper` (when given) ends it early.
Outcome run(const std::string& model_dir, std::shared_ptr<K::BackupAndRestore> backup,
            std::shared_ptr<K::Callback> stopper = nullptr) {
  auto model = compiled_model(model_dir);
  auto batches = std::make_shared<Batches>();
  K::Callbacks callbacks{std::make_shared<K::LearningRateScheduler>(
      [](int epoch, double rate) { return epoch == 0 ? 0.05 : rate; })};
  if (backup) callbacks.push_back(backup);
  if (stopper) callbacks.push_back(stopper);
  callbacks.push_back(batches);
  auto history = model->fit(
      binary_problem(), {.epochs = 3, .steps_per_epoch = 4, .callbacks = callbacks, .verbose = 0});
  return {history, predictions(*model), batches->seen};
}

// The last `count` epochs' values of both.
void check_same_last(const K::History& resumed, const K::History& full, size_t count) {
  for (const char* key : {"loss", "accuracy"}) {
    const auto& a = resumed[key];
    const auto& b = full[key];
    REQUIRE(a.size() >= count);
    REQUIRE(b.size() >= count);
    for (size_t i = 1; i <= count; ++i)
      CHECK(a[a.size() - i] == b[b.size() - i]);  // bitwise: the same steps from the same state
  }
}

void check_same_weights(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  CHECK(a == b);  // bitwise
}

}  // namespace

TEST_CASE("keras BackupAndRestore per epoch resumes an interrupted fit at the next epoch") {
  ScratchDir dir;
  std::string backup_dir = dir / "backup";
  Outcome full = run(dir / "full", nullptr);
  // Dies in epoch 1 (its 3rd batch): the backup of epoch 0 stays.
  CHECK_THROWS_AS(run(dir / "first", std::make_shared<K::BackupAndRestore>(backup_dir),
                      std::make_shared<Crash>(6)),
                  std::runtime_error);
  CHECK(std::filesystem::exists(backup_dir));
  Outcome resumed = run(dir / "second", std::make_shared<K::BackupAndRestore>(backup_dir));
  CHECK(resumed.history.epoch == std::vector<int>{1, 2});
  CHECK(resumed.batches.front() == std::pair<int, int64_t>{1, 0});
  check_same_last(resumed.history, full.history, 2);
  check_same_weights(resumed.predictions, full.predictions);
  CHECK_FALSE(std::filesystem::exists(backup_dir));  // deleted: fit ended normally
}

TEST_CASE("keras BackupAndRestore every N batches resumes mid-epoch with the remaining steps") {
  ScratchDir dir;
  std::string backup_dir = dir / "backup";
  Outcome full = run(dir / "full", nullptr);
  // save_freq 3: backups after batches 3 and 6 of the fit (epoch 1, batch 1); dies before the
  // 8th batch.
  CHECK_THROWS_AS(run(dir / "first", std::make_shared<K::BackupAndRestore>(backup_dir, int64_t{3}),
                      std::make_shared<Crash>(7)),
                  std::runtime_error);
  Outcome resumed =
      run(dir / "second", std::make_shared<K::BackupAndRestore>(backup_dir, int64_t{3}));
  // Epoch 1 runs its batches 2 and 3 only, then epoch 2 in full.
  CHECK(resumed.batches ==
        std::vector<std::pair<int, int64_t>>{{1, 2}, {1, 3}, {2, 0}, {2, 1}, {2, 2}, {2, 3}});
  CHECK(resumed.history.epoch == std::vector<int>{1, 2});
  check_same_last(resumed.history, full.history, 1);  // epoch 1's means cover 2 batches
  check_same_weights(resumed.predictions, full.predictions);
  CHECK_FALSE(std::filesystem::exists(backup_dir));
}

TEST_CASE("keras BackupAndRestore keeps the backup with delete_checkpoint false; bad options") {
  ScratchDir dir;
  std::string backup_dir = dir / "backup";
  run(dir / "m", std::make_shared<K::BackupAndRestore>(backup_dir, std::string("epoch"), false));
  CHECK(std::filesystem::exists(backup_dir));
  // A later fit with it resumes after the last epoch: nothing left to run.
  Outcome again = run(dir / "m2", std::make_shared<K::BackupAndRestore>(backup_dir));
  CHECK(again.history.epoch.empty());
  CHECK_THROWS_AS(K::BackupAndRestore(""), est::InvalidArgumentError);
  CHECK_THROWS_AS(K::BackupAndRestore(backup_dir, std::string("batch")), est::InvalidArgumentError);
  CHECK_THROWS_AS(K::BackupAndRestore(backup_dir, int64_t{0}), est::InvalidArgumentError);
}

namespace {

constexpr const char* kChildDir = "EST_KERAS_BACKUP_CHILD_DIR";

// Kills the child whatever happens.
struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

}  // namespace

// The child process of the next test: fits with a backup every 3 batches, and hangs after its
// 7th batch (epoch 1, batch 2) until killed. Runs only when the parent test starts it.
TEST_CASE("keras BackupAndRestore child process (run by the kill test)" *
          doctest::skip(std::getenv(kChildDir) == nullptr)) {
  std::string dir = std::getenv(kChildDir);
  CHECK_THROWS_AS(
      run(dir + "/first", std::make_shared<K::BackupAndRestore>(dir + "/backup", int64_t{3}),
          std::make_shared<Hang>(7, dir + "/backup", 6, dir + "/marker")),
      std::runtime_error);
}

TEST_CASE("keras BackupAndRestore resumes a fit whose process was killed mid-epoch") {
  ScratchDir dir;
  std::string backup_dir = dir / "backup";
  Outcome full = run(dir / "full", nullptr);
  std::string filter = "-tc=keras BackupAndRestore child process*";
  std::string env = std::string(kChildDir) + "=" + dir.path.string();
  std::vector<char*> argv{const_cast<char*>("test_keras"), filter.data(), nullptr};
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(env.data());
  envp.push_back(nullptr);
  Child child;
  REQUIRE(posix_spawn(&child.pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) ==
          0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(dir / "marker") && std::chrono::steady_clock::now() < deadline &&
         waitpid(child.pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(std::filesystem::exists(dir / "marker"));
  REQUIRE(kill(child.pid, SIGKILL) == 0);
  REQUIRE(waitpid(child.pid, nullptr, 0) == child.pid);
  child.pid = -1;
  REQUIRE(std::filesystem::exists(backup_dir));
  Outcome resumed =
      run(dir / "second", std::make_shared<K::BackupAndRestore>(backup_dir, int64_t{3}));
  // The backup after batch 6 (epoch 1, batch 1): epoch 1 from its batch 2.
  CHECK(resumed.batches.front() == std::pair<int, int64_t>{1, 2});
  check_same_last(resumed.history, full.history, 1);
  check_same_weights(resumed.predictions, full.predictions);
  CHECK_FALSE(std::filesystem::exists(backup_dir));
}
