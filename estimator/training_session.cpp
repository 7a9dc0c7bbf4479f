// TrainingSession: restore, the start checkpoint, the three phases of a step (the hooks' life
// cycle around them is HookedSession's).
#include "estimator/training_session.h"

#include <fmt/format.h>

#include <cmath>

#include "checkpoint/reader.h"
#include "checkpoint/rng_state.h"
#include "checkpoint/source.h"
#include "checkpoint/tf_resume.h"
#include "checkpoint/variable_store_io.h"
#include "distribute/strategy.h"
#include "nn/restore_error.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::detail {
namespace {

constexpr const char* kIteratorBlob = "iterator";
constexpr const char* kModelRngBlob = "rng/model";
constexpr const char* kInitializerRngBlob = "rng/initializer";

// input_fn's dataset, after the line that names the strategy.
data::Dataset make_training_dataset(const Replicas& replicas, const InputFn& input_fn) {
  replicas.log_strategy("training");
  return replicas.make_dataset(input_fn, ModeKeys::kTrain);
}

}  // namespace

TrainingSession::TrainingSession(TrainingSessionOptions options)
    : options_(std::move(options)),
      config_(*options_.model.config),
      replicas_(config_.train_distribute, ModeKeys::kTrain, options_.model.seed,
                *options_.model.params, config_),
      dataset_(make_training_dataset(replicas_, options_.model.input_fn)),
      iterator_(std::make_unique<data::Iterator>(dataset_.iterator())),
      sync_(config_.train_distribute.get()),
      hooked_(Session(replicas_.store(), ModeKeys::kTrain, config_.model_dir, config_,
                      [this] { return checkpoint_bundle(); }),
              options_.hooks),
      final_loss_(std::nan("")) {
  restored_ = restore_checkpoint(config_.model_dir, replicas_.stores());
  if (restored_) restore_extras();
  start_position_ = iterator_->save_state();
  start_model_rng_ = replicas_.context().generator().state();
  stop_step_ = options_.max_steps;
  if (options_.steps) stop_step_ = (restored_ ? restored_->global_step : 0) + *options_.steps;
}

TrainingSession::~TrainingSession() = default;

// Restores the RNG states and the input position the checkpoint carries. An input position
// that does not fit this input pipeline (it changed) is dropped with a warning: the input
// starts afresh.
void TrainingSession::restore_extras() {
  EstimatorContext& ctx = replicas_.context();
  if (const auto* blob = restored_->blob(kModelRngBlob))
    ctx.generator().set_state(checkpoint::decode_generator_state(blob->bytes, kModelRngBlob));
  if (const auto* blob = restored_->blob(kInitializerRngBlob))
    ctx.initializer_generator().set_state(
        checkpoint::decode_generator_state(blob->bytes, kInitializerRngBlob));
  // In a multi-worker job each worker resumes from its own position in the chief's checkpoint.
  const auto* position =
      restored_->blob(sync_.active() ? WorkerSync::position_blob(sync_.worker_index())
                                     : std::string(kIteratorBlob));
  if (!position) {
    if (restored_->blob(kIteratorBlob) || restored_->blob(WorkerSync::position_blob(0)))
      log::warning(
          "{} holds no input position for worker {} of {} (it was written by a job "
          "with another number of workers); this worker's input starts afresh",
          restored_->path, sync_.worker_index(), sync_.num_workers());
    return;
  }
  try {
    iterator_->restore_state(position->bytes);
  } catch (const Error& error) {
    log::warning(
        "The input position saved in {} does not match this input_fn's pipeline ({}); "
        "starting the input from the beginning",
        restored_->path, error.what());
    iterator_ = std::make_unique<data::Iterator>(dataset_.iterator());
  }
}

