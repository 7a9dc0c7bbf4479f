// keras.callbacks.TerminateOnNaN, Keras 2.x semantics (keras/callbacks.py TerminateOnNaN): after
// a batch whose "loss" log is NaN or infinite, prints "Batch N: Invalid loss, terminating
// training" (io_utils.print_msg: the message and a line break) and sets
// model->stop_training, which ends fit after that batch.
#pragma once

#include <optional>

#include "keras/callbacks.h"

namespace est::keras {

class TerminateOnNaN : public Callback {
 public:
  // Where the message goes (default: stdout).
  explicit TerminateOnNaN(std::optional<ProgbarOutput> output = {});
  void on_train_batch_end(int64_t batch, const Logs& logs) override;

 private:
  ProgbarOutput output_;
};

}  // namespace est::keras
