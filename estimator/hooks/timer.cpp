// SecondOrStepTimer: the trigger rule shared by the periodic hooks.
#include "estimator/hooks/timer.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est::hooks {

SecondOrStepTimer::SecondOrStepTimer(std::optional<double> every_secs,
                                     std::optional<int64_t> every_steps, Clock clock)
    : every_secs_(every_secs), every_steps_(every_steps), clock_(std::move(clock)) {
  if (every_secs_ && every_steps_)
    throw InvalidArgumentError(
        fmt::format("timer: both every_secs ({}) and every_steps ({}) are set; set exactly one",
                    *every_secs_, *every_steps_));
  if (every_secs_ && *every_secs_ <= 0)
    throw InvalidArgumentError(
        fmt::format("timer: every_secs must be positive, got {}", *every_secs_));
  if (every_steps_ && *every_steps_ <= 0)
    throw InvalidArgumentError(
        fmt::format("timer: every_steps must be positive, got {}", *every_steps_));
}

double SecondOrStepTimer::now() const { return clock_ ? clock_() : system_clock_seconds(); }

bool SecondOrStepTimer::should_trigger_for_step(int64_t step) const {
  if (!last_step_) return true;
  if (step == *last_step_) return false;
  if (every_secs_) return now() - last_time_ >= *every_secs_;
  if (every_steps_) return step >= *last_step_ + *every_steps_;
  return false;
}

std::optional<std::pair<double, int64_t>> SecondOrStepTimer::update_last_triggered_step(
    int64_t step) {
  double current = now();
  std::optional<std::pair<double, int64_t>> elapsed;
  if (last_step_) elapsed = std::make_pair(current - last_time_, step - *last_step_);
  last_step_ = step;
  last_time_ = current;
  return elapsed;
}

}  // namespace est::hooks
