// Estimator::train: restore, then next element -> model_fn -> train op -> hooks, until a hook
// stops it or the input ends. Stopping, logging, NaN checks, summaries and checkpoints are the
// default hooks below; the loop itself has no such branches.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string_view>

#include "checkpoint/model_dir.h"
#include "checkpoint/reader.h"
#include "checkpoint/rng_state.h"
#include "checkpoint/state_file.h"
#include "checkpoint/variable_store_io.h"
#include "distribute/strategy.h"
#include "estimator/estimator.h"
#include "estimator/hooks/basic_hooks.h"
#include "estimator/loop_util.h"
#include "estimator/replicas.h"
#include "estimator/summary_cache.h"
#include "estimator/worker_sync.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

constexpr const char* kIteratorBlob = "iterator";
constexpr const char* kModelRngBlob = "rng/model";
constexpr const char* kInitializerRngBlob = "rng/initializer";

void check_steps(std::optional<int64_t> steps, std::optional<int64_t> max_steps) {
  if (steps && max_steps)
    throw InvalidArgumentError(fmt::format(
        "train: both steps ({}) and max_steps ({}) are set; steps counts from the current global "
        "step, max_steps is absolute: pass one",
        *steps, *max_steps));
  if (steps && *steps <= 0)
    throw InvalidArgumentError(fmt::format("train: steps must be positive, got {}", *steps));
  if (max_steps && *max_steps <= 0)
    throw InvalidArgumentError(
        fmt::format("train: max_steps must be positive, got {}", *max_steps));
}

// Restores the RNG states and the input position a checkpoint carries. An input position
// that does not fit this input pipeline (it changed) is dropped with a warning: the input
// starts afresh.
void restore_extras(const detail::Restored& restored, EstimatorContext& ctx,
                    const data::Dataset& dataset, std::unique_ptr<data::Iterator>& iterator,
                    const detail::WorkerSync& sync) {
  if (const auto* blob = restored.blob(kModelRngBlob))
    ctx.generator().set_state(checkpoint::decode_generator_state(blob->bytes, kModelRngBlob));
  if (const auto* blob = restored.blob(kInitializerRngBlob))
    ctx.initializer_generator().set_state(
        checkpoint::decode_generator_state(blob->bytes, kInitializerRngBlob));
  // In a multi-worker job each worker resumes from its own position in the chief's checkpoint.
  const auto* position =
      restored.blob(sync.active() ? detail::WorkerSync::position_blob(sync.worker_index())
                                  : std::string(kIteratorBlob));
  if (!position) {
    if (restored.blob(kIteratorBlob) || restored.blob(detail::WorkerSync::position_blob(0)))
      log::warning("{} holds no input position for worker {} of {} (it was written by a job "
                   "with another number of workers); this worker's input starts afresh",
                   restored.path, sync.worker_index(), sync.num_workers());
    return;
  }
  try {
    iterator->restore_state(position->bytes);
  } catch (const Error& error) {
    log::warning(
        "The input position saved in {} does not match this input_fn's pipeline ({}); "
        "starting the input from the beginning",
        restored.path, error.what());
    iterator = std::make_unique<data::Iterator>(dataset.iterator());
  }
}

