// Strategy and ReplicaContext: the replica threads, the replica sets, run/reduce and the
// in-step all-reduce. A collective is two barrier crossings: every replica deposits its list
// and fresh output buffers; every replica thread then reduces its share of the elements and
// writes it into the shared outputs; then (several workers) replica 0 combines the outputs with
// the other processes while the others wait at a third crossing; then every replica continues.
#include "distribute/strategy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "distribute/distributed_dataset.h"
#include "distribute/replica_pool.h"
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
namespace {

// A bucket of gradients starts its reduction across workers once it holds this many bytes.
constexpr size_t kOverlapBucketBytes = size_t{1} << 20;

}  // namespace

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

bool any_gpu(const std::vector<Device>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
}

// `values` on the host for a collective over host buffers (the ring, the coordination
// service), then the results copied back into the tensors on their devices.
template <class Fn>
void through_host(std::vector<Tensor>& values, Fn&& collective) {
  bool on_device = false;
  for (const Tensor& v : values) on_device = on_device || (v.defined() && !v.device().is_cpu());
  if (!on_device) {
    collective(values);
    return;
  }
  ops::NoGradGuard no_grad;
  std::vector<Tensor> host(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].defined()) host[i] = values[i].to(Device::cpu()).clone();
  collective(host);
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].defined()) values[i].copy_from(host[i]);
}

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

nn::VariableStore& ReplicaSet::store(int replica) {
  return mirrored_ ? *stores_.at(static_cast<size_t>(replica)) : *stores_.front();
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
                   uint64_t seed, VariablePlacement placement, bool is_chief, int local_processes)
    : devices_(std::move(devices)),
      cross_device_ops_(cross_device_ops ? std::move(cross_device_ops)
                                         : std::make_shared<ReductionToOneDevice>()),
      placement_(placement),
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
  collective_slots_.assign(static_cast<size_t>(replicas), nullptr);
  collective_outputs_.assign(static_cast<size_t>(replicas), nullptr);
  pool_ = std::make_unique<ReplicaPool>(replicas, threads_per_replica_);
}

Strategy::~Strategy() = default;

std::unique_ptr<ReplicaSet> Strategy::make_replicas(const ContextFactory& factory) const {
  auto set = std::make_unique<ReplicaSet>();
  set->mirrored_ = variables_mirrored();
  for (int r = 0; r < num_local_replicas(); ++r) {
    // Mirrored: each replica's variables on its GPU (CPU devices share host memory: their
    // variables stay where they are made); central: one copy on the host.
    Device device = devices_[static_cast<size_t>(r)];
    if (set->stores_.empty() || set->mirrored_)
      set->stores_.push_back(std::make_unique<nn::VariableStore>(
          set->mirrored_ && device.is_cuda() ? device : Device::cpu()));
    set->contexts_.push_back(factory(*set->stores_.back(), r));
    set->contexts_.back()->set_device(device);
    configure_replica_context(*set->contexts_.back());
  }
  return set;
}

void Strategy::configure_replica_context(nn::ModelContext& ctx) const {
  bool replicated = num_replicas_in_sync() > 1;
  ctx.set_defer_moving_averages(replicated);
  ctx.set_shares_store(num_local_replicas() > 1 && !variables_mirrored());
}

std::string Strategy::description() const {
  std::string text = std::string(name()) + " with devices (";
  for (size_t i = 0; i < devices_.size(); ++i) text += (i ? ", " : "") + devices_[i].str();
  text += ")";
  if (!variables_mirrored()) text += " and variables on /cpu:0";
  return text;
}

