// StopAtStepHook, StepCounterHook, LoggingTensorHook, NanTensorHook, SummarySaverHook,
// FinalOpsHook.
#include "estimator/hooks/basic_hooks.h"

#include <fmt/format.h>

#include <cmath>

#include "estimator/estimator_spec.h"
#include "estimator/summary_cache.h"
#include "estimator/summary_ops.h"
#include "ops/logging.h"

namespace est::hooks {
namespace {

// A fetched value as a log line shows it: scalars as numbers, others with Tensor::str().
std::string format_value(const Tensor& value) {
  if (!value.defined()) return "<undefined>";
  if (value.numel() != 1) return value.str();
  if (ops::is_floating(value.dtype())) return fmt::format("{}", static_cast<float>(value.item()));
  return fmt::format("{}", static_cast<int64_t>(value.item()));
}

const Tensor& result(const SessionRunValues& values, const std::string& name, const char* hook) {
  auto it = values.results.find(name);
  if (it == values.results.end())
    throw InternalError(fmt::format("{}: fetch '{}' missing from the run's results", hook, name));
  return it->second;
}

}  // namespace

// --- StopAtStepHook ---

StopAtStepHook::StopAtStepHook(std::optional<int64_t> num_steps, std::optional<int64_t> last_step)
    : num_steps_(num_steps), last_step_(last_step) {
  if (num_steps_.has_value() == last_step_.has_value())
    throw InvalidArgumentError("StopAtStepHook: set exactly one of num_steps and last_step");
  if (num_steps_ && *num_steps_ <= 0)
    throw InvalidArgumentError(
        fmt::format("StopAtStepHook: num_steps must be positive, got {}", *num_steps_));
  if (last_step_ && *last_step_ <= 0)
    throw InvalidArgumentError(
        fmt::format("StopAtStepHook: last_step must be positive, got {}", *last_step_));
}

void StopAtStepHook::after_create_session(Session& session) {
  if (num_steps_) last_step_ = session.global_step() + *num_steps_;
}

void StopAtStepHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  if (last_step_ && run_values.global_step >= *last_step_) run_context.request_stop();
}

// --- StepCounterHook ---

StepCounterHook::StepCounterHook(std::optional<int64_t> every_n_steps,
                                 std::optional<double> every_n_secs, std::string output_dir,
                                 Clock clock)
    : timer_(every_n_secs, every_n_secs ? std::nullopt : every_n_steps, std::move(clock)),
      output_dir_(std::move(output_dir)) {}

void StepCounterHook::begin() { timer_.reset(); }

void StepCounterHook::after_run(SessionRunContext& /*run_context*/,
                                const SessionRunValues& run_values) {
  int64_t step = run_values.global_step;
  if (!timer_.should_trigger_for_step(step)) return;
  auto elapsed = timer_.update_last_triggered_step(step);
  if (!elapsed || elapsed->first <= 0) return;
  double rate = static_cast<double>(elapsed->second) / elapsed->first;
  rates_.push_back(rate);
  log::info("global_step/sec: {}", static_cast<float>(rate));
  if (!output_dir_.empty())
    summary_writer_for(output_dir_)->add_scalar("global_step/sec", rate, step);
}

// --- LoggingTensorHook ---

LoggingTensorHook::LoggingTensorHook(Entries tensors, std::optional<int64_t> every_n_iter,
                                     std::optional<double> every_n_secs, bool at_end, Clock clock)
    : tensors_(std::move(tensors)),
      timer_(every_n_secs, every_n_secs ? std::nullopt : every_n_iter, std::move(clock)),
      at_end_(at_end) {
  if (tensors_.empty()) throw InvalidArgumentError("LoggingTensorHook: no tensors to log");
  if (!every_n_iter && !every_n_secs && !at_end)
    throw InvalidArgumentError(
        "LoggingTensorHook: set every_n_iter or every_n_secs, or at_end = true");
}

LoggingTensorHook::LoggingTensorHook(const std::vector<std::string>& names, int64_t every_n_iter)
    : LoggingTensorHook(
          [&] {
            Entries entries;
            for (const std::string& name : names) entries.emplace_back(name, name);
            return entries;
          }(),
          every_n_iter) {}

void LoggingTensorHook::begin() {
  timer_.reset();
  iteration_ = 0;
}

