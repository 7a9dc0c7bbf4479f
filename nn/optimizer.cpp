// Optimizer: validation of gradient/variable pairs, clipping, the update and the step count.
#include "nn/optimizer.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "nn/clipping.h"
#include "nn/context_control.h"
#include "nn/model_context.h"
#include "nn/train_op.h"
#include "ops/autograd.h"

namespace est::nn::optim {

using ops::shape_str;
namespace {

void check_pair(std::string_view optimizer, const GradAndVar& entry) {
  if (!entry.variable.defined())
    throw InvalidArgumentError(
        fmt::format("{}: variable '{}' is undefined", optimizer, entry.name));
  const bool sparse = entry.sparse_gradient.defined();
  const Shape& shape = sparse ? entry.sparse_gradient.dense_shape : entry.gradient.shape();
  const DType dtype = sparse ? entry.sparse_gradient.values.dtype() : entry.gradient.dtype();
  if (shape != entry.variable.shape() || dtype != entry.variable.dtype())
    throw InvalidArgumentError(fmt::format(
        "{}: the {}gradient for '{}' is {} {} but the variable is {} {}; pass gradients in the "
        "same order as the variables",
        optimizer, sparse ? "row-sparse " : "", entry.name, dtype_name(dtype), shape_str(shape),
        dtype_name(entry.variable.dtype()), shape_str(entry.variable.shape())));
}

// `initial()` is called only when the variable is created: a slot's table-sized fill is not
// paid on every step (it would dominate a row-sparse update).
template <class MakeInitial>
Tensor get_or_create(VariableStore& store, const std::string& name, MakeInitial initial) {
  if (auto found = store.find(name)) return found->value;
  try {
    return store.create(name, initial(), false);
  } catch (const AlreadyExistsError&) {  // another replica thread was first
    return store.get(name).value;
  }
}

}  // namespace

Optimizer::Optimizer(std::shared_ptr<const UpdateRule> rule, LearningRate learning_rate)
    : rule_(std::move(rule)), learning_rate_(std::move(learning_rate)) {
  if (!rule_) throw InvalidArgumentError("Optimizer: no update rule");
}

Optimizer Optimizer::with_learning_rate(LearningRate learning_rate) const {
  Optimizer copy = *this;
  copy.learning_rate_ = std::move(learning_rate);
  return copy;
}

Optimizer Optimizer::clip_by_global_norm(double clip_norm) const {
  if (!(clip_norm > 0) || !std::isfinite(clip_norm))
    throw InvalidArgumentError(
        fmt::format("{}.clip_by_global_norm: clip_norm must be positive and finite, got {}", name(),
                    clip_norm));
  Optimizer copy = *this;
  copy.clip_norm_ = clip_norm;
  return copy;
}

TrainOp Optimizer::minimize(const Tensor& loss, ModelContext& ctx, MinimizeOptions options) const {
  if (ctx.mode() != Mode::kTrain) return TrainOp();  // EVAL/PREDICT ignore the train op
  if (!loss.defined())
    throw InvalidArgumentError(fmt::format("{}.minimize: the loss is undefined", name()));
  if (loss.numel() != 1)
    throw InvalidArgumentError(fmt::format(
        "{}.minimize: the loss must be a scalar, got shape {}; reduce it (a loss function's "
        "default reduction does)",
        name(), shape_str(loss.shape())));
  std::vector<Variable> variables = ctx.trainable_variables();
  if (variables.empty())
    throw InvalidArgumentError(fmt::format(
        "{}.minimize: this model_fn call used no trainable variables; create them through "
        "layers or ctx.get_variable() before calling minimize",
        name()));
  if (!loss.requires_grad())
    throw InvalidArgumentError(fmt::format(
        "{}.minimize: the loss does not depend on any trainable variable (was it computed "
        "under a NoGradGuard, or from detached values?)",
        name()));
  // Unset: the reduction a loss function recorded (TF1's fallback; model_fns as written).
  Reduction reduction = options.loss_reduction ? *options.loss_reduction : nn::loss_reduction(loss);
  return TrainOp(*this, loss, ctx, std::move(variables), reduction);
}

void Optimizer::apply_gradients(VariableStore& store,
                                std::vector<GradAndVar> grads_and_vars) const {
  apply_here(store, std::move(grads_and_vars));
}

void Optimizer::apply_gradients(ModelContext& ctx, std::vector<GradAndVar> grads_and_vars,
                                ApplyOptions options) const {
  CrossReplicaSync* sync = ContextControl(ctx).replica_sync();
  if (!sync) {
    apply_here(ctx.store(), std::move(grads_and_vars));
    return;
  }
  if (sync->synchronize(grads_and_vars, options.experimental_aggregate_gradients))
    apply_here(ctx.store(), std::move(grads_and_vars));
  sync->after_update();
}

void Optimizer::apply_here(VariableStore& store, std::vector<GradAndVar> grads_and_vars) const {
  std::vector<GradAndVar> present = prepare(std::move(grads_and_vars));
  Tensor global_step = get_or_create_global_step(store);
  int64_t step = static_cast<int64_t>(global_step.item());
  move(store, std::move(present), step);
  global_step.data<int64_t>()[0] = step + 1;
}

void Optimizer::update(VariableStore& store, std::vector<GradAndVar> grads_and_vars,
                       int64_t step) const {
  move(store, prepare(std::move(grads_and_vars)), step);
}

std::vector<GradAndVar> Optimizer::prepare(std::vector<GradAndVar> grads_and_vars) const {
  std::vector<GradAndVar> present;
  present.reserve(grads_and_vars.size());
  for (GradAndVar& entry : grads_and_vars) {
    if (!entry.has_gradient()) continue;
    check_pair(name(), entry);
    if (entry.sparse_gradient.defined()) {
      // Rows updated in place where the rule can and the rows are float32 or float64 on the
      // host (otherwise densified: the dense update is the reference); duplicates
      // summed first (TF's _apply_sparse_duplicate_indices), so that clipping sees the norm of
      // the dense gradient.
      const DType dtype = entry.sparse_gradient.values.dtype();
      if (rule_->updates_rows() && entry.variable.device().is_cpu() &&
          entry.sparse_gradient.values.device().is_cpu() &&
          (dtype == DType::kF32 || dtype == DType::kF64))
        entry.sparse_gradient = ops::sum_duplicates(entry.sparse_gradient);
      else
        entry.densify();
    }
    present.push_back(std::move(entry));
  }
  if (present.empty() && !grads_and_vars.empty())
    throw InvalidArgumentError(fmt::format(
        "{}.apply_gradients: no gradient was given for any of the {} variables (first: '{}')",
        name(), grads_and_vars.size(), grads_and_vars.front().name));
  if (clip_norm_) optim::clip_by_global_norm(present, *clip_norm_);
  return present;
}

void Optimizer::move(VariableStore& store, std::vector<GradAndVar> present, int64_t step) const {
  double learning_rate = learning_rate_.at(step);
  ops::NoGradGuard no_grad;
  for (GradAndVar& entry : present) {
    if (entry.gradient.defined()) entry.gradient = entry.gradient.detach();
    if (entry.sparse_gradient.defined())
      entry.sparse_gradient.values = entry.sparse_gradient.values.detach();
  }
  if (!present.empty()) rule_->apply(store, present, learning_rate);
}

void clip_by_global_norm(std::vector<GradAndVar>& grads, double clip_norm) {
  // A row-sparse gradient by its values (rows distinct): the dense gradient's norm.
  auto gradient_of = [](GradAndVar& entry) -> Tensor& {
    return entry.sparse_gradient.defined() ? entry.sparse_gradient.values : entry.gradient;
  };
  std::vector<Tensor> gradients;
  gradients.reserve(grads.size());
  for (GradAndVar& entry : grads) gradients.push_back(gradient_of(entry));
  ClippedTensors clipped = clip_by_global_norm(gradients, clip_norm);
  for (size_t i = 0; i < grads.size(); ++i) gradient_of(grads[i]) = clipped.tensors[i];
}

namespace {

// Pairs gradients[i] with variables[i] (named as in `store`) for apply_gradients.
std::vector<GradAndVar> pair_up(std::string_view optimizer, const VariableStore& store,
                                const std::vector<Tensor>& gradients,
                                const std::vector<Tensor>& variables) {
  if (gradients.size() != variables.size())
    throw InvalidArgumentError(fmt::format(
        "{}.apply_gradients: {} gradients for {} variables; pass one gradient per variable",
        optimizer, gradients.size(), variables.size()));
  std::vector<GradAndVar> entries;
  entries.reserve(variables.size());
  for (size_t i = 0; i < variables.size(); ++i)
    entries.push_back({store.name_of(variables[i]), gradients[i], variables[i]});
  return entries;
}

}  // namespace

void Optimizer::apply_gradients(VariableStore& store, const std::vector<Tensor>& gradients,
                                const std::vector<Tensor>& variables) const {
  apply_gradients(store, pair_up(name(), store, gradients, variables));
}

void Optimizer::apply_gradients(ModelContext& ctx, const std::vector<Tensor>& gradients,
                                const std::vector<Tensor>& variables, ApplyOptions options) const {
  apply_gradients(ctx, pair_up(name(), ctx.store(), gradients, variables), options);
}

Tensor get_slot(VariableStore& store, const GradAndVar& entry, std::string_view slot,
                double initial_value) {
  std::string name = entry.name + "/" + std::string(slot);
  const Tensor& variable = entry.variable;
  // On the variable's device: the fused update reads variable, gradient and slots together.
  Tensor value = get_or_create(store, name, [&] {
    return Tensor::full(variable.shape(), initial_value, variable.dtype(), variable.device());
  });
  if (value.shape() != variable.shape() || value.dtype() != variable.dtype())
    throw InvalidArgumentError(fmt::format(
        "slot '{}' is {} {} but its variable '{}' is {} {}; was the checkpoint written for "
        "another model?",
        name, dtype_name(value.dtype()), shape_str(value.shape()), entry.name,
        dtype_name(variable.dtype()), shape_str(variable.shape())));
  return value;
}

Tensor get_non_slot(VariableStore& store, const std::string& name, DType dtype,
                    double initial_value) {
  Tensor value = get_or_create(store, name, [&] { return Tensor::full({}, initial_value, dtype); });
  if (value.numel() != 1)
    throw InvalidArgumentError(fmt::format("optimizer variable '{}' should be a scalar, got {}",
                                           name, shape_str(value.shape())));
  return value;
}

}  // namespace est::nn::optim