data::InputContext Strategy::input_context(std::optional<int64_t> pipeline_id) const {
  int64_t id = pipeline_id.value_or(worker_index());
  if (id < 0 || id >= num_workers())
    throw InvalidArgumentError(fmt::format(
        "{}::input_context: pipeline id {} out of range; there is one input pipeline per worker, "
        "ids 0 to {}",
        name(), id, num_workers() - 1));
  return {.num_input_pipelines = num_workers(),
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
    ReplicaContext context(*this, replicas, replica, input);
    nn::CrossReplicaScope scope(&context);
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

int ReplicaContext::num_replicas_in_sync() const { return strategy_->num_replicas_in_sync(); }
int ReplicaContext::replica_id_in_sync_group() const {
  return strategy_->worker_index() * strategy_->num_local_replicas() + replica_id_;
}
Device ReplicaContext::device() const {
  return strategy_->devices_[static_cast<size_t>(replica_id_)];
}
nn::ModelContext& ReplicaContext::model_context() { return replicas_->context(replica_id_); }
nn::VariableStore& ReplicaContext::store() { return replicas_->store(replica_id_); }

std::string ReplicaContext::describe(const char* collective) {
  nn::VariableStore& variables = replicas_->store(0);
  if (variables.contains(nn::kGlobalStepName))
    return fmt::format("{} at step {}", collective, nn::read_global_step(variables));
  return collective;
}

void ReplicaContext::on_replica_zero(const std::function<void()>& work) {
  AbortableBarrier& barrier = strategy_->pool_->barrier();
  barrier.arrive_and_wait();
  if (replica_id_ == 0) {
    try {
      work();
    } catch (...) {
      barrier.abort();
      throw;
    }
  }
  barrier.arrive_and_wait();
}

void ReplicaContext::all_reduce(ReduceOp op, std::vector<Tensor>& tensors) {
  double factor = op == ReduceOp::kMean ? 1.0 / num_replicas_in_sync() : 1.0;
  reduce_scaled(tensors, std::vector<double>(tensors.size(), factor));
}

void ReplicaContext::reduce_scaled(std::vector<Tensor>& tensors,
                                   const std::vector<double>& factors) {
  bool across_workers = strategy_->num_workers() > 1;
  if (strategy_->num_local_replicas() == 1) {  // nothing to sum locally: only the factors
    ops::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].defined() && (factors[i] != 1.0 || across_workers))
        tensors[i] = ops::mul(tensors[i], factors[i]);  // a fresh buffer: inputs may alias
    if (across_workers) reduce_across_workers(tensors);
    return;
  }
  AbortableBarrier& barrier = strategy_->pool_->barrier();
  // One set of result buffers, replica 0's: the replicas are threads of one process, so each
  // takes handles on them instead of a copy of its own (the results are only read after).
  // With GPUs among the devices each replica needs its results on its own device: every
  // replica makes its own output buffers where its inputs are (its device; the host for the
  // gradients of central variables), and the cross-device ops write each.
  const bool per_device = any_gpu(strategy_->devices_);
  std::vector<Tensor> outputs(tensors.size());
  if (replica_id_ == 0 || per_device)
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].defined())
        outputs[i] = Tensor::empty(tensors[i].shape(), tensors[i].dtype(), tensors[i].device());
  auto r = static_cast<size_t>(replica_id_);
  strategy_->collective_slots_[r] = &tensors;
  strategy_->collective_outputs_[r] = &outputs;
  barrier.arrive_and_wait();
  std::vector<std::vector<Tensor>*> shared = strategy_->collective_outputs_;
  if (!per_device) shared.assign(shared.size(), strategy_->collective_outputs_[0]);
  if (replica_id_ != 0 && !per_device) outputs = *shared[0];
  try {
    strategy_->cross_device_ops_->reduce_slice(factors, strategy_->collective_slots_, shared,
                                               replica_id_, strategy_->num_local_replicas());
  } catch (...) {
    barrier.abort();
    throw;
  }
  if (across_workers) {
    // Replica 0 owns the outputs' tensors; the others hold handles on the same buffers, which
    // the cross-worker reduction writes in place.
    on_replica_zero([&] { reduce_across_workers(outputs); });
    if (per_device) {  // replica 0's sums over the job into this replica's buffers
      if (replica_id_ != 0)
        for (size_t i = 0; i < outputs.size(); ++i)
          if (outputs[i].defined()) outputs[i].copy_from((*shared[0])[i]);
      barrier.arrive_and_wait();  // replica 0's outputs stay until every replica has read them
    }
  } else {
    barrier.arrive_and_wait();
  }
  tensors = std::move(outputs);
}

void ReplicaContext::reduce_across_workers(std::vector<Tensor>& tensors) {
  std::string what = describe("all-reduce");
  CrossDeviceOps& cross_device_ops = *strategy_->cross_device_ops_;
  if (cross_device_ops.reduces_device_tensors()) {
    cross_device_ops.reduce_across_workers(tensors, what);
    return;
  }
  through_host(tensors, [&](std::vector<Tensor>& host) {
    cross_device_ops.reduce_across_workers(host, what);
  });
}

