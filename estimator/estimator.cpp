// Estimator: construction (model_dir resolution, config checks, seed) and the checkpoint
// queries. The loops live in estimator_train.cpp, estimator_evaluate.cpp, estimator_predict.cpp.
#include "estimator/estimator.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <random>

#include "checkpoint/model_dir.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "distribute/strategy.h"
#include "ops/error.h"
#include "ops/logging.h"
#if EST_HAVE_GRPC
#include "distribute/ps/parameter_server_strategy.h"
#endif

namespace est {
namespace {

std::string make_temporary_model_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "est_model_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw PermissionDeniedError(fmt::format(
        "Estimator: could not create a temporary model directory like {}; set RunConfig::model_dir",
        pattern));
  return pattern;
}

// A task of a multi-worker cluster whose training stays in this process (an in-process
// strategy such as MirroredStrategy, or task fields with no strategy) trains alone on its whole
// input, and only the chief saves: TensorFlow does the same, silently. Said once, naming what
// to use instead.
void warn_if_training_alone(const RunConfig& config) {
  const auto& strategy = config.train_distribute;
  bool trains = config.task_type == distribute::TaskType::kChief ||
                config.task_type == distribute::TaskType::kMaster ||
                config.task_type == distribute::TaskType::kWorker;
  bool in_cluster = trains && (config.num_worker_replicas > 1 || !config.is_chief);
  if (!in_cluster || (strategy && strategy->trains_with_other_tasks())) return;
  log::warning(
      "{} {} is a task of a multi-worker cluster, but {} trains in this process only: this task "
      "trains alone on its whole input{}, not together with the others. To train as one job, "
      "set RunConfig::train_distribute to MultiWorkerMirroredStrategy::from_env() on every task",
      config.task_type, config.task_id,
      strategy ? fmt::format("{} (an in-process strategy)", strategy->name())
               : std::string("training without a distribution strategy"),
      config.is_chief ? "" : " and saves nothing (only the chief saves)");
}

// TF1's default: a chief or worker of a TF_CONFIG cluster with ps tasks and no train_distribute
// trains against the ps tasks (replica_device_setter placed the variables there), so it gets
// ParameterServerStrategy for that cluster. Like TF's constructor (tensorflow_estimator's
// estimator.py and run_config.py only record the cluster), this connects to nothing and reads
// no job token: the strategy connects when training starts, waiting for the ps tasks at most
// session_creation_timeout_secs.
void use_parameter_servers_by_default(RunConfig& config) {
  bool trains = config.task_type == distribute::TaskType::kChief ||
                config.task_type == distribute::TaskType::kMaster ||
                config.task_type == distribute::TaskType::kWorker;
  if (config.train_distribute || config.num_ps_replicas == 0 || !trains) return;
#if EST_HAVE_GRPC
  log::info(
      "TF_CONFIG lists {} ps task(s) and RunConfig has no train_distribute: training with "
      "ParameterServerStrategy (TensorFlow 1's replica_device_setter)",
      config.num_ps_replicas);
  distribute::TfConfig cluster{.cluster = config.cluster_spec,
                               .task = distribute::TaskSpec{config.task_type, config.task_id}};
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(config.session_creation_timeout_secs));
  config.train_distribute = std::make_shared<distribute::ParameterServerStrategy>(
      cluster, distribute::ParameterServerOptions{.session_creation_timeout = timeout});
#else
  throw UnimplementedError(
      "TF_CONFIG lists ps tasks, but this build of est has no multi-process runtime "
      "(-Dgrpc=disabled); rebuild with -Dgrpc=enabled");
#endif
}

}  // namespace

Estimator::Estimator(ModelFn model_fn, RunConfig config, Params params,
                     std::optional<checkpoint::WarmStartSettings> warm_start_from)
    : Estimator(std::move(model_fn), std::string(), std::move(config), std::move(params),
                std::move(warm_start_from)) {}

Estimator::Estimator(ModelFn model_fn, const std::string& model_dir, RunConfig config,
                     Params params, std::optional<checkpoint::WarmStartSettings> warm_start_from)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      params_(std::move(params)),
      warm_start_from_(std::move(warm_start_from)) {
  if (!model_fn_)
    throw InvalidArgumentError(
        "Estimator: model_fn is empty; pass a function returning an "
        "EstimatorSpec");
  if (config_.read_tf_config) config_ = config_.with_tf_config();  // as TF's RunConfig()
  config_.validate();
  use_parameter_servers_by_default(config_);
  if (!model_dir.empty() && !config_.model_dir.empty() && model_dir != config_.model_dir)
    throw InvalidArgumentError(fmt::format(
        "Estimator: model_dir is set both in the constructor ({}) and in RunConfig ({}) with "
        "different values; set it in one place",
        model_dir, config_.model_dir));
  if (!model_dir.empty()) config_.model_dir = model_dir;
  if (config_.model_dir.empty()) {
    config_.model_dir = make_temporary_model_dir();
    log::warning("Using temporary folder as model directory: {}", config_.model_dir);
  }
  checkpoint::check_model_dir(config_.model_dir);
  if (warm_start_from_ && warm_start_from_->ckpt_to_initialize_from.empty())
    throw InvalidArgumentError(
        "Estimator: warm_start_from.ckpt_to_initialize_from is empty; name a checkpoint or a "
        "model directory");
  seed_ = config_.tf_random_seed ? *config_.tf_random_seed : std::random_device{}();
  auto secs = config_.checkpoint_secs();
  auto steps = config_.checkpoint_steps();
  log::info(
      "Using config: {{'model_dir': '{}', 'tf_random_seed': {}, 'save_summary_steps': {}, "
      "'save_checkpoints_steps': {}, 'save_checkpoints_secs': {}, 'keep_checkpoint_max': {}, "
      "'keep_checkpoint_every_n_hours': {}, 'log_step_count_steps': {}, 'task_type': '{}', "
      "'task_id': {}, 'is_chief': {}, 'num_worker_replicas': {}, 'num_ps_replicas': {}}}",
      config_.model_dir, config_.tf_random_seed ? std::to_string(*config_.tf_random_seed) : "None",
      config_.save_summary_steps, steps ? std::to_string(*steps) : "None",
      secs ? fmt::format("{}", *secs) : "None", config_.keep_checkpoint_max,
      config_.keep_checkpoint_every_n_hours, config_.log_step_count_steps, config_.task_type,
      config_.task_id, config_.is_chief ? "True" : "False", config_.num_worker_replicas,
      config_.num_ps_replicas);
  warn_if_training_alone(config_);
}

std::string Estimator::eval_dir(const std::string& name) const {
  return (std::filesystem::path(config_.model_dir) / (name.empty() ? "eval" : "eval_" + name))
      .string();
}

std::optional<std::string> Estimator::latest_checkpoint() const {
  return checkpoint::latest_checkpoint(config_.model_dir);
}

std::vector<std::string> Estimator::get_variable_names() const {
  auto latest = latest_checkpoint();
  if (!latest)
    throw NotFoundError(
        fmt::format("get_variable_names: no checkpoint in {} yet; train first", config_.model_dir));
  std::vector<std::string> names;
  for (const checkpoint::TensorInfo& info : checkpoint::list_variables(*latest))
    names.push_back(info.name);
  return names;
}

Tensor Estimator::get_variable_value(const std::string& name) const {
  auto latest = latest_checkpoint();
  if (!latest)
    throw NotFoundError(fmt::format(
        "get_variable_value('{}'): no checkpoint in {} yet; train first", name, config_.model_dir));
  return checkpoint::load_variable(*latest, name);
}

}  // namespace est