checkpoint::TensorBundle TrainingSession::checkpoint_bundle() {
  // Variables that live elsewhere (parameter servers) are read back into the store first.
  if (distribute::Strategy* strategy = replicas_.strategy())
    strategy->variable_home().before_checkpoint(replicas_.store());
  checkpoint::TensorBundle bundle = checkpoint::bundle_from_store(replicas_.store());
  if (sync_.active() && config_.is_chief) {
    for (size_t w = 0; w < positions_.size(); ++w)
      bundle.add_blob(WorkerSync::position_blob(static_cast<int>(w)), positions_[w]);
  } else {
    bundle.add_blob(kIteratorBlob, at_start_ ? start_position_ : iterator_->save_state());
  }
  EstimatorContext& ctx = replicas_.context();
  bundle.add_blob(kModelRngBlob, checkpoint::encode_generator_state(
                                     at_start_ ? start_model_rng_ : ctx.generator().state()));
  bundle.add_blob(kInitializerRngBlob,
                  checkpoint::encode_generator_state(ctx.initializer_generator().state()));
  return bundle;
}

bool TrainingSession::should_stop() const {
  if (stopped_) return true;
  // Known before the step, the same on every worker: no worker reads another batch.
  return sync_.active() && stop_step_ && global_step() >= *stop_step_;
}

StepBatch TrainingSession::next_batch() {
  timings_.input_begin = steady_seconds();
  // A worker whose hook asked to stop reads no batch for a step that will not run: the
  // position saved at the end stays the one after its last trained step.
  if (stop_pending_) return {};
  return replicas_.next(*iterator_);
}

void TrainingSession::run(const StepBatch& batch) {
  int64_t step = global_step();
  bool whole_step =
      stop_pending_ || (!batch.empty() && batch.size() == static_cast<size_t>(replicas_.size()));
  if (!agree(whole_step, step)) {
    // Another worker's hook asked to stop, or an input ended: this worker read a batch for a
    // step that does not run. It goes back to the input, so the position saved at the end is
    // the one after the last trained step, as on the worker that asked (it read none).
    iterator_->put_back(batch);
    stopped_ = true;
    return;
  }
  if (batch.empty()) {
    if (!hooked_.began())
      log::warning("train: input_fn's dataset produced no element; nothing to train");
    stopped_ = true;
    return;
  }
  if (!whole_step) {
    log::warning(
        "train: the input ended with {} per-replica batch(es) left for {} replicas; a step "
        "needs one batch per replica, so they are not trained on",
        batch.size(), replicas_.size());
    iterator_->put_back(batch);
    stopped_ = true;
    return;
  }
  timings_.model_fn_begin = steady_seconds();
  replicas_.seed_replica_generators(step);
  std::vector<EstimatorSpec> specs = call_model_fn(batch);
  if (!hooked_.began()) create(batch, specs, step);
  timings_.model_fn_end = steady_seconds();
  run_step(specs, step);
}

bool TrainingSession::agree(bool whole_step, int64_t step) {
  decision_ = {};
  if (!sync_.active()) return true;
  // The chief's hooks say whether they save after this step (not before they began).
  bool chief_saves = false;
  if (config_.is_chief && hooked_.began())
    for (const auto& hook : hooked_.hooks())
      if (hook->will_save_after(step + 1)) chief_saves = true;
  decision_ = sync_.agree(whole_step, stop_pending_, chief_saves, step);
  return decision_.proceed;
}

std::vector<EstimatorSpec> TrainingSession::call_model_fn(const StepBatch& batch) {
  try {
    return replicas_.call_model_fn(options_.model.model_fn, batch, ModeKeys::kTrain,
                                   !hooked_.began());
  } catch (const nn::RestoreMismatchError& error) {
    // A restored value that does not fit the variable model_fn creates: say which file.
    if (!restored_) throw;
    throw nn::RestoreMismatchError(
        fmt::format("restoring {} into the model: {}; to start from it all the same, train in a "
                    "new model_dir with warm_start_from naming it (and var_name_to_prev_var_name "
                    "for renamed variables)",
                    restored_->path, error.what()));
  }
}

