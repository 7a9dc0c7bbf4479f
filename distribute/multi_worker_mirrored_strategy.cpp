// MultiWorkerMirroredStrategy: TF_CONFIG to a runtime and cross-device ops, TensorFlow's log
// lines, and the end of the job (in order, or with an error report).
#include "distribute/multi_worker_mirrored_strategy.h"

#include <fmt/format.h>

#include <fstream>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/cluster/multi_worker_util.h"
#include "distribute/collectives/nccl_collective_all_reduce.h"
#include "distribute/collectives/nccl_unique_id.h"
#include "distribute/net/coordination_client.h"
#include "distribute/net/job_token.h"
#include "distribute/net/ring.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {

struct MultiWorkerMirroredStrategy::Setup {
  TfConfig config;
  CommunicationOptions communication;
  MultiWorkerOptions options;
  std::shared_ptr<ClusterRuntime> runtime;
  std::shared_ptr<CollectiveAllReduce> ops;
  bool is_chief = true;
  int local_tasks = 1;
  CommunicationImplementation resolved = CommunicationImplementation::kRing;
};

namespace {

TfConfig tf_config_from_env() {
  std::optional<std::string> text = tf_config_from_environment();
  return text ? parse_tf_config(*text) : TfConfig{};
}

// This machine, as NCCL sees it: GPUs with one bus id on one machine are one GPU.
std::string machine_name() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  if (!boot.empty()) return boot;
  std::vector<std::string> names = this_host_names();
  return names.empty() ? "?" : names.front();
}

// Every task learns whether NCCL can join the job's GPUs (the same answer on every task):
// under AUTO, RING when it cannot; under NCCL, a FailedPreconditionError saying why.
CommunicationImplementation agree_on_nccl(ClusterRuntime& runtime,
                                          CommunicationImplementation requested,
                                          CommunicationImplementation resolved,
                                          [[maybe_unused]] const std::vector<Device>& devices) {
  bool usable = resolved == CommunicationImplementation::kNccl;
  std::vector<std::string> bus_ids;
#if EST_HAVE_CUDA
  if (usable) bus_ids = gpu_bus_ids(devices);
#endif
  std::vector<std::string> tasks;
  for (int r = 0; r < runtime.world(); ++r) tasks.push_back(runtime.describe(r));
  std::string why = nccl_unusable_reason(
      runtime.ring().all_gather(nccl_capability(machine_name(), usable, bus_ids),
                                "the choice of NCCL"),
      tasks);
  if (why.empty()) return CommunicationImplementation::kNccl;
  if (requested == CommunicationImplementation::kNccl)
    throw FailedPreconditionError(
        "MultiWorkerMirroredStrategy: communication NCCL cannot join "
        "the job's GPUs: " +
        why + "; use CommunicationImplementation::kRing or kAuto");
  if (usable) log::info("communication AUTO: RING, not NCCL, because {}", why);
  return CommunicationImplementation::kRing;
}

}  // namespace

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(CommunicationOptions communication,
                                                         MultiWorkerOptions options)
    : MultiWorkerMirroredStrategy(tf_config_from_env(), communication, std::move(options)) {}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(const TfConfig& config,
                                                         CommunicationOptions communication,
                                                         MultiWorkerOptions options)
    : MultiWorkerMirroredStrategy([&] {
        Setup setup{.config = config, .communication = communication, .options = options};
        // Before any rendezvous: NCCL on a worker without GPUs fails here, not in the job.
        const std::vector<Device> devices = parse_devices(options.devices);
        const CommunicationImplementation resolved =
            resolve_communication(communication.implementation, devices);
        const ClusterSpec& cluster = config.cluster;
        bool several =
            cluster.num_tasks(TaskType::kChief) + cluster.num_tasks(TaskType::kWorker) > 1;
        if (several && config.task && config.task->type == TaskType::kEvaluator) {
          // The evaluator evaluates on its own, outside the training job's collectives.
          log::info(
              "MultiWorkerMirroredStrategy on the evaluator: it takes no part in the "
              "training job's collectives and runs its local devices alone.");
          several = false;
        }
        if (several) {
          if (!config.task)
            throw InvalidArgumentError(
                "MultiWorkerMirroredStrategy: TF_CONFIG has a cluster of several tasks but no "
                "\"task\"; add {\"task\": {\"type\": \"worker\", \"index\": N}}");
          TaskSpec task = *config.task;
          if (task.type != TaskType::kChief && task.type != TaskType::kWorker)
            throw InvalidArgumentError(fmt::format(
                "MultiWorkerMirroredStrategy: a \"{}\" task does not train; only the chief and "
                "the workers do (train_and_evaluate gives the evaluator its own role)",
                task.type));
          log::info(
              "Running Distribute Coordinator with mode = 'independent_worker', cluster_spec = "
              "{}, task_type = '{}', task_id = {}, environment = {}, rpc_layer = '{}'",
              cluster.to_string(), task.type, task.index,
              config.environment.empty() ? "None" : "'" + config.environment + "'",
              config.rpc_layer.empty() ? "grpc" : config.rpc_layer);
          setup.runtime = std::make_shared<ClusterRuntime>(ClusterRuntime::Options{
              .cluster = cluster,
              .task = task,
              .token = options.token ? *options.token : job_token_from_environment(),
              .tls = options.tls ? *options.tls : TlsOptions::from_environment(),
              .session_creation_timeout = options.session_creation_timeout,
              .heartbeat_interval = options.heartbeat_interval,
              .heartbeat_timeout = options.heartbeat_timeout});
          setup.is_chief = setup.runtime->is_leader();
        }
        // Every task of the job on this host (the evaluator too) shares its cores.
        if (!cluster.empty())
          setup.local_tasks = num_local_tasks(cluster, config.task, this_host_names());
        setup.resolved = resolved;
        if (setup.runtime && communication.implementation != CommunicationImplementation::kRing)
          setup.resolved =
              agree_on_nccl(*setup.runtime, communication.implementation, resolved, devices);
        if (setup.resolved == CommunicationImplementation::kNccl) {
#if EST_HAVE_CUDA
          setup.ops = make_nccl_collective_all_reduce(setup.runtime, communication, devices,
                                                      options.session_creation_timeout);
#else
          throw FailedPreconditionError(  // resolve_communication rules this out
              "MultiWorkerMirroredStrategy: communication NCCL needs a build with CUDA");
#endif
        } else {
          setup.ops = std::make_shared<CollectiveAllReduce>(setup.runtime, communication);
        }
        return setup;
      }()) {
}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(Setup setup)
    : Strategy(parse_devices(setup.options.devices), setup.ops, setup.options.seed,
               mirrored_placement(), all_reduce_path(), replicas_home(), setup.is_chief,
               setup.local_tasks),
      config_(std::move(setup.config)),
      communication_(setup.communication),
      runtime_(std::move(setup.runtime)),
      barrier_timeout_(communication_.timeout_seconds
                           ? std::chrono::milliseconds(
                                 static_cast<int64_t>(*communication_.timeout_seconds * 1000))
                           : setup.options.session_creation_timeout) {
  std::string devices;
  for (const Device& device : this->devices())
    devices += (devices.empty() ? "" : ", ") + device.str();
  log::info("Using MultiWorkerMirroredStrategy with local_devices = ({}), communication = {}",
            devices, communication_name(setup.resolved));
}

