// compile / fit / evaluate / predict on the Estimator (Keras 2.x keras/engine/training.py;
// see model.h for the design).
//
// The model_fn takes a batch's x and y apart (data_adapter.h: y may be keyed by output name or a
// tuple) and computes the total loss and the logged values with compile()'s losses, loss weights
// and metrics conformed to the outputs (compile_utils.h, CompiledLossesAndMetrics, made once the
// model is built); predictions are keyed by Model::output_names().
//
// fit: one Estimator::train over all its epochs on the model's model_dir, continuing from its
// latest checkpoint (variables, optimizer slots, RNG states, input position); fit_loop.h's
// EpochHook cuts the session into epochs by step count, calls the callbacks and validates (every
// validation_freq epochs; "val_<name>" in the epoch's logs), all inside the session. With
// callbacks or validation data the Estimator's saver saves at every epoch's end instead of its
// configured cadence, and the chief ends the epoch in a saving listener, after the write:
// validation evaluates that checkpoint, and a callback's on_epoch_end finds the epoch's state in
// model_dir. A finite dataset without steps_per_epoch is counted (its cardinality, else one pass)
// and repeated, so that each epoch is one pass, as Keras iterates it afresh per epoch; an
// infinite one is an error naming the fix. The loss and metrics in the logs are Keras's Mean
// metrics, summed over replicas and workers (fit_loop.h).
// A callback may set resume_from in on_train_begin (BackupAndRestore): fit then starts at that
// epoch, which runs only its remaining steps, its batches numbered on from the resumed step.
// Such a partial epoch is a train() of its own (the saver's cadence counts from the session's
// first step, so the epoch-end saves of the full epochs that follow would not fall on their
// ends otherwise); the remaining epochs are one train() as usual. A constant learning rate is
// a value the callbacks set between steps and the EpochHook writes into the variable
// "learning_rate" (after the restore and before every step), so it is saved with the state. The
// Estimator's NaN-loss check is off (Keras has none: TerminateOnNaN stops); stop_training set in
// on_train_batch_end ends the epoch after that batch.
// Under a strategy (config().train_distribute, set before compile, as `with strategy.scope():`)
// the dataset yields global batches, split over the replicas and auto-sharded over the workers
// (distributed_input.h); the loss is each replica's mean over its batch, its gradients divided by
// the replicas in sync before they are summed (the Estimator's rule for a SUM_OVER_BATCH_SIZE
// loss), which is Keras's sum over the global batch / global batch size; only the chief prints
// progress. evaluate and predict run in this process without the strategy (every worker gets the
// same values: the variables are the same everywhere).
// Known differences: a second fit() continues the input where the first left it when the
// pipeline is the same (Keras starts a new iterator per fit call).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "data/cardinality.h"
#include "distribute/strategy.h"
#include "estimator/estimator.h"
#include "keras/compile_utils.h"
#include "keras/distributed_input.h"
#include "keras/fit_loop.h"
#include "keras/model.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {
namespace {

// est's INFO lines (checkpoints, "Calling model_fn") are not Keras's output: quieter during
// fit/evaluate/predict unless the user asked for a level (EST_LOG_LEVEL) other than INFO.
class QuietLogs {
 public:
  QuietLogs() : previous_(log::level()) {
    if (previous_ == log::Level::kInfo) log::set_level(log::Level::kWarning);
  }
  ~QuietLogs() { log::set_level(previous_); }
  QuietLogs(const QuietLogs&) = delete;
  QuietLogs& operator=(const QuietLogs&) = delete;

