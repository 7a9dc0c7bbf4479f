// CheckpointSaverHook: start/cadence/end saves through a CheckpointManager, with listeners.
#include "estimator/hooks/checkpoint_saver_hook.h"

#include <fmt/format.h>

#include <filesystem>

#include "ops/error.h"
#include "ops/logging.h"

namespace est::hooks {

CheckpointSaverHook::CheckpointSaverHook(CheckpointSaverOptions options)
    : options_(std::move(options)),
      timer_(options_.save_secs, options_.save_steps, options_.clock) {
  if (options_.checkpoint_dir.empty())
    throw InvalidArgumentError("CheckpointSaverHook: `checkpoint_dir` is empty");
  for (size_t i = 0; i < options_.listeners.size(); ++i)
    if (!options_.listeners[i])
      throw InvalidArgumentError(fmt::format("CheckpointSaverHook: `listeners[{}]` is null", i));
  log::info("Create CheckpointSaverHook.");
}

void CheckpointSaverHook::begin() {
  checkpoint::CheckpointManagerOptions manager_options{
      .directory = options_.checkpoint_dir,
      .checkpoint_name = options_.checkpoint_basename,
      .keep_checkpoint_max = options_.keep_checkpoint_max,
      .keep_checkpoint_every_n_hours = options_.keep_checkpoint_every_n_hours,
      .is_chief = options_.is_chief,
      .task_id = options_.task_id,
      .async = options_.async,
      .clock = options_.clock,
      .tf_checkpoint_format = options_.tf_checkpoint_format};
  manager_ = std::make_unique<checkpoint::CheckpointManager>(std::move(manager_options));
  timer_.reset();
  for (const auto& listener : options_.listeners) listener->begin();
}

void CheckpointSaverHook::after_create_session(Session& session) {
  if (session.saves_agreed_before_steps()) {
    decided_externally_ = true;  // the first step was agreed before this hook was asked
    decided_step_ = -1;
  }
  // TF saves the initial state (variables, including restored ones) right away.
  save(session, session.global_step());
}

void CheckpointSaverHook::after_run(SessionRunContext& run_context,
                                    const SessionRunValues& run_values) {
  int64_t step = run_values.global_step;
  if (decided_externally_ ? decided_step_ != step : !timer_.should_trigger_for_step(step)) return;
  if (save(run_context.session(), step)) run_context.request_stop();
}

bool CheckpointSaverHook::will_save_after(int64_t step) {
  decided_externally_ = true;
  bool save = timer_.should_trigger_for_step(step);
  decided_step_ = save ? step : -1;
  return save;
}

void CheckpointSaverHook::end(Session& session) {
  int64_t step = session.global_step();
  if (timer_.last_triggered_step() != step) {
    save(session, step);
    step = *timer_.last_triggered_step();  // the step the checkpoint holds
  }
  manager_->wait();  // everything on disk (and background errors surfaced) before end()
  for (const auto& listener : options_.listeners) listener->end(session, step);
}

bool CheckpointSaverHook::save(Session& session, int64_t step) {
  for (const auto& listener : options_.listeners) listener->before_save(session, step);
  checkpoint::TensorBundle bundle = session.checkpoint_bundle();
  // The checkpoint is named after the global_step it holds, read with the variables (TF's
  // saver evaluates global_step with them): where the variables live elsewhere (parameter
  // servers) another worker's update may land between the step and this read.
  if (bundle.find(nn::kGlobalStepName))
    step = bundle.global_step;
  else
    bundle.global_step = step;
  log::info(
      "Saving checkpoints for {} into {}.", step,
      (std::filesystem::path(manager_->write_directory()) / options_.checkpoint_basename).string());
  timer_.update_last_triggered_step(step);
  saved_.push_back(manager_->save(bundle));
  bool stop = false;
  if (!options_.listeners.empty()) {
    manager_->wait();  // listeners (evaluation) read the checkpoint just written
    for (const auto& listener : options_.listeners)
      if (listener->after_save(session, step)) stop = true;
  }
  return stop;
}

}  // namespace est::hooks
