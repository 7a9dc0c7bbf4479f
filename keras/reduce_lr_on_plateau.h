// keras.callbacks.ReduceLROnPlateau, Keras 2.x semantics (keras/callbacks.py
// ReduceLROnPlateau): when `monitor` has not improved by more than min_delta for `patience`
// epochs, the learning rate becomes max(lr * factor, min_lr) (when lr > float32(min_lr)), then
// `cooldown` epochs pass before counting again. mode "min", "max" or "auto" (max when the
// monitor's name contains "acc", else min; an unknown mode warns and falls back to auto). A
// monitor missing from the logs is a warning naming the available ones. verbose > 0 prints
// "\nEpoch N: ReduceLROnPlateau reducing learning rate to LR.". factor >= 1 is an error.
// Known difference: Keras also adds "lr" to the epoch's logs (not here: logs are read-only).
#pragma once

#include <optional>
#include <string>

#include "keras/callbacks.h"

namespace est::keras {

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  int verbose = 0;
  std::string mode = "auto";
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
  std::optional<ProgbarOutput> output;  // where verbose lines go (default: stdout)
};

class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  void reset();
  bool improved(double current) const;

  ReduceLROnPlateauOptions options_;
  ProgbarOutput output_;
  bool maximize_ = false;
  double best_ = 0;
  int wait_ = 0;
  int cooldown_counter_ = 0;
};

}  // namespace est::keras