 private:
  log::Level previous_;
};

struct BatchCounter : SessionRunHook {
  void after_run(SessionRunContext&, const SessionRunValues&) override { ++batches; }
  int64_t batches = 0;
};

int64_t count_batches(const data::Dataset& dataset) {
  auto iterator = dataset.iterator();
  int64_t count = 0;
  while (iterator.next()) ++count;
  return count;
}

InputFn input_fn_of(data::Dataset dataset) {
  return [dataset](ModeKeys, const InputContext*) { return dataset; };
}

// Training input: under a strategy, the global batches as per-replica batches of this worker.
InputFn training_input_fn(data::Dataset dataset) {
  return [dataset](ModeKeys, const InputContext* context) {
    if (!context) return dataset;
    int64_t local = context->num_replicas_in_sync / context->num_input_pipelines;
    return per_replica_batches(dataset, local, context->num_input_pipelines,
                               context->input_pipeline_id);
  };
}

// A test seam, read by fit for tests/keras/resume_race_test.cpp alone: with this variable set to
// N, the chief sleeps N milliseconds before it writes the end of an epoch resumed mid-way
// (BackupAndRestore), the checkpoint that every worker's next train() restores. It widens the
// race that the workers' meeting after that train() closes, so that without the meeting the
// other worker always restores the older checkpoint first and the test fails every time. Unset,
// as everywhere else, it changes nothing.
constexpr const char* kResumedEpochSaveDelay = "EST_KERAS_TEST_DELAY_RESUMED_EPOCH_SAVE_MS";

class DelayedSave : public CheckpointSaverListener {
 public:
  explicit DelayedSave(std::chrono::milliseconds delay) : delay_(delay) {}
  // A session's first save is of the state it restored (TF's initial save); the next is the
  // epoch's end.
  void before_save(Session&, int64_t) override {
    if (saves_++ > 0) std::this_thread::sleep_for(delay_);
  }

 private:
  std::chrono::milliseconds delay_;
  int saves_ = 0;
};

// `listeners`, plus the chief's delay when the test seam above is set.
Listeners with_resumed_epoch_save_delay(Listeners listeners, bool is_chief) {
  const char* value = std::getenv(kResumedEpochSaveDelay);
  if (value == nullptr || !is_chief) return listeners;
  int64_t milliseconds = -1;
  const char* end = value + std::strlen(value);
  auto [stop, error] = std::from_chars(value, end, milliseconds);
  if (error != std::errc() || stop != end || milliseconds < 0)
    throw InvalidArgumentError(
        fmt::format("{}=\"{}\": expected a number of milliseconds (a test seam; unset it)",
                    kResumedEpochSaveDelay, value));
  listeners.push_back(std::make_shared<DelayedSave>(std::chrono::milliseconds(milliseconds)));
  return listeners;
}

}  // namespace

void Model::compile(CompileOptions options) {
  if (const auto* name = std::get_if<std::string>(&options.optimizer))
    optimizer_ = get_optimizer(*name);
  else
    optimizer_ = std::get<Optimizer>(options.optimizer);
  // The names are checked now; the structures against the outputs once the model is built.
  std::vector<std::string> loss_names;
  if (const auto* name = std::get_if<std::string>(&options.loss)) loss_names.push_back(*name);
  auto add_name = [&](const LossArg& arg) {
    if (arg && std::holds_alternative<std::string>(*arg))
      loss_names.push_back(std::get<std::string>(*arg));
  };
  if (const auto* list = std::get_if<LossList>(&options.loss))
    for (const auto& arg : *list) add_name(arg);
  if (const auto* map = std::get_if<LossMap>(&options.loss))
    for (const auto& [output, arg] : *map) add_name(arg);
  for (const auto& name : loss_names) {
    if (name.empty())
      throw InvalidArgumentError(
          "compile: no loss; pass .loss = \"sparse_categorical_crossentropy\" (or another "
          "name) or a loss object such as keras::losses::SparseCategoricalCrossentropy(true)");
    get_loss(name);
  }
  for (const auto& metric : options.metrics.all_names()) check_metric_name(metric);
  compiled_.reset();
  if (built())
    compiled_ = std::make_shared<CompiledLossesAndMetrics>(options, output_names(), name_);
  // A constant learning rate becomes a value that callbacks can change between steps.
  learning_rate_.reset();
  if (optimizer_->optimizer.learning_rate().is_constant()) {
    auto rate = std::make_shared<double>(optimizer_->optimizer.learning_rate().at(0));
    optimizer_->optimizer =
        optimizer_->optimizer.with_learning_rate([rate](int64_t) { return *rate; });
    learning_rate_ = rate;
  }
  compile_options_ = std::move(options);
  estimator_.reset();
}

double Model::learning_rate() const {
  check_compiled("reading its learning rate");
  if (!learning_rate_) return optimizer_->optimizer.learning_rate().at(0);
  return *learning_rate_;
}