std::shared_ptr<MultiWorkerMirroredStrategy> MultiWorkerMirroredStrategy::from_env(
    CommunicationOptions communication, MultiWorkerOptions options) {
  return std::make_shared<MultiWorkerMirroredStrategy>(communication, std::move(options));
}

MultiWorkerMirroredStrategy::~MultiWorkerMirroredStrategy() {
  if (!runtime_) return;
  if (failed_ || runtime_->coordination().has_error()) return;  // the runtime reports leaving
  try {
    shutdown();
  } catch (const std::exception& error) {
    log::error("{}: the orderly end of the job failed: {}", runtime_->task_name(), error.what());
  }
}

std::string MultiWorkerMirroredStrategy::description() const {
  std::string text = Strategy::description();
  if (runtime_)
    text += fmt::format(" on {} workers (this is {}, rank {})", num_workers(),
                        runtime_->task_name(), worker_index());
  return text;
}

void MultiWorkerMirroredStrategy::report_error(const std::exception& error) noexcept {
  failed_ = true;
  if (runtime_) runtime_->report_error(error);
}

void MultiWorkerMirroredStrategy::barrier(std::string_view what) {
  if (!runtime_) return;
  // Each call its own barrier: the service remembers who reached a barrier id.
  std::string id = fmt::format("{} #{}", what, ++barriers_);
  try {
    runtime_->coordination().barrier(id, barrier_timeout_);
  } catch (const Error& error) {
    failed_ = true;  // the job cannot end in order: the destructor must not wait for a shutdown
    throw_error(error.code(),
                fmt::format("{}: the barrier '{}' did not complete: {} (every worker must reach "
                            "the same barriers in the same order)",
                            runtime_->task_name(), what, error.what()));
  }
}

void MultiWorkerMirroredStrategy::shutdown() {
  if (runtime_) runtime_->shutdown();
}

}  // namespace est::distribute