// The global step of the latest checkpoint, or nullopt when there is none or it cannot be
// read (restore will then fall back to an older one and say so).
std::optional<int64_t> saved_global_step(const std::string& model_dir) {
  auto latest = checkpoint::latest_checkpoint(model_dir);
  if (!latest) return std::nullopt;
  try {
    return checkpoint::read_info(*latest).global_step;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Event files get what was written even when the loop ends with an exception.
struct FlushSummariesOnExit {
  ~FlushSummariesOnExit() {
    try {
      flush_summary_writers();
    } catch (const std::exception& error) {
      log::error("Flushing summaries failed: {}", error.what());
    }
  }
};

}  // namespace

Estimator& Estimator::train(const InputFn& input_fn, const Hooks& hooks,
                            std::optional<int64_t> steps, std::optional<int64_t> max_steps,
                            const Listeners& saving_listeners) {
  try {
    return train_loop(input_fn, hooks, steps, max_steps, saving_listeners);
  } catch (const std::exception& error) {
    // The other workers stop at once with this error instead of waiting for this one.
    if (config_.train_distribute) config_.train_distribute->report_error(error);
    throw;
  }
}

Estimator& Estimator::train_loop(const InputFn& input_fn, const Hooks& hooks,
                                 std::optional<int64_t> steps, std::optional<int64_t> max_steps,
                                 const Listeners& saving_listeners) {
  check_steps(steps, max_steps);
  if (const auto& strategy = config_.train_distribute;
      strategy && strategy->num_workers() > 1 && strategy->is_chief() != config_.is_chief)
    throw InvalidArgumentError(fmt::format(
        "train: RunConfig says this task ({} {}) is {}the chief, but its {} says it is {}; build "
        "both from the same TF_CONFIG (RunConfig reads it when the Estimator is constructed)",
        config_.task_type, config_.task_id, config_.is_chief ? "" : "not ", strategy->name(),
        strategy->is_chief() ? "the chief" : "not the chief"));
  detail::check_hooks(hooks, "train");
  // One trainer per model_dir: the chief holds the lock until train() returns or throws, so a
  // second process started on the same directory fails here, naming the first.
  std::optional<checkpoint::ModelDirLock> model_dir_lock;
  if (config_.is_chief) model_dir_lock.emplace(model_dir());
  if (max_steps && saved_global_step(model_dir()).value_or(0) >= *max_steps) {
    log::info("Skipping training since max_steps has already saved.");
    return *this;
  }
  if (!saving_listeners.empty() && !config_.is_chief)
    log::warning("train: saving_listeners run only on the chief; ignored on {} {}",
                 config_.task_type, config_.task_id);

  FlushSummariesOnExit flush_summaries;
  detail::Replicas replicas(config_.train_distribute, ModeKeys::kTrain, seed_, params_, config_);
  replicas.log_strategy("training");
  nn::VariableStore& store = replicas.store();
  EstimatorContext& ctx = replicas.context();
  data::Dataset dataset = replicas.make_dataset(input_fn, ModeKeys::kTrain);
  auto iterator = std::make_unique<data::Iterator>(dataset.iterator());
  detail::WorkerSync sync(config_.train_distribute.get());
  std::optional<detail::Restored> restored =
      detail::restore_checkpoint(model_dir(), replicas.stores());
  if (restored) {
    restore_extras(*restored, ctx, dataset, iterator, sync);
  }
  // Every worker's input position, as of the chief's next save (multi-worker).
  std::vector<std::string> positions;

  // The start checkpoint is written after the first model_fn call (the variables exist then)
  // but must describe the state before that step: its input position and model RNG.
  bool at_start = true;
  std::string start_position = iterator->save_state();
  auto start_model_rng = ctx.generator().state();
  Session session(store, ModeKeys::kTrain, model_dir(), config_, [&] {
    checkpoint::TensorBundle bundle = checkpoint::bundle_from_store(store);
    if (sync.active() && config_.is_chief) {
      for (size_t w = 0; w < positions.size(); ++w)
        bundle.add_blob(detail::WorkerSync::position_blob(static_cast<int>(w)), positions[w]);
    } else {
      bundle.add_blob(kIteratorBlob, at_start ? start_position : iterator->save_state());
    }
    bundle.add_blob(kModelRngBlob, checkpoint::encode_generator_state(
                                       at_start ? start_model_rng : ctx.generator().state()));
    bundle.add_blob(kInitializerRngBlob,
                    checkpoint::encode_generator_state(ctx.initializer_generator().state()));
    return bundle;
  });

  // The loop's rules, as TensorFlow's Estimator installs them.
  Hooks all_hooks;
  if (steps || max_steps)
    all_hooks.push_back(std::make_shared<hooks::StopAtStepHook>(steps, max_steps));
  all_hooks.push_back(std::make_shared<hooks::NanTensorHook>("loss"));
  all_hooks.push_back(std::make_shared<hooks::LoggingTensorHook>(
      hooks::LoggingTensorHook::Entries{{"loss", "loss"}, {"step", "global_step"}},
      config_.log_step_count_steps, std::nullopt, false, config_.clock));
  all_hooks.insert(all_hooks.end(), hooks.begin(), hooks.end());
  Hooks chief_hooks;
  std::shared_ptr<hooks::CheckpointSaverHook> saver;
  if (config_.is_chief) {
    chief_hooks.push_back(std::make_shared<hooks::StepCounterHook>(
        config_.log_step_count_steps, std::nullopt, model_dir(), config_.clock));
    if (config_.save_summary_steps > 0)
      chief_hooks.push_back(std::make_shared<hooks::SummarySaverHook>(
          config_.save_summary_steps, std::nullopt, model_dir(), std::vector<std::string>{"loss"},
          config_.clock));
  }
  // The other workers of a multi-worker job write their checkpoints to model_dir's
  // workertemp_<task_id> and delete it, as TensorFlow's do; only the chief's count.
  bool multi_worker = config_.train_distribute && config_.train_distribute->num_workers() > 1;
  if (config_.is_chief || multi_worker) {
    saver = std::make_shared<hooks::CheckpointSaverHook>(hooks::CheckpointSaverOptions{
            .checkpoint_dir = model_dir(),
            .save_secs = config_.checkpoint_secs(),
            .save_steps = config_.checkpoint_steps(),
            .keep_checkpoint_max = config_.keep_checkpoint_max,
            .keep_checkpoint_every_n_hours = config_.keep_checkpoint_every_n_hours,
            .is_chief = config_.is_chief,
            .task_id = config_.task_id,
            .listeners = config_.is_chief ? saving_listeners : Listeners{},
            .clock = config_.clock});
    chief_hooks.push_back(saver);
  }
  // The global step training stops at (StopAtStepHook's rule), known before the step: workers
  // then stop without reading another batch, so their saved positions stay exact.
  std::optional<int64_t> stop_step = max_steps;
  if (steps) stop_step = (restored ? restored->global_step : 0) + *steps;
  bool stop_pending = false;  // a hook asked this worker to stop (multi-worker)

  StepTimings timings;
  bool first = true;
  double final_loss = std::nan("");
  for (;;) {
    timings.input_begin = detail::steady_seconds();
    int64_t before = session.global_step();
    if (sync.active() && stop_step && before >= *stop_step) break;  // the same on every worker
    // A worker whose hook asked to stop reads no batch for a step that will not run: the
    // position saved at the end stays the one after its last trained step.
    std::vector<data::Element> elements;
    if (!stop_pending) elements = replicas.next(*iterator);
    bool whole_step = stop_pending || (!elements.empty() &&
                                       elements.size() == static_cast<size_t>(replicas.size()));
    detail::WorkerSync::Decision decision;
    if (sync.active()) {
      bool chief_saves = config_.is_chief && !first && saver->decide_save(before + 1);
      decision = sync.agree(whole_step, stop_pending, chief_saves, before);
      if (!decision.proceed) break;
    }
    if (elements.empty()) {
      if (first) log::warning("train: input_fn's dataset produced no element; nothing to train");
      break;
    }
    if (!whole_step) {
      log::warning(
          "train: the input ended with {} per-replica batch(es) left for {} replicas; a step "
          "needs one batch per replica, so they are not trained on",
          elements.size(), replicas.size());
      break;
    }
    timings.model_fn_begin = detail::steady_seconds();
    int64_t step = session.global_step();
    replicas.seed_replica_generators(step);
    std::vector<EstimatorSpec> specs = [&] {
      try {
        return replicas.call_model_fn(model_fn_, elements, ModeKeys::kTrain, first);
      } catch (const InvalidArgumentError& error) {
        // A staged value that does not fit the variable model_fn creates: say which file.
        if (!first || !restored ||
            std::string_view(error.what()).find("restoring variable") == std::string_view::npos)
          throw;
        throw InvalidArgumentError(
            fmt::format("restoring {} into the model: {}", restored->path, error.what()));
      }
    }();
    if (first) {
      if (restored) detail::check_restored(*restored, store);
      if (!restored && warm_start_from_) {
        std::optional<checkpoint::WarmStartResult> result;
        for (nn::VariableStore* copy : replicas.stores()) {
          checkpoint::TensorBundle variables = checkpoint::bundle_from_store(*copy);
          result = checkpoint::warm_start(model_dir(), *warm_start_from_, variables);
        }
        if (result) {
          log::info("Warm-started {} variables from {}.", result->warm_started.size(),
                    result->path);
          specs = replicas.call_model_fn(model_fn_, elements, ModeKeys::kTrain, false);
        }
      }
      EstimatorSpec& spec = specs.front();
      all_hooks.insert(all_hooks.end(), spec.training_hooks.begin(), spec.training_hooks.end());
      if (config_.is_chief)
        all_hooks.insert(all_hooks.end(), spec.training_chief_hooks.begin(),
                         spec.training_chief_hooks.end());
      all_hooks.insert(all_hooks.end(), chief_hooks.begin(), chief_hooks.end());
      detail::begin_hooks(all_hooks);
      if (sync.active()) {
        positions = sync.gather_positions(start_position, before);
        if (config_.is_chief) saver->expect_decisions();  // the first step was agreed without
      }
      detail::after_create_session(all_hooks, session);
      at_start = false;
      first = false;
    }
    timings.model_fn_end = detail::steady_seconds();
    EstimatorSpec spec = replicas.step_spec(specs);
    SessionRunContext run_context(session, spec, step, timings);
    std::vector<SessionRunArgs> args = detail::before_run(all_hooks, run_context);
    timings.run_begin = detail::steady_seconds();
    replicas.run_train_ops(specs, &spec);
    timings.run_end = detail::steady_seconds();
    if (decision.save) positions = sync.gather_positions(iterator->save_state(), before + 1);
    SessionRunValues values =
        detail::resolve_fetches(args, spec, session, step, session.global_step());
    detail::after_run(all_hooks, run_context, values);
    final_loss = spec.loss.item();
    if (run_context.stop_requested()) {
      if (!sync.active()) break;
      stop_pending = true;  // every worker stops together, at the next agreement
    }
  }
  if (!first) {
    if (sync.active()) positions = sync.gather_positions(iterator->save_state(), session.global_step());
    detail::end_hooks(all_hooks, session);
  }
  log::info("Loss for final step: {}.", static_cast<float>(final_loss));
  return *this;
}

}  // namespace est