void Model::set_learning_rate(double learning_rate) {
  check_compiled("setting its learning rate");
  if (!learning_rate_)
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": the optimizer {} was compiled with a learning-rate schedule, so its "
        "learning rate cannot be set (Keras: \"This optimizer was created with a "
        "`LearningRateSchedule` object as its `learning_rate` constructor argument, hence its "
        "learning rate is not settable\"); compile with a constant learning rate instead",
        name_, optimizer_->name));
  if (!std::isfinite(learning_rate) || learning_rate < 0)
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": learning rate {} is not a finite number >= 0", name_, learning_rate));
  *learning_rate_ = learning_rate;
  // What save() writes as the optimizer's config, as Keras's get_config reads the variable.
  if (optimizer_->config.count("learning_rate"))
    optimizer_->config["learning_rate"] = learning_rate;
}

const CompiledLossesAndMetrics& Model::compiled() {
  check_compiled("training/testing. Use `model.compile(optimizer, loss)`");
  std::vector<std::string> names = output_names();
  if (!compiled_ || compiled_->output_names() != names)  // made, or a Sequential grown since
    compiled_ = std::make_shared<CompiledLossesAndMetrics>(*compile_options_, names, name_);
  return *compiled_;
}

std::vector<std::string> Model::metric_names_with_loss() { return compiled().names(); }

void Model::check_compiled(const char* what) const {
  if (!compile_options_ || !optimizer_)
    throw FailedPreconditionError(
        fmt::format("You must compile your model before {} (model \"{}\"): call "
                    "model.compile({{.optimizer = ..., .loss = ..., .metrics = {{...}}}}) first",
                    what, name_));
}

std::vector<Tensor> Model::inputs_of(const data::Features& features) const {
  return unpack_x(features, input_names(), name_);
}

void Model::ensure_built(const data::Dataset& dataset) {
  if (built()) return;
  auto iterator = dataset.iterator();
  auto first = iterator.next();
  auto x = first ? std::find_if(first->features.begin(), first->features.end(),
                                [](const auto& feature) { return is_x_feature(feature.first); })
                 : data::Features::const_iterator();
  if (!first || x == first->features.end())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": the dataset yields no (features, labels) batch to build the model from",
        name_));
  build_from_batch(x->second.shape());
}

est::Estimator& Model::estimator() {
  if (estimator_) return *estimator_;
  return training_estimator(std::nullopt);
}

est::Estimator& Model::training_estimator(std::optional<int64_t> save_steps) {
  RunConfig config = config_;
  if (save_steps) {  // fit's saves at every epoch's end instead of the configured cadence
    config.save_checkpoints_steps = save_steps;
    config.save_checkpoints_secs = std::nullopt;
  }
  config.check_nan_loss = false;  // Keras trains on; TerminateOnNaN stops
  if (estimator_ && estimator_->config().save_checkpoints_steps == config.save_checkpoints_steps &&
      estimator_->config().save_checkpoints_secs == config.save_checkpoints_secs)
    return *estimator_;
  ModelFn model_fn = [this](const Features& features, const Tensor& labels, ModeKeys mode,
                            ModelContext& ctx) {
    std::vector<Tensor> outputs = call(ctx, inputs_of(features));
    const std::vector<std::string> names = output_names();
    if (mode == ModeKeys::kPredict) {
      Predictions predictions;
      for (size_t i = 0; i < outputs.size(); ++i) predictions[names[i]] = outputs[i];
      return EstimatorSpec::predict(std::move(predictions));
    }
    std::vector<Tensor> targets = unpack_y(features, labels, names, name_);
    auto step = compiled()(targets, outputs, regularization_losses(ctx));
    if (mode == ModeKeys::kTrain && step_statistics_)
      step_statistics_->record(&ctx, step.means, step.rows);
    if (mode == ModeKeys::kTrain) {
      EstimatorSpec spec = EstimatorSpec::train(
          step.loss,
          optimizer_->optimizer.minimize(step.loss, ctx, {.loss_reduction = step.reduction}));
      spec.eval_metric_ops = std::move(step.ops);
      return spec;
    }
    return EstimatorSpec::eval(step.loss, std::move(step.ops));
  };
  estimator_ = std::make_unique<est::Estimator>(std::move(model_fn), config);
  if (config.model_dir.empty()) temporary_model_dir_ = estimator_->model_dir();
  config_.model_dir = estimator_->model_dir();  // the temporary one, when none was set
  return *estimator_;
}

