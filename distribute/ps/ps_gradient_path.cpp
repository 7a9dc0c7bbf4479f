// PsGradientPath: push, pull, per-variable initialization, and the chief's checkpoint reads.
#include "distribute/ps/ps_gradient_path.h"

#include <fmt/format.h>

#include "distribute/strategy.h"
#include "nn/context_control.h"
#include "nn/model_context.h"
#include "nn/train_op.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/indexed_slices.h"
#include "ops/math.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";

}  // namespace

PsGradientPath::PsGradientPath(PsVariables& variables, bool is_chief,
                               std::chrono::milliseconds wait_for_chief, size_t push_ahead_bytes,
                               std::optional<SyncReplicasOptions> sync, std::string task)
    : variables_(&variables),
      is_chief_(is_chief),
      wait_for_chief_(wait_for_chief),
      push_ahead_bytes_(push_ahead_bytes) {
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
  if (!store.contains(name)) return;
  variables_->place(name, value);
  ops::NoGradGuard no_grad;
  if (is_chief_)
    uninitialized_.push_back(name);  // sent once restore, warm start and init_fn are done
  else  // the chief's value, at the first read: whole, or the rows a lookup reads (a table)
    stale_[&store].insert(name);
}

void PsGradientPath::send_initial_values(const nn::VariableStore& store) {
  if (uninitialized_.empty()) return;
  std::vector<NamedTensor> values;
  for (const std::string& name : uninitialized_) values.push_back({name, store.get(name).value});
  variables_->initialize(values);
  uninitialized_.clear();
}

void PsGradientPath::variables_ready(nn::VariableStore& store) {
  std::lock_guard lock(mutex_);
  send_initial_values(store);
}

std::vector<PsMovingAverage> PsGradientPath::owned_moving_averages(
    const nn::VariableStore& store, const std::vector<nn::MovingAverageUpdate>& updates) const {
  std::vector<PsMovingAverage> owned;
  for (const nn::MovingAverageUpdate& update : updates) {
    std::string name = store.name_of(update.variable);
    if (variables_->placement().find(name))
      owned.push_back({name, update.value, update.momentum});
    else
      nn::apply_moving_average(update);  // a variable created after the first step: kept here
  }
  return owned;
}

void PsGradientPath::push(nn::VariableStore& store, std::vector<nn::GradAndVar>& grads,
                          const std::vector<nn::MovingAverageUpdate>& moving_averages) {
  place_global_step(store);
  send_initial_values(store);
  std::vector<PsMovingAverage> averages;
  {
    ops::NoGradGuard no_grad;
    averages = owned_moving_averages(store, moving_averages);
  }
  if (sync_) {
    sync_->step(store, grads, averages, read_by_rows_);
  } else {
    int64_t seen = static_cast<int64_t>(nn::get_or_create_global_step(store).item());
    variables_->push_pull(grads, store, seen, averages, read_by_rows_);
  }
  stale_[&store] = read_by_rows_;
}

void PsGradientPath::read_variable(ReplicaContext& replica, const std::string& name, Tensor& value,
                                   const Tensor* rows) {
  std::lock_guard lock(mutex_);
  if (!variables_->placement().find(name)) return;  // on the worker, or not created yet
  std::set<std::string>& stale = stale_[&replica.store()];
  if (rows) {
    if (!read_whole_.contains(name)) read_by_rows_.insert(name);
    if (stale.contains(name))
      variables_->pull_rows(name, *rows, value, wait_for_chief_);
    else
      variables_->rows_read(name, *rows);  // checks the ids (the store is fresh)
    return;
  }
  read_whole_.insert(name);
  read_by_rows_.erase(name);
  if (stale.erase(name)) value.copy_from(variables_->pull_variable(name, wait_for_chief_));
}