void TrainingSession::create(const StepBatch& batch, std::vector<EstimatorSpec>& specs,
                             int64_t step) {
  bool assigned = false;  // whether variables changed after model_fn created them
  if (restored_) {
    check_restored(*restored_, replicas_.store());
    send_restored_state();
    check_after_step_ = checkpoint::is_tf_prefix(restored_->path);
  } else {
    if (options_.warm_start_from) {
      std::vector<nn::VariableStore*> stores = replicas_.stores();
      for (nn::VariableStore* copy : stores) {
        checkpoint::TensorBundle variables = checkpoint::bundle_from_store(*copy);
        auto result = checkpoint::warm_start(config_.model_dir, *options_.warm_start_from,
                                             variables, copy == stores.front());
        if (!result) break;
        // Values for slots the optimizer creates at its first update (where the optimizer's
        // state lives elsewhere, they go there).
        for (const auto& [name, value] : result->staged) copy->restore(name, value);
        if (copy == stores.front()) send_state(result->staged);
        assigned = true;
      }
    }
    // Scaffold.init_fn: only when starting from scratch, after the warm start (TF's order).
    if (const auto& init_fn = specs.front().scaffold.init_fn) {
      run_init_fn(init_fn, hooked_.session(), replicas_.stores());
      assigned = true;
    }
  }
  // The variables have their first values: where they live elsewhere, they go there now.
  if (distribute::Strategy* strategy = replicas_.strategy())
    strategy->variable_home().variables_ready(replicas_.store());
  const EstimatorSpec& spec = specs.front();
  Hooks more = spec.training_hooks;
  if (config_.is_chief)
    more.insert(more.end(), spec.training_chief_hooks.begin(), spec.training_chief_hooks.end());
  more.insert(more.end(), options_.chief_only_hooks.begin(), options_.chief_only_hooks.end());
  bool hook_assigned = hooked_.create(more, [&] {
    if (!sync_.active()) return;
    positions_ = sync_.gather_positions(start_position_, step);
    // The first step was agreed before the hooks began; from the next one on they are asked.
    hooked_.session().set_saves_agreed_before_steps(config_.is_chief);
  });
  if (hook_assigned) assigned = true;
  at_start_ = false;
  // The warm start, init_fn or a hook assigned: model_fn runs again (with this step's random
  // seeds) so that the first step's forward pass sees the values, as TF's first run does.
  if (assigned) {
    replicas_.seed_replica_generators(step);
    specs = replicas_.call_model_fn(options_.model.model_fn, batch, ModeKeys::kTrain, false);
  }
}

void TrainingSession::send_restored_state() {
  std::vector<std::pair<std::string, Tensor>> values;
  std::vector<std::string> pending = replicas_.store().pending_restores();
  std::unique_ptr<checkpoint::CheckpointSource> source;  // est's or TensorFlow's
  if (!pending.empty()) source = checkpoint::open_checkpoint(restored_->path);
  for (const std::string& name : pending) values.emplace_back(name, source->read(name));
  send_state(values);
}

void TrainingSession::send_state(const std::vector<std::pair<std::string, Tensor>>& values) {
  distribute::Strategy* strategy = replicas_.strategy();
  if (!strategy || !strategy->variable_home().wants_restored_state()) return;
  strategy->variable_home().restore_state(values);
}

void TrainingSession::run_step(const std::vector<EstimatorSpec>& specs, int64_t step) {
  EstimatorSpec spec = replicas_.step_spec(specs);
  bool stop_requested = hooked_.run(
      spec, step, timings_, [&] { replicas_.run_train_ops(specs, &spec); },
      [&] {
        if (check_after_step_) {
          check_after_step_ = false;
          check_restored(*restored_, replicas_.store());  // before a hook may save
        }
        if (decision_.save) positions_ = sync_.gather_positions(iterator_->save_state(), step + 1);
      });
  final_loss_ = spec.loss.item();
  if (stop_requested) {
    if (sync_.active())
      stop_pending_ = true;  // every worker stops together, at the next agreement
    else
      stopped_ = true;
  }
}

void TrainingSession::close() {
  if (!hooked_.began()) return;  // no step ran: the hooks never began
  if (sync_.active()) positions_ = sync_.gather_positions(iterator_->save_state(), global_step());
  hooked_.close();
}

}  // namespace est::detail
