// fit's training loop pieces (internal to keras/): the per-step statistics of the loss and the
// metrics, and the hook that turns one Estimator training session into Keras's epochs and
// batches (Keras 2.x keras/engine/training.py, Model.fit; keras/metrics/base_metric.py, Mean).
//
// fit runs all its epochs in one Estimator::train (several only where validation runs between
// epochs): the EpochHook counts the steps, so epoch e is the steps_per_epoch steps after the
// previous one, and calls on_epoch_begin / on_train_batch_* / on_epoch_end around them.
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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

struct EpochRange {
  int first = 0;      // the epoch the session starts with
  int last = 0;       // the session's last epoch (its on_epoch_end is left to fit)
  int64_t steps = 0;  // steps per epoch
};

class EpochHook : public SessionRunHook {
 public:
  // `strategy` (may be null): sums the statistics over its workers when it has several.
  EpochHook(CallbackList& callbacks, Model& model, std::vector<std::string> names,
            std::shared_ptr<StepStatistics> statistics, distribute::Strategy* strategy,
            EpochRange range);
  SessionRunArgs before_run(SessionRunContext& context) override;
  void after_run(SessionRunContext& context, const SessionRunValues& values) override;

  int epoch() const { return epoch_; }         // the current (unfinished) epoch
  bool epoch_begun() const { return begun_; }  // on_epoch_begin was called for it
  int64_t batches() const { return batch_; }   // its batches so far
  const Logs& logs() const { return logs_; }   // its running values

 private:
  void reset_epoch();

  CallbackList& callbacks_;
  Model& model_;
  std::vector<std::string> names_;
  std::shared_ptr<StepStatistics> statistics_;
  distribute::Strategy* strategy_;
  EpochRange range_;
  int epoch_;
  bool begun_ = false;
  int64_t batch_ = 0;
  std::vector<double> running_;  // total_i, count_i
  Logs logs_;
};

}  // namespace est::keras
