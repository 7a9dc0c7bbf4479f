// Strategy: devices, the replica sets and threads, run/reduce, and the reductions across
// workers. ReplicaContext, the in-step side, is replica_context.cpp.
#include "distribute/strategy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "distribute/collectives/through_host.h"
#include "distribute/distributed_dataset.h"
#include "distribute/replica_pool.h"
#include "nn/context_control.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/error.h"
#include "ops/logging.h"
#include "ops/math.h"
#if EST_HAVE_CUDA
#include "ops/cuda/runtime.h"
#endif

namespace est::distribute {
std::vector<Device> parse_devices(const std::vector<std::string>& names) {
  std::vector<Device> devices;
  devices.reserve(names.size());
  for (const auto& name : names) devices.push_back(Device::parse(name));
  return devices;
}

std::vector<std::string> local_devices() {
  std::vector<std::string> devices;
#if EST_HAVE_CUDA
  if (ops::backend_available(ops::Backend::kCuda))
    for (int i = 0; i < ops::cuda::device_count(); ++i) devices.push_back(Device::cuda(i).str());
#endif
  if (devices.empty()) devices.emplace_back("/cpu:0");
  return devices;
}

bool all_gpus(const std::vector<Device>& devices) {
  return !devices.empty() &&
         std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
}

namespace {

// An element with every tensor on `device` (one copy each; those already there are kept).
data::Element element_on(const data::Element& element, Device device) {
  data::Element out = element;
  auto move = [&](Tensor& t) {  // CPU devices share host memory: no copy between them
    if (t.defined() && t.device() != device && !(t.device().is_cpu() && device.is_cpu()))
      t = ops::copy_to(t, device);
  };
  for (auto& [name, tensor] : out.features) move(tensor);
  move(out.labels);
  move(out.value);
  return out;
}

}  // namespace

data::Element copy_to_device(const data::Element& element, Device device) {
  ops::NoGradGuard no_grad;
  return element_on(element, device);
}

ReplicaSet::ReplicaSet(std::shared_ptr<const VariablePlacement> placement,
                       std::vector<std::unique_ptr<nn::VariableStore>> stores,
                       std::vector<std::unique_ptr<nn::ModelContext>> contexts)
    : placement_(std::move(placement)),
      stores_(std::move(stores)),
      contexts_(std::move(contexts)) {}

nn::VariableStore& ReplicaSet::store(int replica) {
  return *stores_.at(placement_->store_index(replica));
}

nn::ModelContext& ReplicaSet::context(int replica) {
  return *contexts_.at(static_cast<size_t>(replica));
}

std::vector<nn::VariableStore*> ReplicaSet::stores() {
  std::vector<nn::VariableStore*> out;
  for (auto& store : stores_) out.push_back(store.get());
  return out;
}

Strategy::Strategy(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> cross_device_ops,
                   uint64_t seed, std::shared_ptr<const VariablePlacement> placement,
                   std::shared_ptr<GradientPath> gradient_path,
                   std::shared_ptr<VariableHome> variable_home, bool is_chief, int local_processes)
    : devices_(std::move(devices)),
      cross_device_ops_(cross_device_ops ? std::move(cross_device_ops)
                                         : std::make_shared<ReductionToOneDevice>()),
      placement_(placement ? std::move(placement) : mirrored_placement()),
      gradient_path_(gradient_path ? std::move(gradient_path) : all_reduce_path()),
      variable_home_(variable_home ? std::move(variable_home) : replicas_home()),
      is_chief_(is_chief),
      seed_(seed) {
  if (devices_.empty())
    throw InvalidArgumentError("Strategy: no devices given; name at least one, e.g. \"/cpu:0\"");
  for (size_t i = 0; i < devices_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (devices_[i] == devices_[j])
        throw InvalidArgumentError("Strategy: device " + devices_[i].str() +
                                   " is listed twice; each replica needs its own device");
  for (const Device& device : devices_)
    if (device.is_cuda() && !ops::backend_available(ops::Backend::kCuda))
      throw InvalidArgumentError(
          "Strategy: device " + device.str() + " is a GPU, but the CUDA backend cannot run it (" +
          ops::backend_unavailable_reason(ops::Backend::kCuda) +
          "); use CPU devices (\"/cpu:0\", \"/cpu:1\", ...) or local_devices()");
#if EST_HAVE_CUDA
  for (const Device& device : devices_)
    if (device.is_cuda() && device.index >= ops::cuda::device_count())
      throw InvalidArgumentError(
          fmt::format("Strategy: device {} does not exist; this process sees {} GPU(s) ({})",
                      device.str(), ops::cuda::device_count(), fmt::join(local_devices(), ", ")));
#endif
  cross_device_ops_->check_devices(devices_);
  int replicas = num_local_replicas();
  // The process's share of the host (ops/backend.h's rule), divided among its replicas.
  threads_per_replica_ = std::max(1, ops::threads_for_local_processes(local_processes) / replicas);
  overlap_reduction_ = ops::available_cores() / std::max(1, local_processes) >= 2;
  if (const char* value = std::getenv("EST_OVERLAP_GRADIENT_REDUCTION"))
    overlap_reduction_ = std::string_view(value) != "0";
  replicas_ = make_replicas([seed](nn::VariableStore& store, int /*replica*/) {
    return std::make_unique<nn::ModelContext>(store, nn::Mode::kTrain, seed);
  });
  pool_ = std::make_unique<ReplicaPool>(replicas, threads_per_replica_);
  rendezvous_.barrier = &pool_->barrier();
  rendezvous_.inputs.assign(static_cast<size_t>(replicas), nullptr);
  rendezvous_.outputs.assign(static_cast<size_t>(replicas), nullptr);
}

Strategy::~Strategy() = default;

std::unique_ptr<ReplicaSet> Strategy::make_replicas(const ContextFactory& factory) const {
  std::vector<std::unique_ptr<nn::VariableStore>> stores = placement_->make_stores(devices_);
  std::vector<std::unique_ptr<nn::ModelContext>> contexts;
  for (int r = 0; r < num_local_replicas(); ++r) {
    contexts.push_back(factory(*stores.at(placement_->store_index(r)), r));
    nn::ContextControl(*contexts.back()).set_device(devices_[static_cast<size_t>(r)]);
    configure_replica_context(*contexts.back());
  }
  return std::make_unique<ReplicaSet>(placement_, std::move(stores), std::move(contexts));
}

void Strategy::configure_replica_context(nn::ModelContext& ctx) const {
  bool replicated = num_replicas_in_sync() > 1;
  nn::ContextControl control(ctx);
  control.set_defer_moving_averages(replicated || gradient_path_->takes_moving_averages());
  control.set_shares_store(num_local_replicas() > 1 && placement_->shared());
}

std::string Strategy::description() const {
  std::string text = std::string(name()) + " with devices (";
  for (size_t i = 0; i < devices_.size(); ++i) text += (i ? ", " : "") + devices_[i].str();
  text += ")";
  text += placement_->describe();
  return text;
}

data::InputContext Strategy::input_context(std::optional<int64_t> pipeline_id) const {
  int64_t id = pipeline_id.value_or(input_pipeline_id());
  if (id < 0 || id >= num_input_pipelines())
    throw InvalidArgumentError(fmt::format(
        "{}::input_context: pipeline id {} out of range; there is one input pipeline per worker, "
        "ids 0 to {}",
        name(), id, num_input_pipelines() - 1));
  return {.num_input_pipelines = num_input_pipelines(),
          .input_pipeline_id = id,
          .num_replicas_in_sync = num_replicas_in_sync()};
}

void Strategy::check_replica(int replica, const char* where) const {
  if (replica < 0 || replica >= num_local_replicas())
    throw InvalidArgumentError(std::string(where) + ": replica " + std::to_string(replica) +
                               " out of range [0, " + std::to_string(num_local_replicas()) + ")");
}

nn::VariableStore& Strategy::store(int replica) {
  check_replica(replica, "Strategy::store");
  return replicas_->store(replica);
}

nn::ModelContext& Strategy::model_context(int replica) {
  check_replica(replica, "Strategy::model_context");
  return replicas_->context(replica);
}

PerReplica Strategy::run(const StepFn& step_fn,
                         const std::vector<data::Element>& per_replica_inputs) {
  return run(*replicas_, step_fn, per_replica_inputs);
}

PerReplica Strategy::run(ReplicaSet& replicas, const StepFn& step_fn,
                         const std::vector<data::Element>& per_replica_inputs) {
  size_t count = devices_.size();
  if (replicas.size() != num_local_replicas())
    throw InvalidArgumentError(
        fmt::format("{}::run: a replica set of {} replicas, made by another "
                    "strategy; this one has {}",
                    name(), replicas.size(), count));
  if (!per_replica_inputs.empty() && per_replica_inputs.size() != count)
    throw InvalidArgumentError(std::string(name()) + "::run: got " +
                               std::to_string(per_replica_inputs.size()) + " inputs for " +
                               std::to_string(count) +
                               " replicas; pass one per replica (distribute_dataset makes them)");
  static const data::Element kNoInput;
  PerReplica result;
  result.values.resize(count);
  // The replica threads do not inherit the caller's thread-local modes (a NoGradGuard around
  // evaluation, a BackendGuard), so each step takes them on for its duration.
  const bool grad_enabled = ops::grad_enabled();
  const std::optional<ops::Backend> cpu_backend = ops::forced_cpu_backend();
  pool_->run([&](int replica) {
    std::optional<ops::NoGradGuard> no_grad;
    if (!grad_enabled) no_grad.emplace();
    std::optional<ops::BackendGuard> backend;
    if (cpu_backend) backend.emplace(*cpu_backend);
    // The replica's batch on its device: one copy per tensor per step.
    data::Element on_device;
    if (!per_replica_inputs.empty())
      on_device = copy_to_device(per_replica_inputs[static_cast<size_t>(replica)],
                                 devices_[static_cast<size_t>(replica)]);
    const data::Element& input = per_replica_inputs.empty() ? kNoInput : on_device;
    ReplicaContext context(*this, rendezvous_, *cross_device_ops_, *gradient_path_, *variable_home_,
                           replicas, replica, input);
    // For the step, the replica's model context reaches its replica (apply_gradients,
    // get_variable's initial values) through a member, not a thread-local.
    nn::ModelContext& model_context = replicas.context(replica);
    nn::ContextControl control(model_context);
    control.set_replica_sync(&context);
    struct ClearReplicaSync {
      nn::ContextControl control;
      ~ClearReplicaSync() { control.set_replica_sync(nullptr); }
    } clear{control};
    variable_home_->before_step(context);
    result.values[static_cast<size_t>(replica)] = step_fn(context);
  });
  return result;
}

Tensor Strategy::reduce(ReduceOp op, const PerReplica& value, std::optional<int> axis) {
  if (value.values.empty())
    throw InvalidArgumentError(std::string(name()) + "::reduce: no per-replica values");
  ops::NoGradGuard no_grad;
  Tensor total;
  double count = 0;  // what kMean divides by
  for (size_t r = 0; r < value.size(); ++r) {
    const Tensor& v = value[r];
    if (!v.defined())
      throw InvalidArgumentError(std::string(name()) + "::reduce: replica " + std::to_string(r) +
                                 " returned no value");
    Tensor part = v;
    if (axis) {
      if (*axis < -v.rank() || *axis >= v.rank())
        throw InvalidArgumentError(std::string(name()) + "::reduce: axis " + std::to_string(*axis) +
                                   " out of range for a rank-" + std::to_string(v.rank()) +
                                   " value of replica " + std::to_string(r));
      count += static_cast<double>(v.dim(*axis));
      part = ops::sum(v, {*axis});
    } else {
      count += 1;
    }
    if (total.defined() && part.shape() != total.shape())
      throw InvalidArgumentError(std::string(name()) + "::reduce: replica " + std::to_string(r) +
                                 " returned another shape than replica 0; values to reduce "
                                 "must have the same shape on every replica");
    // Summed on replica 0's device (values on other devices are copied there first).
    if (total.defined() && part.device() != total.device()) part = part.to(total.device());
    total = total.defined() ? ops::add(total, part) : part.clone();
  }
  if (num_workers() > 1) {
    DType dtype = total.dtype();
    std::vector<Tensor> sums{ops::cast(total, DType::kF64), Tensor::scalar(count, DType::kF64)};
    through_host(sums, [&](std::vector<Tensor>& host) {
      cross_device_ops_->reduce_across_workers(host, "strategy.reduce");
    });
    total = ops::cast(sums[0], dtype);
    count = sums[1].item();
  }
  if (op == ReduceOp::kMean) total = ops::mul(total, 1.0 / count);
  return total;
}

DistributedDataset Strategy::distribute_dataset(const data::Dataset& dataset) const {
  return DistributedDataset(dataset, num_local_replicas(), num_workers(), worker_index());
}

void Strategy::all_reduce_gradients(ReduceOp op, std::vector<std::vector<Tensor>>& per_replica) {
  if (per_replica.size() != devices_.size())
    throw InvalidArgumentError(std::string(name()) + "::all_reduce_gradients: got " +
                               std::to_string(per_replica.size()) + " gradient lists for " +
                               std::to_string(devices_.size()) + " replicas");
  std::vector<std::vector<Tensor>*> lists;
  for (auto& list : per_replica) lists.push_back(&list);
  ops::NoGradGuard no_grad;
  // The local mean divides by the local count; the workers' sum then needs 1/workers more.
  all_reduce(*cross_device_ops_, op, lists);
  if (num_workers() == 1) return;
  std::vector<Tensor> sums = per_replica.front();
  through_host(sums, [&](std::vector<Tensor>& host) {
    cross_device_ops_->reduce_across_workers(host, "all_reduce_gradients");
  });
  for (Tensor& sum : sums)
    if (sum.defined() && op == ReduceOp::kMean) sum = ops::mul(sum, 1.0 / num_workers());
  for (size_t r = 0; r < per_replica.size(); ++r) {
    per_replica[r] = sums;
    for (Tensor& sum : per_replica[r])  // every replica's sums on its device (host: shared)
      if (sum.defined() && sum.device() != devices_[r] &&
          !(sum.device().is_cpu() && devices_[r].is_cpu()))
        sum = sum.to(devices_[r]);
  }
}

void Strategy::sum_across_workers(std::vector<Tensor>& values, const std::string& what) {
  if (num_workers() > 1)
    through_host(values, [&](std::vector<Tensor>& host) {
      cross_device_ops_->reduce_across_workers(host, what);
    });
}

void Strategy::barrier(std::string_view what) {
  if (num_workers() < 2) return;
  std::vector<Tensor> token{Tensor::from_vector(std::vector<double>{1.0}, {1})};
  sum_across_workers(token, "the barrier '" + std::string(what) + "'");
}

std::vector<std::string> Strategy::all_gather_workers(const std::string& mine,
                                                      const std::string& what) {
  return cross_device_ops_->all_gather_across_workers(mine, what);
}

void Strategy::broadcast_from_chief(std::vector<Tensor>& values, const std::string& what) {
  if (num_workers() > 1 && cross_device_ops_->reduces_device_tensors())
    cross_device_ops_->broadcast_from_chief(values, what);  // GPU tensors as they are (NCCL)
  else if (num_workers() > 1)
    through_host(values, [&](std::vector<Tensor>& host) {
      cross_device_ops_->broadcast_from_chief(host, what);
    });
}

}  // namespace est::distribute