void ReplicaContext::all_reduce_gradients(std::vector<nn::GradAndVar>& grads_and_vars) {
  std::vector<nn::MovingAverageUpdate> updates = model_context().take_moving_average_updates();
  sync_step(grads_and_vars, 1.0, updates);
  finish_sync(updates);
}

void ReplicaContext::sync_step(std::vector<nn::GradAndVar>& grads_and_vars, double scale,
                               std::vector<nn::MovingAverageUpdate>& updates, Tensor* extra) {
  // Gradients and statistics travel in one collective: the gradients' sum is multiplied by
  // the loss scale, the statistics' sum by 1/replicas (their mean), in the same pass.
  std::vector<Tensor> tensors;
  std::vector<double> factors;
  tensors.reserve(grads_and_vars.size() + updates.size());
  for (const auto& entry : grads_and_vars) tensors.push_back(entry.gradient);
  factors.assign(grads_and_vars.size(), scale);
  for (const auto& update : updates) tensors.push_back(update.value);
  factors.resize(tensors.size(), 1.0 / num_replicas_in_sync());
  if (extra) {
    tensors.push_back(*extra);
    factors.push_back(1.0);
  }
  reduce_scaled(tensors, factors);
  for (size_t i = 0; i < grads_and_vars.size(); ++i) grads_and_vars[i].gradient = tensors[i];
  for (size_t i = 0; i < updates.size(); ++i) updates[i].value = tensors[grads_and_vars.size() + i];
  if (extra) *extra = tensors.back();
}

bool ReplicaContext::applies_updates() const {
  return strategy_->variables_mirrored() || replica_id_ == 0;
}

void ReplicaContext::finish_sync(std::vector<nn::MovingAverageUpdate>& updates) {
  if (applies_updates())
    for (const auto& update : updates) nn::apply_moving_average(update);
  presynced_ = true;
}

bool ReplicaContext::synchronize(std::vector<nn::GradAndVar>& grads_and_vars) {
  if (!presynced_) all_reduce_gradients(grads_and_vars);
  presynced_ = false;
  return applies_updates();
}

void ReplicaContext::initialize_variable(const std::string& name, Tensor& value) {
  if (strategy_->num_workers() == 1) return;
  std::string what = "the broadcast of the chief's initial value of " + name;
  on_replica_zero([&] {
    // The workers must be creating the same variable: compare first, then take the chief's.
    std::string mine =
        fmt::format("{} {} {}", name, dtype_name(value.dtype()), ops::shape_str(value.shape()));
    std::vector<std::string> all = strategy_->all_gather_workers(mine, what);
    for (size_t w = 1; w < all.size(); ++w)
      if (all[w] != all[0])
        throw InvalidArgumentError(fmt::format(
            "worker {} created variable '{}' where the chief (worker 0) created '{}': every "
            "worker must run the same model_fn",
            w, all[w], all[0]));
    std::vector<Tensor> values{value};
    strategy_->broadcast_from_chief(values, what);
    strategy_->initial_value_ = value;
  });
  if (replica_id_ != 0) {
    value.copy_from(strategy_->initial_value_);     // any devices
    strategy_->pool_->barrier().arrive_and_wait();  // replica 0 may not reuse the slot before
  } else {
    strategy_->pool_->barrier().arrive_and_wait();
  }
}

void ReplicaContext::after_update() {
  if (!strategy_->variables_mirrored()) strategy_->pool_->barrier().arrive_and_wait();
}