History Model::fit(const data::Dataset& dataset, FitOptions options) {
  check_compiled("training/testing. Use `model.compile(optimizer, loss)`");
  if (options.epochs < 1 || options.initial_epoch < 0 || options.validation_freq < 1)
    throw InvalidArgumentError(fmt::format(
        "fit: epochs ({}) and validation_freq ({}) must be >= 1 and initial_epoch ({}) >= 0",
        options.epochs, options.validation_freq, options.initial_epoch));
  if (options.validation_split != 0)
    throw InvalidArgumentError(
        "fit: validation_split is only supported for tensors (fit(x, y, ...)), not for a "
        "dataset; pass validation_data instead");
  ensure_built(dataset);
  QuietLogs quiet;
  data::Dataset input = dataset;
  int64_t steps = 0;
  if (options.steps_per_epoch) {
    if (*options.steps_per_epoch < 1)
      throw InvalidArgumentError(
          fmt::format("fit: steps_per_epoch must be >= 1, got {}", *options.steps_per_epoch));
    steps = *options.steps_per_epoch;
  } else if (data::is_infinite(dataset)) {  // includes every infinite cardinality
    throw InvalidArgumentError(
        "fit: the dataset is infinite (it ends in repeat()) and steps_per_epoch is not set, so "
        "an epoch would never end; pass FitOptions{.steps_per_epoch = N} (the batches that make "
        "one epoch) or give a finite dataset");
  } else {
    // Known without a pass for most in-memory pipelines; otherwise counted by one.
    steps = data::cardinality(dataset);
    if (steps == data::kUnknownCardinality) steps = count_batches(dataset);
    if (steps == 0) throw InvalidArgumentError("fit: the dataset is empty");
    input = dataset.repeat();
  }

  std::vector<std::string> names = metric_names_with_loss();
  distribute::Strategy* strategy = config_.train_distribute.get();
  int verbose = strategy && !strategy->is_chief() ? 0 : options.verbose;  // the chief prints
  auto history = std::make_shared<History>();
  Callbacks all = options.callbacks;
  if (verbose > 0)
    all.push_back(
        std::make_shared<ProgbarLogger>(verbose, options.output.value_or(stdout_output()), names));
  all.push_back(history);
  CallbackList callbacks(all, this,
                         {{"epochs", options.epochs}, {"steps", steps}, {"verbose", verbose}});
  stop_training = false;
  step_statistics_ = std::make_shared<StepStatistics>(names.size());
  struct Reset {
    std::shared_ptr<StepStatistics>& statistics;
    ~Reset() { statistics.reset(); }
  } reset{step_statistics_};
  Validation validation;
  if (options.validation_data) {
    validation.due = [&options](int epoch) { return (epoch + 1) % options.validation_freq == 0; };
    validation.run = [this, &options] {
      return evaluate(*options.validation_data, {.steps = options.validation_steps, .verbose = 0});
    };
  }
  // With callbacks or validation, the Estimator saves at every epoch's end (and not on its own
  // cadence) and the chief ends each epoch after that save: validation evaluates the checkpoint,
  // callbacks may read it. Other workers end their epochs at once. Made before on_train_begin:
  // model_dir exists for the callbacks (BackupAndRestore puts its backup there).
  bool epoch_saves = !options.callbacks.empty() || options.validation_data.has_value();
  est::Estimator& est =
      training_estimator(epoch_saves ? std::optional<int64_t>(steps) : std::nullopt);
  resume_from.reset();
  callbacks.on_train_begin({});
  int first_epoch = options.initial_epoch;
  int64_t first_step = 0;
  if (resume_from) {
    first_epoch = resume_from->epoch;
    first_step = resume_from->step;
    resume_from.reset();
    if (first_step < 0 || first_step >= steps) {
      first_epoch += first_step >= steps ? 1 : 0;
      first_step = 0;
    }
  }
  auto hook =
      std::make_shared<EpochHook>(callbacks, *this, names, step_statistics_, strategy, first_epoch,
                                  first_step, steps, validation, learning_rate_);
  Listeners listeners;
  if (epoch_saves && est.config().is_chief) {
    hook->set_defer_to_save(true);
    listeners.push_back(std::make_shared<EpochEndListener>(hook, *this));
  }
  int64_t remaining =
      first_epoch < options.epochs ? steps * (options.epochs - first_epoch) - first_step : 0;
  {
    // While it runs, the model reads and sets the running session's variables (get/set_weights).
    std::shared_ptr<void> done(nullptr, [this](void*) { training_session_ = nullptr; });
    if (first_step > 0 && remaining > 0) {
      // The resumed epoch's remaining steps on their own, so that the saver's cadence (counted
      // from a session's first step) falls on the next epochs' ends.
      est.train(training_input_fn(input), {.hooks = {hook},
                                           .steps = steps - first_step,
                                           .saving_listeners = with_resumed_epoch_save_delay(
                                               listeners, est.config().is_chief)});
      if (hook->pending()) hook->end_epoch();
      remaining = hook->epoch_begun() || stop_training ? 0 : remaining - (steps - first_step);
      // The next train() restores model_dir's latest checkpoint: the chief's save of the epoch's
      // end must be on disk before another worker reads it (it would restore the backup's step).
      if (strategy) strategy->barrier("fit's resumed epoch's checkpoint");
    }
    if (remaining > 0)
      est.train(training_input_fn(input),
                {.hooks = {hook}, .steps = remaining, .saving_listeners = listeners});
  }
  if (hook->pending()) hook->end_epoch();
  if (hook->epoch_begun()) {  // an epoch cut short: the input ended, or a callback stopped
    if (hook->batches() < steps && !stop_training) {
      log::warning(
          "Your input ran out of data; interrupting training. Make sure that your dataset can "
          "generate at least `steps_per_epoch * epochs` batches ({} batches here)",
          steps * options.epochs);
      stop_training = true;
    }
    hook->end_epoch();
  }
  callbacks.on_train_end({});
  return *history;
}

