// ProfilerHook: a Chrome trace (chrome://tracing, Perfetto) of the training step's phases:
// input, model_fn (forward), backward+update (the train op), hooks. Every `save_steps` steps
// (or `save_secs` seconds) it writes the steps since the previous file to
// `output_dir/timeline-<global_step>.json`. The loop measures the phases (StepTimings); this
// hook only turns them into trace events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "estimator/hooks/session_run_hook.h"
#include "estimator/hooks/timer.h"

namespace est::hooks {

class ProfilerHook : public SessionRunHook {
 public:
  ProfilerHook(std::optional<int64_t> save_steps, std::optional<double> save_secs,
               std::string output_dir, Clock clock = {});
  void begin() override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;
  const std::vector<std::string>& written() const { return written_; }  // file paths

 private:
  struct Event {
    const char* name;
    double begin;  // seconds, steady clock
    double end;
    int64_t step;
  };
  void write(int64_t step);

  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::vector<Event> events_;
  double previous_run_end_ = -1;  // the previous step's end: its after_run hooks ran after it
  std::vector<std::string> written_;
};

}  // namespace est::hooks