namespace {

// The gradients to push, from a step's `grads`: those present, times `scale`, a row-sparse one
// kept as its rows (duplicates summed, on the host: what it moves and what the owner's sparse
// update takes) and clipped by the global norm when `clip_norm` is set, by the optimizer's own
// clipping (nn::optim::clip_by_global_norm, which Optimizer::update calls).
std::vector<nn::GradAndVar> gradients_to_push(const std::vector<nn::GradAndVar>& grads,
                                              double scale, std::optional<double> clip_norm) {
  ops::NoGradGuard no_grad;
  std::vector<nn::GradAndVar> present;
  for (const nn::GradAndVar& entry : grads) {
    if (!entry.has_gradient()) continue;
    nn::GradAndVar pushed = entry;
    if (pushed.sparse_gradient.defined()) {
      ops::IndexedSlices& rows = pushed.sparse_gradient;
      rows = ops::sum_duplicates({rows.indices.to(ops::Device::cpu()),
                                  rows.values.detach().to(ops::Device::cpu()), rows.dense_shape});
      if (scale != 1.0) rows = ops::scale_slices(rows, scale);
    } else {
      pushed.gradient =
          scale == 1.0 ? pushed.gradient.detach() : ops::mul(pushed.gradient.detach(), scale);
    }
    present.push_back(std::move(pushed));
  }
  if (clip_norm) nn::optim::clip_by_global_norm(present, *clip_norm);
  return present;
}

}  // namespace

std::vector<nn::GradAndVar> PsGradientPath::gradients_pushing_ahead(const nn::TrainOp& train_op,
                                                                    double scale) {
  std::vector<std::string> names = train_op.variable_names();
  std::vector<Tensor> sources;
  for (const std::string& name : names) sources.push_back(train_op.store().get(name).value);
  std::vector<bool> staged(names.size(), false);
  std::vector<ops::SourceGradient> gradients = ops::row_sparse_gradients(
      train_op.loss(), sources, [&](size_t i, const ops::SourceGradient& gradient) {
        if (gradient.row_sparse() || gradient.dense.nbytes() < push_ahead_bytes_) return;
        ops::NoGradGuard no_grad;
        Tensor dense = gradient.dense.detach();
        if (scale != 1.0) dense = ops::mul(dense, scale);
        variables_->stage({{names[i], dense, sources[i]}});
        staged[i] = true;
      });
  std::vector<nn::GradAndVar> rest;
  for (size_t i = 0; i < names.size(); ++i) {
    if (staged[i]) continue;
    nn::GradAndVar entry{names[i], gradients[i].dense, sources[i]};
    entry.sparse_gradient = std::move(gradients[i].rows);
    rest.push_back(std::move(entry));
  }
  return gradients_to_push(rest, scale, std::nullopt);
}

void PsGradientPath::apply(ReplicaContext& replica, const nn::TrainOp& train_op,
                           double gradient_scale, nn::ModelContext& ctx, Tensor* loss_sum) {
  if (push_ahead_bytes_ > 0 && !sync_ && !train_op.optimizer().clip_norm()) {
    // The connections carry this replica's staged frames until its push: held throughout.
    std::lock_guard lock(mutex_);
    try {
      place_global_step(train_op.store());
      std::vector<nn::GradAndVar> rest = gradients_pushing_ahead(train_op, gradient_scale);
      push(train_op.store(), rest, nn::ContextControl(ctx).take_moving_average_updates());
    } catch (...) {
      variables_->discard_staged();  // no push will apply them
      throw;
    }
    if (loss_sum) *loss_sum = train_op.loss().detach().clone();
    return;
  }
  std::vector<nn::GradAndVar> grads = train_op.compute_gradients();
  std::vector<nn::GradAndVar> present =
      gradients_to_push(grads, gradient_scale, train_op.optimizer().clip_norm());
  std::lock_guard lock(mutex_);
  push(train_op.store(), present, nn::ContextControl(ctx).take_moving_average_updates());
  if (loss_sum) *loss_sum = train_op.loss().detach().clone();
  (void)replica;
}

void PsGradientPath::combine(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads_and_vars) {
  std::vector<nn::GradAndVar> present = gradients_to_push(grads_and_vars, 1.0, std::nullopt);
  std::lock_guard lock(mutex_);
  push(replica.store(), present,
       nn::ContextControl(replica.model_context()).take_moving_average_updates());
}

void PsGradientPath::before_checkpoint(nn::VariableStore& store) {
  std::lock_guard lock(mutex_);
  send_initial_values(store);
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
