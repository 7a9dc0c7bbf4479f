// run_parameter_server: the job's optimizer from one model_fn call, then the PsServer.
#include "estimator/ps_task.h"

#include <fmt/format.h>

#include "estimator/loop_util.h"
#include "estimator/params.h"
#include "ops/error.h"
#include "ops/logging.h"
#if EST_HAVE_GRPC
#include "distribute/net/job_token.h"
#include "distribute/ps/ps_server.h"
#endif

namespace est::detail {
namespace {

// The optimizer of model_fn's train op, from one call on input_fn's first batch.
nn::optim::Optimizer job_optimizer(const Estimator& estimator, const InputFn& input_fn) {
  const RunConfig& config = estimator.config();
  nn::VariableStore scratch;
  EstimatorContext ctx(scratch, ModeKeys::kTrain, config.tf_random_seed.value_or(0),
                       estimator.params(), config);
  data::Dataset dataset = make_dataset(input_fn, ModeKeys::kTrain);
  data::Iterator iterator = dataset.iterator();
  std::optional<data::Element> batch = iterator.next();
  if (!batch)
    throw InvalidArgumentError(
        "ps task: input_fn's dataset is empty; the ps task calls model_fn once on its first "
        "batch to learn the job's optimizer");
  EstimatorSpec spec = call_model_fn(estimator.model_fn(), ctx, *batch, ModeKeys::kTrain, false);
  if (!spec.train_op.defined())
    throw InvalidArgumentError(
        "ps task: model_fn returned no train_op in TRAIN mode, so there is no optimizer to "
        "apply the workers' gradients with");
  return spec.train_op.optimizer();
}

}  // namespace

void run_parameter_server(const Estimator& estimator, const TrainSpec& train_spec) {
  const RunConfig& config = estimator.config();
  if (config.task_type != distribute::TaskType::kPs ||
      config.task_id >= config.cluster_spec.num_tasks(distribute::TaskType::kPs))
    throw InvalidArgumentError(
        fmt::format("run_parameter_server: this task ({} {}) is not a ps task of the cluster {}",
                    config.task_type, config.task_id, config.cluster_spec.to_string()));
#if EST_HAVE_GRPC
  nn::optim::Optimizer optimizer = job_optimizer(estimator, train_spec.input_fn);
  const distribute::ClusterSpec& cluster = config.cluster_spec;
  int workers = cluster.num_tasks(distribute::TaskType::kChief) +
                cluster.num_tasks(distribute::TaskType::kMaster) +
                cluster.num_tasks(distribute::TaskType::kWorker);
  // The task ParameterServerStrategy makes the chief (distribute::is_chief): the chief, the
  // master, or worker 0 in a cluster of workers only.
  distribute::TaskType chief =
      cluster.has_job(distribute::TaskType::kChief)    ? distribute::TaskType::kChief
      : cluster.has_job(distribute::TaskType::kMaster) ? distribute::TaskType::kMaster
                                                       : distribute::TaskType::kWorker;
  distribute::PsServer server({
      .address = config.cluster_spec.task_address(distribute::TaskType::kPs, config.task_id),
      .token = distribute::job_token_from_environment(),
      .task_index = config.task_id,
      .num_workers = workers,
      .chief = fmt::format("{} 0", chief),
      .optimizer = optimizer,
  });
  log::info("Parameter server ps {} serving at {} ({} optimizer) until the job ends",
            config.task_id, server.address(), optimizer.name());
  server.join();
  log::info("ps {}: the job is over; {} updates applied here", config.task_id,
            server.updates_applied());
  if (std::optional<distribute::PsServer::SyncStats> sync = server.sync_stats())
    log::info(
        "ps {}: {} synchronous steps applied ({} gradients averaged into each), {} stale "
        "gradients dropped",
        config.task_id, sync->steps, sync->options.replicas_to_aggregate, sync->stale_dropped);
#else
  (void)train_spec;
  throw UnimplementedError(
      "this build of est has no multi-process runtime (configured with -Dgrpc=disabled): a ps "
      "task cannot serve; rebuild with -Dgrpc=enabled");
#endif
}

}  // namespace est::detail
