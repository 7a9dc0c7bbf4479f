// keras.callbacks.LearningRateScheduler, Keras 2.x semantics (keras/callbacks.py
// LearningRateScheduler): at each epoch's beginning, sets the optimizer's learning rate to
// schedule(epoch, current learning rate) (Model::set_learning_rate: used from that epoch's
// first step, saved with the state). verbose > 0 prints Keras's line
// "\nEpoch N: LearningRateScheduler setting learning rate to LR." (N 1-based).
// Known difference: Keras also adds "lr" to the epoch's logs; est's logs are read-only to
// callbacks, so History has no "lr" (read model->learning_rate()).
#pragma once

#include <functional>
#include <optional>

#include "keras/callbacks.h"

namespace est::keras {

class LearningRateScheduler : public Callback {
 public:
  using Schedule = std::function<double(int epoch, double learning_rate)>;
  explicit LearningRateScheduler(Schedule schedule, int verbose = 0,
                                 std::optional<ProgbarOutput> output = {});
  void on_epoch_begin(int epoch, const Logs& logs) override;

 private:
  Schedule schedule_;
  int verbose_;
  ProgbarOutput output_;
};

}  // namespace est::keras
