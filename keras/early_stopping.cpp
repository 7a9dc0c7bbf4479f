// EarlyStopping (Keras 2.12+ keras/callbacks.py; see early_stopping.h).
#include "keras/early_stopping.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "keras/model.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
  const std::string& mode = options_.mode;
  if (mode != "auto" && mode != "min" && mode != "max")
    throw InvalidArgumentError(
        fmt::format("EarlyStopping mode {} is unknown; use \"auto\", \"min\" or \"max\"", mode));
  auto ends_with = [&](const char* suffix) { return options_.monitor.ends_with(suffix); };
  maximize_ = mode == "max" ||
              (mode == "auto" && (ends_with("acc") || ends_with("accuracy") || ends_with("auc")));
  min_delta_ = maximize_ ? std::abs(options_.min_delta) : -std::abs(options_.min_delta);
}

bool EarlyStopping::improves(double current, double reference) const {
  return maximize_ ? current - min_delta_ > reference : current - min_delta_ < reference;
}

void EarlyStopping::on_train_begin(const Logs&) {
  wait_ = 0;
  stopped_epoch_ = 0;
  best_ = maximize_ ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  best_weights_.reset();
  best_epoch_ = 0;
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  const std::optional<double> value = monitored(logs, options_.monitor, "Early stopping");
  if (!value) return;
  if (epoch < options_.start_from_epoch) return;
  const double current = *value;
  if (options_.restore_best_weights && !best_weights_) best_weights_ = model()->get_weights();
  ++wait_;
  if (improves(current, best_)) {
    best_ = current;
    best_epoch_ = epoch;
    if (options_.restore_best_weights) best_weights_ = model()->get_weights();
    // Only restart wait if we beat both the baseline and our previous best.
    if (!options_.baseline || improves(current, *options_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= options_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model()->stop_training = true;
    if (options_.restore_best_weights && best_weights_) {
      if (options_.verbose > 0)
        fmt::print("Restoring model weights from the end of the best epoch: {}.\n",
                   best_epoch_ + 1);
      model()->set_weights(*best_weights_);
    }
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  if (stopped_epoch_ > 0 && options_.verbose > 0)
    fmt::print("Epoch {}: early stopping\n", stopped_epoch_ + 1);
}

}  // namespace est::keras
