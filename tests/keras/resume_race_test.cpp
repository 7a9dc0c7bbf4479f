// The race that fit's meeting of the workers between its two train() calls closes
// (keras/training.cpp): a 2-worker job resumed mid-epoch by BackupAndRestore runs the rest of
// the resumed epoch as one train() and the following epochs as another, which restores
// model_dir's latest checkpoint. The chief writes the resumed epoch's end there after its last
// step; a worker that reached its next train() first would restore the backup's older step.
// The test seam EST_KERAS_TEST_DELAY_RESUMED_EPOCH_SAVE_MS holds the chief's write back for 3 s,
// so that without the meeting the other worker always restores first: then it begins epoch 3 at
// the backup's step (6) instead of the epoch's end (8) and the job's weights differ from an
// uninterrupted job's. With the meeting, every worker begins epoch 3 at step 8 and the resumed
// job ends bitwise as the uninterrupted one. The workers are threads of this process on a
// loopback cluster (tests/distribute/two_workers.h: free ports, bounded waits).
#include <doctest/doctest.h>

#if EST_HAVE_GRPC

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/state_file.h"
#include "tests/distribute/two_workers.h"
#include "tests/keras/callbacks_test_util.h"

using namespace keras_callbacks_test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kDelaySeam = "EST_KERAS_TEST_DELAY_RESUMED_EPOCH_SAVE_MS";

// Sets an environment variable until the end of the scope (before the workers start).
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnvironment() { ::unsetenv(name_); }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
};

// The global step at which each epoch began, and the batches run, as (epoch, batch).
struct EpochSteps : K::Callback {
  void on_epoch_begin(int e, const K::Logs&) override {
    epoch = e;
    begun_at.emplace_back(e, model()->training_session()->global_step());
  }
  void on_train_batch_end(int64_t b, const K::Logs&) override { batches.emplace_back(epoch, b); }
  int epoch = 0;
  std::vector<std::pair<int, int64_t>> begun_at;
  std::vector<std::pair<int, int64_t>> batches;
};

// "(1, 6) (2, 8)": readable in a failed check.
std::string text(const std::vector<std::pair<int, int64_t>>& pairs) {
  std::string out;
  for (const auto& [first, second] : pairs)
    out += (out.empty() ? "(" : " (") + std::to_string(first) + ", " + std::to_string(second) + ")";
  return out;
}

struct Worker {
  std::vector<std::vector<float>> weights;
  K::History history;
  std::vector<std::pair<int, int64_t>> begun_at;
  std::vector<std::pair<int, int64_t>> batches;
};

// A 2-worker job on the global batches of binary_problem (4 rows, 2 per worker): the same model
// and seed on each worker (named layers: the threads build them at once), `epochs` of 4 steps,
// with BackupAndRestore(backup_dir, every 3 batches) when backup_dir is not empty.
std::vector<Worker> fit_job_once(const std::string& model_dir, int epochs,
                                 const std::string& backup_dir, bool delete_backup) {
  std::vector<Worker> workers(2);
  std::mutex mutex;
  est::testing::train_on_two_workers(
      {.token = "keras-resume-race-test-012345678", .heartbeat_timeout = 5000ms, .bound = 240s},
      est::RunConfig{.model_dir = model_dir}, [&](const est::RunConfig& config, int w) {
        K::Sequential model({K::layers::InputLayer({.shape = {6}}),
                             K::layers::Dense({.units = 8, .activation = "relu", .name = "dense"}),
                             K::layers::Dense({.units = 2, .name = "dense_1"})});
        model.config() = config;
        model.config().tf_random_seed = 7;
        model.compile({.optimizer = K::optimizers::SGD({.learning_rate = 0.1}),
                       .loss = K::losses::SparseCategoricalCrossentropy(true),
                       .metrics = {"accuracy"}});
        auto steps = std::make_shared<EpochSteps>();
        K::Callbacks callbacks{steps};
        if (!backup_dir.empty())
          callbacks.push_back(
              std::make_shared<K::BackupAndRestore>(backup_dir, int64_t{3}, delete_backup));
        Worker out;
        out.history = model.fit(
            binary_problem(),
            {.epochs = epochs, .steps_per_epoch = 4, .callbacks = callbacks, .verbose = 0});
        if (w == 0)  // the chief's model_dir is the job's, complete once its fit returns
          for (const auto& tensor : model.get_weights())
            out.weights.push_back(tensor.to_vector<float>());
        out.begun_at = steps->begun_at;
        out.batches = steps->batches;
        std::lock_guard lock(mutex);
        workers[static_cast<size_t>(w)] = std::move(out);
      });
  return workers;
}

// fit_job_once, started again on new ports (up to 3 times) when a port chosen free was taken
// by another process before a worker listened on it: that fails before any training.
std::vector<Worker> fit_job(const std::string& model_dir, int epochs,
                            const std::string& backup_dir = "", bool delete_backup = true) {
  for (int attempt = 1;; ++attempt) {
    try {
      return fit_job_once(model_dir, epochs, backup_dir, delete_backup);
    } catch (const est::Error& error) {  // the failed worker's error, or another naming it
      if (attempt == 3 || std::string(error.what()).find("cannot listen on") == std::string::npos)
        throw;
    }
  }
}

}  // namespace

TEST_CASE(
    "keras fit resumed mid-epoch on 2 workers: every worker restores the chief's save of the "
    "resumed epoch's end, even when the chief writes it late") {
  ScratchDir dir;
  std::string backup_dir = dir / "backup";
  std::vector<Worker> full = fit_job(dir / "full", 3);
  // 2 epochs with the backup kept: the backups after the fit's batches 3 and 6; the last is of
  // step 6 (epoch 1, batch 1), so a fit of 3 epochs resumes at epoch 1's batch 2.
  fit_job(dir / "first", 2, backup_dir, /*delete_backup=*/false);
  std::optional<std::string> backup = est::checkpoint::latest_checkpoint(backup_dir);
  REQUIRE(backup);
  REQUIRE(backup->ends_with("-6.h5"));

  std::vector<Worker> resumed;
  {
    ScopedEnvironment delay(kDelaySeam, "3000");  // the chief writes step 8 three seconds late
    resumed = fit_job(dir / "resumed", 3, backup_dir);
  }
  for (int w = 0; w < 2; ++w) {
    const Worker& worker = resumed[static_cast<size_t>(w)];
    INFO("worker ", w);
    CHECK(text(worker.batches) == "(1, 2) (1, 3) (2, 0) (2, 1) (2, 2) (2, 3)");
    // Epoch 1 from the backup's step 6; epoch 2 from the chief's save of epoch 1's end.
    CHECK(text(worker.begun_at) == "(1, 6) (2, 8)");
  }
  // The same steps on the same data as the uninterrupted job: bitwise the same.
  REQUIRE(resumed[0].weights.size() == full[0].weights.size());
  for (size_t i = 0; i < full[0].weights.size(); ++i)
    CHECK(resumed[0].weights[i] == full[0].weights[i]);
  for (const char* key : {"loss", "accuracy"})
    CHECK(resumed[0].history[key].back() == full[0].history[key].back());
  CHECK_FALSE(std::filesystem::exists(backup_dir));  // deleted: the resumed fit ended normally
}

#endif
