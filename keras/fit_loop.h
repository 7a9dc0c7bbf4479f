// fit's training loop pieces (internal to keras/): the per-step statistics of the loss and the
// metrics, and the hook that turns one Estimator training session into Keras's epochs and
// batches (Keras 2.x keras/engine/training.py, Model.fit; keras/metrics/base_metric.py, Mean).
//
// fit runs all its epochs in one Estimator::train: the EpochHook counts the steps, so epoch e is
// the steps_per_epoch steps after the previous one, calls on_epoch_begin / on_train_batch_* /
// on_epoch_end around them and validates at the epoch's end (Keras evaluates in memory; here
// the chief evaluates the checkpoint fit saved at that step, and the other workers get its
// values, so every worker's logs are the same). A resumed epoch (BackupAndRestore) starts at
// batch `first_batch` and ends after the remaining steps_per_epoch - first_batch batches. A
// constant learning rate (Model::set_learning_rate) is written into the optimizer's non-slot
// variable "learning_rate" after the session is created (after the restore) and before every
// step, so callbacks' changes apply from the next step and are saved with the state.
//
// Keras's loss tracker and its compiled metrics are Mean metrics: a total and a count, summed over
// every replica of every worker (SyncOnRead variables, aggregation SUM) and read as
// total / count. The model_fn records each replica's (value x rows, rows) for its batch
// (StepStatistics::record, keyed by the replica's model context, so a repeated model_fn call of
// the same step overwrites rather than adds); after the step the hook sums what the local
// replicas recorded and, under several workers, sums that over the workers
// (Strategy::sum_across_workers: every worker's hook calls it after every step, in step order).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "estimator/hooks/checkpoint_saver_hook.h"
#include "estimator/hooks/session_run_hook.h"
#include "keras/callbacks.h"

namespace est::distribute {
class Strategy;
}

namespace est::keras {

class Model;

class StepStatistics {
 public:
  explicit StepStatistics(size_t names) : names_(names) {}
  // One replica's batch: means[i] is the mean of value i over its `rows` rows.
  void record(const void* replica, const std::vector<double>& means, double rows);
  // The sums (total_0, count_0, total_1, count_1, ...) of what the replicas recorded since the
  // last take(); clears them.
  std::vector<double> take();

 private:
  size_t names_;
  std::mutex mutex_;
  std::map<const void*, std::vector<double>> by_replica_;
};

// fit's validation: after which epochs (0-based) it runs, and how (Model::evaluate on the
// checkpoint of the epoch's end). Empty: none.
struct Validation {
  std::function<bool(int epoch)> due;
  std::function<std::map<std::string, double>()> run;
};

class EpochHook : public SessionRunHook {
 public:
  // `strategy` (may be null): sums the statistics over its workers when it has several; the
  // chief alone validates and its values reach every worker through the same sum.
  // `first_batch`: the batches of `first_epoch` already run; `learning_rate`: null when the
  // optimizer has a schedule.
  EpochHook(CallbackList& callbacks, Model& model, std::vector<std::string> names,
            std::shared_ptr<StepStatistics> statistics, distribute::Strategy* strategy,
            int first_epoch, int64_t first_batch, int64_t steps_per_epoch, Validation validation,
            std::shared_ptr<double> learning_rate);
  // The model reads/sets its variables; the learning rate is written.
  void after_create_session(Session& session) override;
  // A multi-worker chief's session asks before each step: true when a callback saves the
  // session's state after this batch (BackupAndRestore every N batches), so that the step
  // gathers every worker's input position into the state, as for the Estimator's own saves.
  bool will_save_after(int64_t step) override;
  SessionRunArgs before_run(SessionRunContext& context) override;
  void after_run(SessionRunContext& context, const SessionRunValues& values) override;

  bool epoch_begun() const { return begun_; }  // on_epoch_begin was called for the current one
  int64_t batches() const { return batch_; }   // its batches so far
  // Ends the current epoch: validation when due, on_epoch_end, then the next epoch.
  void end_epoch();
  // With `defer`, a completed epoch waits (pending()) for the checkpoint of its last step: the
  // Estimator's saver calls EpochEndListener after writing it, which ends the epoch.
  void set_defer_to_save(bool defer) { defer_ = defer; }
  bool pending() const { return pending_; }

 private:
  void reset_epoch();
  // The learning rate the steps use, into the variable "learning_rate".
  void write_learning_rate(Session& session);
  // `values` summed over the workers (nothing in one process).
  void sum_across_workers(std::vector<double>& values, const char* what);

  CallbackList& callbacks_;
  Model& model_;
  std::vector<std::string> names_;
  std::shared_ptr<StepStatistics> statistics_;
  distribute::Strategy* strategy_;
  int64_t steps_;
  Validation validation_;
  std::shared_ptr<double> learning_rate_;
  int epoch_;
  bool defer_ = false;
  bool pending_ = false;
  bool begun_ = false;
  int64_t batch_ = 0;
  std::vector<double> running_;  // total_i, count_i
  Logs logs_;
};

// The chief's end of each epoch, once the Estimator's saver has written the epoch's last step
// (listeners run after the write is complete): validation evaluates that checkpoint and the
// callbacks find it in model_dir.
class EpochEndListener : public CheckpointSaverListener {
 public:
  explicit EpochEndListener(std::shared_ptr<EpochHook> hook, Model& model)
      : hook_(std::move(hook)), model_(model) {}
  bool after_save(Session& session, int64_t global_step) override;

 private:
  std::shared_ptr<EpochHook> hook_;
  Model& model_;
};

}  // namespace est::keras
