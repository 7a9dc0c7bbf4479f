// SecondOrStepTimer: "every N steps or every S seconds", as the hooks of tf.train use it.
//
// Triggers for the first step it sees, then whenever `every_steps` steps or `every_secs`
// seconds have passed since it last triggered (exactly one of the two is set; with neither it
// never triggers again). Time comes from a Clock so that tests drive it with a fake one.
#pragma once

#include <cstdint>
#include <optional>

#include "estimator/run_config.h"

namespace est::hooks {

class SecondOrStepTimer {
 public:
  SecondOrStepTimer(std::optional<double> every_secs, std::optional<int64_t> every_steps,
                    Clock clock = {});

  bool should_trigger_for_step(int64_t step) const;
  // Records a trigger at `step` now; returns the seconds and steps since the previous one
  // (nullopt for the first).
  std::optional<std::pair<double, int64_t>> update_last_triggered_step(int64_t step);
  std::optional<int64_t> last_triggered_step() const { return last_step_; }
  void reset() { last_step_.reset(); }
  double now() const;

 private:
  std::optional<double> every_secs_;
  std::optional<int64_t> every_steps_;
  Clock clock_;
  std::optional<int64_t> last_step_;
  double last_time_ = 0;
};

}  // namespace est::hooks
