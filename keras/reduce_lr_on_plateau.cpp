// keras.callbacks.ReduceLROnPlateau (Keras 2.x); see reduce_lr_on_plateau.h.
#include "keras/reduce_lr_on_plateau.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "keras/csv_logger.h"
#include "keras/model.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options)
    : options_(std::move(options)), output_(options_.output.value_or(stdout_output())) {
  if (options_.factor >= 1.0)
    throw InvalidArgumentError(
        fmt::format("ReduceLROnPlateau does not support a factor >= 1.0. Got {}", options_.factor));
  reset();
}

void ReduceLROnPlateau::reset() {
  if (options_.mode != "auto" && options_.mode != "min" && options_.mode != "max") {
    log::warning("Learning rate reduction mode {} is unknown, fallback to auto mode.",
                 options_.mode);
    options_.mode = "auto";
  }
  maximize_ = options_.mode == "max" ||
              (options_.mode == "auto" && options_.monitor.find("acc") != std::string::npos);
  best_ = maximize_ ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  cooldown_counter_ = 0;
  wait_ = 0;
}

bool ReduceLROnPlateau::improved(double current) const {
  return maximize_ ? current > best_ + options_.min_delta : current < best_ - options_.min_delta;
}

void ReduceLROnPlateau::on_train_begin(const Logs&) { reset(); }

void ReduceLROnPlateau::on_epoch_end(int epoch, const Logs& logs) {
  const std::optional<double> value =
      monitored(logs, options_.monitor, "Learning rate reduction is");
  if (!value) return;
  double current = *value;
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  if (improved(current)) {
    best_ = current;
    wait_ = 0;
    return;
  }
  if (cooldown_counter_ > 0 || ++wait_ < options_.patience) return;
  double old_lr = static_cast<float>(model()->learning_rate());  // Keras's float32 variable
  if (old_lr > static_cast<float>(options_.min_lr)) {
    double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
    model()->set_learning_rate(new_lr);
    if (options_.verbose > 0)
      output_.write(fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.\n",
                                epoch + 1, python_float(new_lr)));
    cooldown_counter_ = options_.cooldown;
    wait_ = 0;
  }
}

}  // namespace est::keras