std::map<std::string, double> Model::evaluate(const data::Dataset& dataset,
                                              EvaluateOptions options) {
  check_compiled("training/testing. Use `model.compile(optimizer, loss)`");
  ensure_built(dataset);
  QuietLogs quiet;
  if (!options.steps && data::is_infinite(dataset))
    throw InvalidArgumentError(
        "evaluate: the dataset is infinite (it ends in repeat()); pass "
        "EvaluateOptions{.steps = N} or give a finite dataset");
  std::optional<Progbar> bar;
  if (options.verbose > 0)
    bar.emplace(std::nullopt, options.verbose, options.output.value_or(stdout_output()));
  auto counter = std::make_shared<BatchCounter>();
  Metrics results =
      estimator().evaluate(input_fn_of(dataset), {.steps = options.steps, .hooks = {counter}});
  std::map<std::string, double> out;
  Progbar::Values values;
  for (const auto& name : metric_names_with_loss()) {
    out[name] = results.at(name);
    values.emplace_back(name, out[name]);
  }
  if (bar) {  // Keras's last update of the evaluation's bar
    bar->set_target(counter->batches);
    bar->update(counter->batches, values, true);
  }
  return out;
}

std::vector<Tensor> Model::predict(const data::Dataset& dataset, std::optional<int64_t> steps) {
  ensure_built(dataset);  // no compile needed: PREDICT uses neither loss nor optimizer
  QuietLogs quiet;
  data::Dataset input = steps ? dataset.take(*steps) : dataset;
  if (!steps && data::is_infinite(dataset))
    throw InvalidArgumentError(
        "predict: the dataset is infinite (it ends in repeat()); pass steps or give a finite "
        "dataset");
  std::vector<std::vector<Tensor>> rows(outputs_.size());
  const std::vector<std::string> names = output_names();
  estimator().predict(input_fn_of(input), [&](Predictions prediction) {
    for (size_t i = 0; i < outputs_.size(); ++i)
      rows[i].push_back(ops::expand_dims(prediction.at(names[i]), 0));
    return true;
  });
  std::vector<Tensor> out;
  for (auto& row : rows) out.push_back(row.empty() ? Tensor() : ops::concat(row, 0));
  return out;
}

}  // namespace est::keras
