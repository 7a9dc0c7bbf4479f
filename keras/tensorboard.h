// keras.callbacks.TensorBoard, Keras 2.x semantics (keras/callbacks.py TensorBoard:
// _log_epoch_metrics, _log_weights, update_freq), on est's SummaryWriter (event files that
// TensorBoard reads).
//
// At each epoch end the logs go to <log_dir>/train as "epoch_<name>" (step: the epoch) and the
// "val_" ones, without that prefix, to <log_dir>/validation. With an integer update_freq the
// running logs of every update_freq-th batch go to <log_dir>/train as "batch_<name>", at the
// batch count since fit began (Keras's _train_counter, reset by each fit). With histogram_freq
// N > 0, every N-th epoch each weight's values go to <log_dir>/train as a histogram
// "<layer>/<weight>_0/histogram" (Keras's weight.name with ':' replaced), step: the epoch.
// Not written: the graph (write_graph is accepted and ignored: est has no graph to show),
// images, embeddings, profiles, steps_per_second, and the learning rate of a schedule.
// In a multi-worker job only the chief writes log_dir; the others write
// <log_dir>/workertemp_<task_id> and delete it at the end (Keras's write_dirpath).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "keras/callbacks.h"

namespace est {
class SummaryWriter;
}

namespace est::keras {

struct TensorBoardOptions {
  std::string log_dir = "logs";
  int histogram_freq = 0;                             // epochs; 0: no histograms
  bool write_graph = true;                            // ignored (no graph)
  BatchFrequency update_freq = std::string("epoch");  // or "batch" (1), or batches
};

class TensorBoard : public Callback {
 public:
  explicit TensorBoard(TensorBoardOptions options = {});
  ~TensorBoard() override;

  void on_train_begin(const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  void log_weights(int epoch);

  TensorBoardOptions options_;
  int64_t update_freq_ = 0;  // 0: "epoch"
  std::string log_dir_;      // where this task writes
  bool temporary_ = false;   // a worker's workertemp_* directory
  std::unique_ptr<SummaryWriter> train_;
  std::unique_ptr<SummaryWriter> validation_;
  int64_t train_step_ = 0;
};

}  // namespace est::keras
