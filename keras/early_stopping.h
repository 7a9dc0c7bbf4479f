// keras.callbacks.EarlyStopping (Keras 2.12+ keras/callbacks.py): stops fit when the monitored
// value stops improving.
//
// mode "auto" maximises a monitor ending in "acc", "accuracy" or "auc" and minimises anything
// else; an improvement is `current - min_delta` beyond the best (min_delta's sign follows the
// mode). At each epoch end from start_from_epoch on: wait += 1; an improvement records the
// best (and, with restore_best_weights, the weights) and resets wait when it also beats the
// baseline; otherwise, once wait >= patience (and not in the first epoch), training stops and,
// with restore_best_weights, the best epoch's weights are set back (the first monitored
// epoch's when none improved). A monitor missing from the logs is a warning naming the ones
// there, and the epoch is skipped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "keras/callbacks.h"
#include "ops/tensor.h"

namespace est::keras {

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  int verbose = 0;
  std::string mode = "auto";  // "auto", "min", "max"
  std::optional<double> baseline;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};

class EarlyStopping : public Callback {
 public:
  // InvalidArgumentError for an unknown mode.
  explicit EarlyStopping(EarlyStoppingOptions options = {});

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }
  double best() const { return best_; }
  int wait() const { return wait_; }

 private:
  bool improves(double current, double reference) const;

  EarlyStoppingOptions options_;
  bool maximize_ = false;
  double min_delta_ = 0;  // signed: positive when maximizing
  int wait_ = 0;
  int stopped_epoch_ = 0;
  int best_epoch_ = 0;
  double best_ = 0;
  std::optional<std::vector<ops::Tensor>> best_weights_;
};

}  // namespace est::keras
