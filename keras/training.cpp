// compile / fit / evaluate / predict on the Estimator (Keras 2.x keras/engine/training.py;
// see model.h for the design).
//
// fit: one Estimator::train(steps = steps_per_epoch) per epoch over the model's model_dir, so
// each epoch continues from the previous one's checkpoint (input position included). A finite
// dataset without steps_per_epoch is counted once and repeated, so that each epoch is one pass,
// as Keras iterates it afresh per epoch; an infinite one is an error naming the fix. Per batch a
// SessionRunHook merges the step's streaming statistics ("loss", a mean weighted by the batch
// size as Keras's loss tracker, and each metric) into the epoch's running values, which the
// callbacks and the progress bar get as logs. Validation runs Estimator::evaluate every
// validation_freq epochs; its values join the epoch's logs as "val_<name>".
// A callback may set resume_from in on_train_begin (BackupAndRestore): fit then starts at that
// epoch, running only that epoch's remaining steps. A constant learning rate is a value the
// callbacks set between steps and fit's hook writes into the variable "learning_rate", so it
// is saved with the state. The Estimator's NaN-loss check is off (Keras has none: TerminateOnNaN).
// Known difference: a second fit() continues the input where the first left it when the
// pipeline is the same (Keras starts a new iterator per fit call).
#include <fmt/format.h>

#include <cmath>

#include "estimator/estimator.h"
#include "keras/model.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {
namespace {

constexpr const char* kLearningRateVariable = "learning_rate";

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

using Running = std::map<std::string, std::shared_ptr<nn::metrics::Metric>>;

// Merges a step's statistics into the running ones; returns the logs in `names` order.
Logs merge_step(const MetricOps& step, const std::vector<std::string>& names, Running& running) {
  Logs logs;
  for (const auto& name : names) {
    const auto& op = step.at(name);
    auto& metric = running[name];
    if (metric)
      metric->merge(*op.metric);
    else
      metric = std::shared_ptr<nn::metrics::Metric>(op.metric->clone());
    logs[name] = metric->result();
  }
  return logs;
}

// The per-batch callbacks of fit, as a hook of the Estimator's training loop. Batches are
// numbered from `first_batch` (an epoch resumed mid-way continues its numbering, as Keras's
// DataHandler does from its initial step); the running session is the model's
// training_session() while train() runs.
class BatchHook : public SessionRunHook {
 public:
  BatchHook(CallbackList& callbacks, Model& model, std::vector<std::string> names,
            int64_t first_batch, std::shared_ptr<double> learning_rate)
      : callbacks_(callbacks),
        model_(model),
        names_(std::move(names)),
        batch_(first_batch),
        learning_rate_(std::move(learning_rate)) {}
  void after_create_session(Session& session) override {
    model_.set_training_session(&session);
    write_learning_rate(session);
  }
  SessionRunArgs before_run(SessionRunContext& context) override {
    write_learning_rate(context.session());
    callbacks_.on_train_batch_begin(batch_, {});
    return {};
  }
  void after_run(SessionRunContext& context, const SessionRunValues&) override {
    logs_ = merge_step(context.spec().eval_metric_ops, names_, running_);
    callbacks_.on_train_batch_end(batch_++, logs_);
    ++batches_;
    if (model_.stop_training) context.request_stop();
  }
  int64_t batches() const { return batches_; }
  const Logs& logs() const { return logs_; }

 private:
  CallbackList& callbacks_;
  Model& model_;
  std::vector<std::string> names_;
  Running running_;
  Logs logs_;
  int64_t batch_ = 0;
  int64_t batches_ = 0;
  std::shared_ptr<double> learning_rate_;

  // The learning rate the steps use, as the variable "learning_rate" (Keras's optimizer
  // variable), saved with the state. Created after the restore (a checkpoint without it, as
  // get_weights or load_model write, restores as well), then written before every step.
  void write_learning_rate(Session& session) {
    if (!learning_rate_) return;
    ops::NoGradGuard no_grad;
    Tensor rate = nn::optim::get_non_slot(session.store(), kLearningRateVariable, DType::kF32,
                                          *learning_rate_);
    rate.copy_from(Tensor::scalar(*learning_rate_));
  }
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
    if (mode == ModeKeys::kTrain) {
      EstimatorSpec spec = EstimatorSpec::train(loss, optimizer_->optimizer.minimize(loss, ctx));
      spec.eval_metric_ops = std::move(ops);
      return spec;
    }
    return EstimatorSpec::eval(loss, std::move(ops));
  };
  RunConfig config = config_;
  config.check_nan_loss = false;  // Keras trains on; TerminateOnNaN stops
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
  ensure_built(dataset);
  QuietLogs quiet;
  data::Dataset input = dataset;
  int64_t steps = 0;
  if (options.steps_per_epoch) {
    if (*options.steps_per_epoch < 1)
      throw InvalidArgumentError(
          fmt::format("fit: steps_per_epoch must be >= 1, got {}", *options.steps_per_epoch));
    steps = *options.steps_per_epoch;
  } else if (data::is_infinite(dataset)) {
    throw InvalidArgumentError(
        "fit: the dataset is infinite (it ends in repeat()) and steps_per_epoch is not set, so "
        "an epoch would never end; pass FitOptions{.steps_per_epoch = N} (the batches that make "
        "one epoch) or give a finite dataset");
  } else {
    steps = count_batches(dataset);
    if (steps == 0) throw InvalidArgumentError("fit: the dataset is empty");
    input = dataset.repeat();
  }

  std::vector<std::string> names = metric_names_with_loss();
  auto history = std::make_shared<History>();
  Callbacks all = options.callbacks;
  if (options.verbose > 0)
    all.push_back(std::make_shared<ProgbarLogger>(options.verbose,
                                                  options.output.value_or(stdout_output()), names));
  all.push_back(history);
  CallbackList callbacks(
      all, this, {{"epochs", options.epochs}, {"steps", steps}, {"verbose", options.verbose}});
  stop_training = false;
  resume_from.reset();
  est::Estimator& est = estimator();  // model_dir exists for on_train_begin
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
  for (int epoch = first_epoch; epoch < options.epochs && !stop_training; ++epoch) {
    callbacks.on_epoch_begin(epoch, {});
    int64_t skip = epoch == first_epoch ? first_step : 0;
    auto hook = std::make_shared<BatchHook>(callbacks, *this, names, skip, learning_rate_);
    {
      std::shared_ptr<void> done(nullptr, [this](void*) { training_session_ = nullptr; });
      est.train(input_fn_of(input), {hook}, steps - skip);
    }
    Logs logs = hook->logs();
    if (hook->batches() < steps - skip && !stop_training) {
      log::warning(
          "Your input ran out of data; interrupting training. Make sure that your dataset can "
          "generate at least `steps_per_epoch * epochs` batches ({} batches here)",
          steps * options.epochs);
      stop_training = true;
    }
    if (options.validation_data && (epoch + 1) % options.validation_freq == 0) {
      auto val =
          evaluate(*options.validation_data, {.steps = options.validation_steps, .verbose = 0});
      for (const auto& [name, value] : val) logs["val_" + name] = value;
    }
    callbacks.on_epoch_end(epoch, logs);
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
  Metrics results = estimator().evaluate(input_fn_of(dataset), options.steps, {counter});
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
