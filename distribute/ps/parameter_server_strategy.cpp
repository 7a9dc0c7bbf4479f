// ParameterServerStrategy: TF_CONFIG to the ps connections and the gradient path, and the end
// of the job.
#include "distribute/ps/parameter_server_strategy.h"

#include <fmt/format.h>

#include "distribute/cluster/multi_worker_util.h"
#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_gradient_path.h"
#include "distribute/ps/ps_variables.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {

struct ParameterServerStrategy::Setup {
  TfConfig config;
  ParameterServerOptions options;
  std::string task_name;
  std::unique_ptr<PsPlacement> placement;
  std::unique_ptr<PsClient> client;
  std::unique_ptr<PsVariables> variables;
  std::shared_ptr<const VariablePlacement> variable_placement;
  // The worker's gradient path and its variable home: one object (the push and the pull share
  // the cache's state).
  std::shared_ptr<PsGradientPath> gradient_path;
  bool is_chief = true;
  int local_tasks = 1;
  int64_t num_input_pipelines = 1;
  int64_t input_pipeline_id = 0;
};

namespace {

TfConfig tf_config_from_env() {
  std::optional<std::string> text = tf_config_from_environment();
  return text ? parse_tf_config(*text) : TfConfig{};
}

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(ParameterServerOptions options)
    : ParameterServerStrategy(tf_config_from_env(), std::move(options)) {}

ParameterServerStrategy::ParameterServerStrategy(const TfConfig& config,
                                                 ParameterServerOptions options)
    : ParameterServerStrategy([&] {
        Setup setup{.config = config, .options = options};
        if (options.sync_replicas) options.sync_replicas->validate();
        const ClusterSpec& cluster = config.cluster;
        int num_ps = cluster.num_tasks(TaskType::kPs);
        if (!cluster.empty())
          setup.local_tasks = num_local_tasks(cluster, config.task, this_host_names());
        bool trains = config.task && (config.task->type == TaskType::kChief ||
                                      config.task->type == TaskType::kMaster ||
                                      config.task->type == TaskType::kWorker);
        if (num_ps == 0 || !trains) {
          // Local: the variables on the host, updated once (TF without a cluster). A ps task
          // or the evaluator computes locally too (it does not train against the ps tasks).
          setup.variable_placement = central_placement();
          setup.is_chief = !config.task || distribute::is_chief(cluster, *config.task);
          return setup;
        }
        TaskSpec task = *config.task;
        setup.is_chief = distribute::is_chief(cluster, task);
        setup.task_name = fmt::format("{} {}", task.type, task.index);
        setup.num_input_pipelines = worker_count(cluster, TaskType::kWorker);
        setup.input_pipeline_id = task.type == TaskType::kMaster ? 0 : id_in_cluster(cluster, task);
        log::info(
            "ParameterServerStrategy: cluster_spec = {}, task_type = '{}', task_id = {}, "
            "num_ps_replicas = {}, is_chief = {}",
            cluster.to_string(), task.type, task.index, num_ps, setup.is_chief ? "True" : "False");
        setup.placement =
            std::make_unique<PsPlacement>(num_ps, options.load_balancing, options.partitioner);
        // Connected when training starts, as TF's constructor only records the cluster: the
        // ps tasks may come up later, their hosts may not resolve yet.
        setup.client = std::make_unique<PsClient>(
            PsClientOptions{.ps_addresses = cluster.job_tasks(TaskType::kPs),
                            .token = options.token,
                            .task_name = setup.task_name,
                            .connect_timeout = options.session_creation_timeout,
                            .health = {},
                            .heartbeat_timeout = options.heartbeat_timeout,
                            .connect_at_first_use = true});
        setup.variables = std::make_unique<PsVariables>(*setup.client, *setup.placement);
        setup.variable_placement = mirrored_placement();  // the worker's store: a cache
        if (options.sync_replicas) {
          int trainers = static_cast<int>(setup.num_input_pipelines);
          if (options.sync_replicas->resolved_total_num_replicas() != trainers)
            log::warning(
                "ParameterServerStrategy: SyncReplicas total_num_replicas = {} but TF_CONFIG lists "
                "{} training tasks: each step releases {} tokens",
                options.sync_replicas->resolved_total_num_replicas(), trainers,
                options.sync_replicas->tokens_per_step());
        }
        setup.gradient_path = std::make_shared<PsGradientPath>(
            *setup.variables, setup.is_chief, options.session_creation_timeout,
            options.push_ahead_bytes, options.sync_replicas, setup.task_name);
        return setup;
      }()) {}

ParameterServerStrategy::ParameterServerStrategy(Setup setup)
    : Strategy(parse_devices({setup.options.device}), nullptr, setup.options.seed,
               setup.variable_placement, setup.gradient_path, setup.gradient_path, setup.is_chief,
               setup.local_tasks),
      config_(std::move(setup.config)),
      task_name_(std::move(setup.task_name)),
      num_input_pipelines_(setup.num_input_pipelines),
      input_pipeline_id_(setup.input_pipeline_id),
      placement_(std::move(setup.placement)),
      client_(std::move(setup.client)),
      variables_(std::move(setup.variables)) {
  log::info("Using {}", description());
}

std::shared_ptr<ParameterServerStrategy> ParameterServerStrategy::from_env(
    ParameterServerOptions options) {
  return std::make_shared<ParameterServerStrategy>(std::move(options));
}

ParameterServerStrategy::~ParameterServerStrategy() {
  if (!variables_ || failed_) return;
  variables_->finish(task_name_, is_chief());
}

std::string ParameterServerStrategy::description() const {
  std::string text = Strategy::description();
  if (variables_)
    text += fmt::format(" with {} ps task{} (this is {})", num_ps(), num_ps() == 1 ? "" : "s",
                        task_name_);
  return text;
}

uint64_t ParameterServerStrategy::bytes_sent() const { return client_ ? client_->bytes_sent() : 0; }

uint64_t ParameterServerStrategy::bytes_received() const {
  return client_ ? client_->bytes_received() : 0;
}

int64_t ParameterServerStrategy::num_input_pipelines() const {
  return variables_ ? num_input_pipelines_ : Strategy::num_input_pipelines();
}

int64_t ParameterServerStrategy::input_pipeline_id() const {
  return variables_ ? input_pipeline_id_ : Strategy::input_pipeline_id();
}

void ParameterServerStrategy::report_error(const std::exception& error) noexcept {
  failed_ = true;
  if (variables_) variables_->abort(fmt::format("{} failed: {}", task_name_, error.what()));
}

}  // namespace est::distribute