SessionRunArgs LoggingTensorHook::before_run(SessionRunContext& /*run_context*/) {
  log_this_step_ = timer_.should_trigger_for_step(iteration_);
  SessionRunArgs args;
  if (log_this_step_ || at_end_)
    for (const auto& [tag, fetch] : tensors_) args.fetches.push_back(fetch);
  return args;
}

void LoggingTensorHook::after_run(SessionRunContext& /*run_context*/,
                                  const SessionRunValues& run_values) {
  if (at_end_)
    for (const auto& [tag, fetch] : tensors_)
      last_values_[tag] = result(run_values, fetch, "LoggingTensorHook");
  if (log_this_step_) {
    std::string line;
    for (const auto& [tag, fetch] : tensors_)
      line += fmt::format("{}{} = {}", line.empty() ? "" : ", ", tag,
                          format_value(result(run_values, fetch, "LoggingTensorHook")));
    auto elapsed = timer_.update_last_triggered_step(iteration_);
    if (elapsed)
      log::info("{} ({:.3f} sec)", line, elapsed->first);
    else
      log::info("{}", line);
  }
  ++iteration_;
}

void LoggingTensorHook::end(Session& /*session*/) {
  if (!at_end_ || last_values_.empty()) return;
  std::string line;
  for (const auto& [tag, fetch] : tensors_)
    line +=
        fmt::format("{}{} = {}", line.empty() ? "" : ", ", tag, format_value(last_values_[tag]));
  log::info("{}", line);
}

// --- NanTensorHook ---

NanTensorHook::NanTensorHook(std::string loss_name, bool fail_on_nan_loss)
    : loss_name_(std::move(loss_name)), fail_on_nan_loss_(fail_on_nan_loss) {}

SessionRunArgs NanTensorHook::before_run(SessionRunContext& /*run_context*/) {
  return {.fetches = {loss_name_}};
}

void NanTensorHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  double loss = result(run_values, loss_name_, "NanTensorHook").item();
  if (std::isfinite(loss)) return;
  std::string what = fmt::format(
      "Model diverged with loss = {} at global step {} (model_dir {}): lower the learning rate, "
      "check the input for NaN or infinite values, or clip gradients",
      loss, run_context.global_step(), run_context.session().model_dir());
  if (fail_on_nan_loss_) throw NanLossDuringTrainingError(what);
  log::error("{}. Stopping training (fail_on_nan_loss is false).", what);
  run_context.request_stop();
}

// --- SummarySaverHook ---

SummarySaverHook::SummarySaverHook(std::optional<int64_t> save_steps,
                                   std::optional<double> save_secs, std::string output_dir,
                                   std::vector<std::string> tensors, Clock clock)
    : timer_(save_secs, save_steps, std::move(clock)),
      output_dir_(std::move(output_dir)),
      tensors_(std::move(tensors)) {
  if (!save_steps && !save_secs)
    throw InvalidArgumentError("SummarySaverHook: set save_steps or save_secs");
  if (output_dir_.empty()) throw InvalidArgumentError("SummarySaverHook: `output_dir` is empty");
}

void SummarySaverHook::begin() { timer_.reset(); }

SessionRunArgs SummarySaverHook::before_run(SessionRunContext& run_context) {
  save_this_step_ = timer_.should_trigger_for_step(run_context.global_step() + 1);
  SessionRunArgs args;
  if (save_this_step_) args.fetches = tensors_;
  return args;
}

void SummarySaverHook::after_run(SessionRunContext& run_context,
                                 const SessionRunValues& run_values) {
  if (!save_this_step_) return;
  int64_t step = run_values.global_step;
  timer_.update_last_triggered_step(step);
  auto writer = summary_writer_for(output_dir_);
  for (const std::string& name : tensors_) {
    const Tensor& value = result(run_values, name, "SummarySaverHook");
    if (value.numel() != 1)
      throw InvalidArgumentError(fmt::format(
          "SummarySaverHook: '{}' has shape {}; only scalars can be written as summaries", name,
          ops::shape_str(value.shape())));
    writer->add_scalar(name, value.item(), step);
  }
  // The model_fn's own summaries of this step (TF's Scaffold.summary_op, merge_all).
  for (const SummaryValue& value : run_context.spec().summaries)
    summary::write(*writer, value, step);
}

void SummarySaverHook::end(Session& /*session*/) { summary_writer_for(output_dir_)->flush(); }

// --- FinalOpsHook ---

void FinalOpsHook::end(Session& session) {
  for (const std::string& name : final_ops_) values_[name] = session.fetch_variable(name);
}

}  // namespace est::hooks