void ReplicaContext::run_train_op(const nn::TrainOp& train_op, double gradient_scale,
                                  nn::ModelContext* ctx, Tensor* loss_sum) {
  nn::ModelContext& context = ctx ? *ctx : model_context();
  if (num_replicas_in_sync() > 1 && !context.defers_moving_averages())
    throw FailedPreconditionError(std::string(strategy_->name()) +
                                  "::run_train_op: the model context does not defer its moving "
                                  "averages, so batch norm statistics would not be averaged over "
                                  "replicas; call ctx.set_defer_moving_averages(true) on it");
  if (strategy_->num_local_replicas() == 1 && strategy_->num_workers() > 1 &&
      strategy_->overlaps_gradient_reduction()) {
    run_train_op_overlapped(train_op, gradient_scale, context, loss_sum);
    return;
  }
  std::vector<nn::GradAndVar> grads = train_op.compute_gradients();
  std::vector<nn::MovingAverageUpdate> updates = context.take_moving_average_updates();
  if (loss_sum) {
    ops::NoGradGuard no_grad;
    *loss_sum = train_op.loss().detach().clone();
  }
  sync_step(grads, gradient_scale, updates, loss_sum);
  finish_sync(updates);
  nn::CrossReplicaScope scope(this);  // apply() goes through synchronize / after_update
  train_op.apply(std::move(grads));
}

void ReplicaContext::run_train_op_overlapped(const nn::TrainOp& train_op, double gradient_scale,
                                             nn::ModelContext& context, Tensor* loss_sum) {
  CrossDeviceOps& ops = *strategy_->cross_device_ops_;
  std::string what = describe("all-reduce");
  std::vector<std::unique_ptr<PendingReduction>> pending;
  // A transport over host buffers reduces host copies of a GPU replica's tensors (each copy
  // is made when its bucket starts), and the sums come back to the device.
  const bool staged = !device().is_cpu() && !ops.reduces_device_tensors();
  auto to_transport = [&](Tensor t) { return staged && t.defined() ? t.to(Device::cpu()) : t; };
  auto from_transport = [&](Tensor t) { return staged && t.defined() ? t.to(device()) : t; };
  // What the forward pass already knows travels first: the moving statistics (averaged over
  // replicas) and the loss (summed, for the log).
  std::vector<nn::MovingAverageUpdate> updates = context.take_moving_average_updates();
  std::vector<Tensor> known;
  std::vector<double> known_factors;
  for (const auto& update : updates) {
    known.push_back(to_transport(update.value));
    known_factors.push_back(1.0 / num_replicas_in_sync());
  }
  if (loss_sum) {
    ops::NoGradGuard no_grad;
    known.push_back(to_transport(train_op.loss().detach()));
    known_factors.push_back(1.0);
  }
  if (!known.empty()) pending.push_back(ops.start_reduce(known, known_factors, what));
  // Then the gradients, a bucket at a time, in the order the backward pass completes them (the
  // same on every worker: it depends only on the model).
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> bucket;
  std::vector<Tensor> bucket_tensors;
  size_t bucket_bytes = 0;
  auto start_bucket = [&] {
    if (bucket.empty()) return;
    pending.push_back(ops.start_reduce(std::move(bucket_tensors),
                                       std::vector<double>(bucket.size(), gradient_scale), what));
    buckets.push_back(std::move(bucket));
    bucket.clear();
    bucket_tensors.clear();
    bucket_bytes = 0;
  };
  std::vector<nn::GradAndVar> grads =
      train_op.compute_gradients([&](size_t index, const Tensor& gradient) {
        bucket.push_back(index);
        bucket_tensors.push_back(to_transport(gradient));
        bucket_bytes += gradient.nbytes();
        if (bucket_bytes >= kOverlapBucketBytes) start_bucket();
      });
  start_bucket();
  size_t next = 0;
  if (!known.empty()) {
    std::vector<Tensor> sums = pending[next++]->wait();
    for (size_t i = 0; i < updates.size(); ++i) updates[i].value = from_transport(sums[i]);
    if (loss_sum) *loss_sum = sums.back();  // read by the host
  }
  for (const std::vector<size_t>& indices : buckets) {
    std::vector<Tensor> sums = pending[next++]->wait();
    for (size_t k = 0; k < indices.size(); ++k)
      grads[indices[k]].gradient = from_transport(sums[k]);
  }
  finish_sync(updates);
  nn::CrossReplicaScope scope(this);  // apply() goes through synchronize / after_update
  train_op.apply(std::move(grads));
}

nn::GradientTransform ReplicaContext::gradient_transform() {
  return
      [this](std::vector<nn::GradAndVar>& grads_and_vars) { all_reduce_gradients(grads_and_vars); };
}

}  // namespace est::distribute
