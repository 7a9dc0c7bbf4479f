// compile / fit / evaluate / predict on the Estimator (Keras 2.x keras/engine/training.py;
// see model.h for the design).
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
// pipeline is the same (Keras starts a new iterator per fit call); a global batch that does not
// split evenly over the replicas is an error (Keras splits a last partial batch unevenly).
#include <fmt/format.h>

#include <cmath>

#include "data/cardinality.h"
#include "distribute/strategy.h"
#include "estimator/estimator.h"
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

}  // namespace

void Model::compile(CompileOptions options) {
  if (const auto* name = std::get_if<std::string>(&options.optimizer))
    optimizer_ = get_optimizer(*name);
  else
    optimizer_ = std::get<Optimizer>(options.optimizer);
  if (const auto* name = std::get_if<std::string>(&options.loss)) {
    if (name->empty())
      throw InvalidArgumentError(
          "compile: no loss; pass .loss = \"sparse_categorical_crossentropy\" (or another "
          "name) or a loss object such as keras::losses::SparseCategoricalCrossentropy(true)");
    loss_ = get_loss(*name);
  } else {
    loss_ = std::get<Loss>(options.loss);
  }
  for (const auto& metric : options.metrics) check_metric_name(metric);
  metric_names_ = options.metrics;
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

std::vector<std::string> Model::metric_names_with_loss() const {
  std::vector<std::string> names{"loss"};
  names.insert(names.end(), metric_names_.begin(), metric_names_.end());
  return names;
}

void Model::check_compiled(const char* what) const {
  if (!loss_ || !optimizer_)
    throw FailedPreconditionError(
        fmt::format("You must compile your model before {} (model \"{}\"): call "
                    "model.compile({{.optimizer = ..., .loss = ..., .metrics = {{...}}}}) first",
                    what, name_));
}

std::vector<Tensor> Model::inputs_of(const data::Features& features) const {
  if (inputs_.size() == 1 && features.size() == 1) return {features.begin()->second};
  std::vector<Tensor> out;
  for (const auto& input : inputs_) {
    const std::string& name = input.node->layer->name();
    auto it = features.find(name);
    if (it == features.end()) {
      std::string given;
      for (const auto& [key, value] : features) given += (given.empty() ? "" : ", ") + key;
      throw InvalidArgumentError(fmt::format(
          "Model \"{}\": no feature named \"{}\" for its input of that name (the batch has: {}); "
          "name the dataset's features after the model's Input names",
          name_, name, given));
    }
    out.push_back(it->second);
  }
  return out;
}

void Model::ensure_built(const data::Dataset& dataset) {
  if (built()) return;
  auto iterator = dataset.iterator();
  auto first = iterator.next();
  if (!first || first->features.empty())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": the dataset yields no (features, labels) batch to build the model from",
        name_));
  build_from_batch(first->features.begin()->second.shape());
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
    if (mode == ModeKeys::kPredict) {
      Predictions predictions;
      for (size_t i = 0; i < outputs.size(); ++i)
        predictions[outputs_[i].node->layer->name()] = outputs[i];
      return EstimatorSpec::predict(std::move(predictions));
    }
    if (outputs.size() != 1)
      throw UnimplementedError(
          fmt::format("Model \"{}\" has {} outputs: fit and evaluate support one output for now",
                      name_, outputs.size()));
    if (!labels.defined())
      throw InvalidArgumentError(fmt::format(
          "Model \"{}\": fit and evaluate need labels: a dataset of (features, labels)", name_));
    const Tensor& y_pred = outputs[0];
    Tensor loss = loss_->fn(labels, y_pred);
    MetricOps ops;
    {
      ops::NoGradGuard no_grad;
      Tensor batch = Tensor::scalar(static_cast<double>(y_pred.shape()[0]));
      ops["loss"] = nn::metrics::mean(loss.detach(), batch);
      for (const auto& name : metric_names_)
        ops[name] = get_metric(name, labels.shape(), y_pred.shape()).fn(labels, y_pred.detach());
    }
    if (mode == ModeKeys::kTrain && step_statistics_) {
      std::vector<double> means;
      for (const auto& name : metric_names_with_loss()) means.push_back(ops.at(name).result());
      step_statistics_->record(&ctx, means, static_cast<double>(y_pred.shape()[0]));
    }
    if (mode == ModeKeys::kTrain) {
      EstimatorSpec spec = EstimatorSpec::train(
          loss, optimizer_->optimizer.minimize(loss, ctx, {.loss_reduction = loss_->reduction}));
      spec.eval_metric_ops = std::move(ops);
      return spec;
    }
    return EstimatorSpec::eval(loss, std::move(ops));
  };
  estimator_ = std::make_unique<est::Estimator>(std::move(model_fn), config);
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
      est.train(training_input_fn(input),
                {.hooks = {hook}, .steps = steps - first_step, .saving_listeners = listeners});
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
  estimator().predict(input_fn_of(input), [&](Predictions prediction) {
    for (size_t i = 0; i < outputs_.size(); ++i)
      rows[i].push_back(ops::expand_dims(prediction.at(outputs_[i].node->layer->name()), 0));
    return true;
  });
  std::vector<Tensor> out;
  for (auto& row : rows) out.push_back(row.empty() ? Tensor() : ops::concat(row, 0));
  return out;
}

}  // namespace est::keras
