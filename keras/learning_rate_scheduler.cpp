// keras.callbacks.LearningRateScheduler (Keras 2.x); see learning_rate_scheduler.h.
#include "keras/learning_rate_scheduler.h"

#include <fmt/format.h>

#include <cmath>

#include "keras/csv_logger.h"
#include "keras/model.h"
#include "ops/error.h"

namespace est::keras {

LearningRateScheduler::LearningRateScheduler(Schedule schedule, int verbose,
                                             std::optional<ProgbarOutput> output)
    : schedule_(std::move(schedule)), verbose_(verbose), output_(output.value_or(stdout_output())) {
  if (!schedule_)
    throw InvalidArgumentError(
        "LearningRateScheduler: the schedule is empty; give a function "
        "(epoch, learning_rate) -> new learning rate");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  // Keras reads the float32 variable: the schedule sees the rate as float32 rounds it.
  double current = static_cast<float>(model()->learning_rate());
  double rate = schedule_(epoch, current);
  if (!std::isfinite(rate))
    throw InvalidArgumentError(fmt::format(
        "LearningRateScheduler: the schedule returned {} for epoch {}; it should return a "
        "finite float",
        rate, epoch));
  model()->set_learning_rate(rate);
  if (verbose_ > 0)
    output_.write(fmt::format("\nEpoch {}: LearningRateScheduler setting learning rate to {}.\n",
                              epoch + 1, python_float(rate)));
}

}  // namespace est::keras
