// PsGradientPath: push, pull, per-variable initialization, and the chief's checkpoint reads.
#include "distribute/ps/ps_gradient_path.h"

#include <fmt/format.h>

#include "distribute/strategy.h"
#include "nn/clipping.h"
#include "nn/model_context.h"
#include "nn/train_op.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/math.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";

}  // namespace

PsGradientPath::PsGradientPath(PsVariables& variables, bool is_chief,
                               std::chrono::milliseconds wait_for_chief,
                               std::optional<SyncReplicasOptions> sync, std::string task)
    : variables_(&variables), is_chief_(is_chief), wait_for_chief_(wait_for_chief) {
  if (sync) sync_ = std::make_unique<PsSyncStep>(variables, *sync, std::move(task), is_chief);
}

void PsGradientPath::place_global_step(nn::VariableStore& store) {
  if (global_step_placed_) return;
  Tensor step = nn::get_or_create_global_step(store);
  variables_->place(kGlobalStep, step);
  if (is_chief_) variables_->initialize({{kGlobalStep, step.clone()}});
  if (sync_) sync_->start(store, wait_for_chief_);
  global_step_placed_ = true;
}

void PsGradientPath::initialize_variable(ReplicaContext& replica, const std::string& name,
                                         Tensor& value) {
  std::lock_guard lock(mutex_);
  nn::VariableStore& store = replica.store();
  place_global_step(store);
  std::optional<nn::Variable> variable = store.find(name);
  if (!variable || !variable->trainable) return;  // stays on the worker (see the header)
  variables_->place(name, value);
  ops::NoGradGuard no_grad;
  if (is_chief_) {
    variables_->initialize({{name, value.clone()}});
  } else {
    value.copy_from(variables_->pull_variable(name, wait_for_chief_));
  }
}

void PsGradientPath::push(nn::VariableStore& store, std::vector<nn::GradAndVar>& grads) {
  std::lock_guard lock(mutex_);
  place_global_step(store);
  if (sync_) {
    sync_->step(store, grads);
    return;
  }
  int64_t seen = static_cast<int64_t>(nn::get_or_create_global_step(store).item());
  variables_->push_pull(grads, store, seen);
}

void PsGradientPath::apply(ReplicaContext& replica, const nn::TrainOp& train_op,
                           double gradient_scale, nn::ModelContext& ctx, Tensor* loss_sum) {
  std::vector<nn::GradAndVar> grads = train_op.compute_gradients();
  std::vector<nn::GradAndVar> present;
  {
    ops::NoGradGuard no_grad;
    for (nn::GradAndVar& entry : grads) {
      entry.densify();  // a row-sparse gradient (an embedding's) is pushed dense for now
      if (!entry.gradient.defined()) continue;
      entry.gradient = gradient_scale == 1.0 ? entry.gradient.detach()
                                             : ops::mul(entry.gradient.detach(), gradient_scale);
      present.push_back(std::move(entry));
    }
    if (std::optional<double> clip = train_op.optimizer().clip_norm()) {
      std::vector<Tensor> gradients;
      for (const nn::GradAndVar& entry : present) gradients.push_back(entry.gradient);
      nn::optim::ClippedTensors clipped = nn::optim::clip_by_global_norm(gradients, *clip);
      for (size_t i = 0; i < present.size(); ++i) present[i].gradient = clipped.tensors[i];
    }
    // This worker's own batch statistics (moving averages stay on the worker).
    for (const nn::MovingAverageUpdate& update : ctx.take_moving_average_updates())
      nn::apply_moving_average(update);
  }
  push(train_op.store(), present);
  if (loss_sum) *loss_sum = train_op.loss().detach().clone();
  (void)replica;
}

void PsGradientPath::combine(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads_and_vars) {
  std::vector<nn::GradAndVar> present;
  for (nn::GradAndVar& entry : grads_and_vars) {
    entry.summed_by = &replica;
    entry.densify();  // a row-sparse gradient (an embedding's) is pushed dense for now
    if (entry.gradient.defined()) present.push_back(entry);
  }
  {
    ops::NoGradGuard no_grad;
    for (const nn::MovingAverageUpdate& update :
         replica.model_context().take_moving_average_updates())
      nn::apply_moving_average(update);
  }
  push(replica.store(), present);
}

void PsGradientPath::before_checkpoint(nn::VariableStore& store) {
  std::lock_guard lock(mutex_);
  ops::NoGradGuard no_grad;
  for (const NamedTensor& t : variables_->pull_all()) {
    if (store.contains(t.name))
      store.assign(t.name, t.value);
    else
      store.create(t.name, t.value, false);
  }
}

void PsGradientPath::restore_state(const std::vector<std::pair<std::string, Tensor>>& values) {
  if (!is_chief_ || values.empty()) return;
  std::lock_guard lock(mutex_);
  std::vector<NamedTensor> state;
  for (const auto& [name, value] : values) state.push_back({name, value});
  variables_->initialize(state);
}

}  // namespace est::distribute
