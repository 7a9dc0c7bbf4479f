// ReplicaContext: what a replica's step sees of its strategy (TF's replica context): the
// in-step collectives (all-reduce, the gradients' sum, the chief's initial values) that a
// GradientPath composes a step from, and the hand-over of the train op and apply_gradients to
// the strategy's gradient path (gradient_path.cpp) and of new variables and variable reads to
// its variable home (variable_home.h). A collective is two barrier
// crossings: every replica deposits its list and fresh output buffers; every replica thread then
// reduces its share of the elements and writes it into the shared outputs; then (several
// workers) replica 0 combines the outputs with the other processes while the others wait at a
// third crossing; then every replica continues.
#include <fmt/format.h>

#include <algorithm>

#include "distribute/collectives/through_host.h"
#include "distribute/replica_pool.h"
#include "distribute/sparse_all_reduce.h"
#include "distribute/strategy.h"
#include "nn/context_control.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/copy.h"
#include "ops/error.h"
#include "ops/logging.h"
#include "ops/math.h"

namespace est::distribute {
namespace {

bool any_gpu(const std::vector<Device>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
}

}  // namespace

int ReplicaContext::num_replicas_in_sync() const { return strategy_->num_replicas_in_sync(); }
int ReplicaContext::replica_id_in_sync_group() const {
  return strategy_->worker_index() * strategy_->num_local_replicas() + replica_id_;
}
Device ReplicaContext::device() const {
  return strategy_->devices()[static_cast<size_t>(replica_id_)];
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
  AbortableBarrier& barrier = *rendezvous_->barrier;
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
    if (across_workers && std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) {
          return !t.defined() || t.device().is_cpu();
        })) {  // scaled inside the collective, into fresh sums: the inputs may alias
      cross_device_ops_->reduce_scaled_across_workers(tensors, factors, describe("all-reduce"));
      return;
    }
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].defined() && (factors[i] != 1.0 || across_workers))
        tensors[i] = ops::mul(tensors[i], factors[i]);  // a fresh buffer: inputs may alias
    if (across_workers) reduce_across_workers(tensors);
    return;
  }
  AbortableBarrier& barrier = *rendezvous_->barrier;
  // One set of result buffers, replica 0's: the replicas are threads of one process, so each
  // takes handles on them instead of a copy of its own (the results are only read after).
  // With GPUs among the devices each replica needs its results on its own device: every
  // replica makes its own output buffers where its inputs are (its device; the host for the
  // gradients of central variables), and the cross-device ops write each.
  const bool per_device = any_gpu(strategy_->devices());
  std::vector<Tensor> outputs(tensors.size());
  if (replica_id_ == 0 || per_device)
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].defined())
        outputs[i] = Tensor::empty(tensors[i].shape(), tensors[i].dtype(), tensors[i].device());
  auto r = static_cast<size_t>(replica_id_);
  rendezvous_->inputs[r] = &tensors;
  rendezvous_->outputs[r] = &outputs;
  barrier.arrive_and_wait();
  std::vector<std::vector<Tensor>*> shared = rendezvous_->outputs;
  if (!per_device) shared.assign(shared.size(), rendezvous_->outputs[0]);
  if (replica_id_ != 0 && !per_device) outputs = *shared[0];
  try {
    cross_device_ops_->reduce_slice(factors, rendezvous_->inputs, shared, replica_id_,
                                    strategy_->num_local_replicas());
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
  CrossDeviceOps& cross_device_ops = *cross_device_ops_;
  if (cross_device_ops.reduces_device_tensors()) {
    cross_device_ops.reduce_across_workers(tensors, what);
    return;
  }
  through_host(tensors, [&](std::vector<Tensor>& host) {
    cross_device_ops.reduce_across_workers(host, what);
  });
}

void ReplicaContext::all_reduce_gradients(std::vector<nn::GradAndVar>& grads_and_vars) {
  std::vector<nn::MovingAverageUpdate> updates =
      nn::ContextControl(model_context()).take_moving_average_updates();
  sync_step(grads_and_vars, 1.0, updates);
  if (replicas_->placement().applies_updates(replica_id_))
    for (const auto& update : updates) nn::apply_moving_average(update);
}

void ReplicaContext::sync_step(std::vector<nn::GradAndVar>& grads_and_vars, double scale,
                               std::vector<nn::MovingAverageUpdate>& updates, Tensor* extra) {
  // Row-sparse gradients first: gathered (they then stay out of the dense list, undefined
  // there) or densified into it, whichever moves fewer bytes.
  gather_row_sparse_gradients(*this, grads_and_vars, scale);
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

bool ReplicaContext::applies_updates() const { return gradient_path_->applies_updates(*this); }

bool ReplicaContext::synchronize(std::vector<nn::GradAndVar>& grads_and_vars, bool aggregate) {
  if (aggregate) gradient_path_->combine(*this, grads_and_vars);
  return gradient_path_->applies_updates(*this);
}

void ReplicaContext::after_update() { gradient_path_->after_update(*this); }

void ReplicaContext::initialize_variable(const std::string& name, Tensor& value) {
  variable_home_->initialize_variable(*this, name, value);
}

void ReplicaContext::read_variable(const std::string& name, Tensor& value, const Tensor* rows) {
  variable_home_->read_variable(*this, name, value, rows);
}

void ReplicaContext::wait_for_local_replicas() { rendezvous_->barrier->arrive_and_wait(); }

void ReplicaContext::broadcast_initial_value(const std::string& name, Tensor& value) {
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
    rendezvous_->received = value;
  });
  if (replica_id_ != 0) {
    value.copy_from(rendezvous_->received);   // any devices
    rendezvous_->barrier->arrive_and_wait();  // replica 0 may not reuse the slot before
  } else {
    rendezvous_->barrier->arrive_and_wait();
  }
}

void ReplicaContext::run_train_op(const nn::TrainOp& train_op, double gradient_scale,
                                  nn::ModelContext* ctx, Tensor* loss_sum) {
  nn::ModelContext& context = ctx ? *ctx : model_context();
  if (num_replicas_in_sync() > 1 && !nn::ContextControl(context).defers_moving_averages())
    throw FailedPreconditionError(
        std::string(strategy_->name()) +
        "::run_train_op: the model context does not defer its moving "
        "averages, so batch norm statistics would not be averaged over "
        "replicas; configure it first with strategy.configure_replica_context(ctx), "
        "or use the replica's model_context()");
  gradient_path_->apply(*this, train_op, gradient_scale, context, loss_sum);
}

nn::GradientTransform ReplicaContext::gradient_transform() {
  return [this](std::vector<nn::GradAndVar>& grads_and_vars) {
    gradient_path_->combine(*this, grads_and_vars);
  };
}

}  // namespace est::distribute
