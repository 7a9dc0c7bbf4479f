// TrainOp: gradients over the tape, the strategy's transform, then the optimizer.
#include "nn/train_op.h"

#include <fmt/format.h>

#include "ops/autograd.h"

namespace est::nn {

TrainOp::TrainOp(optim::Optimizer optimizer, Tensor loss, ModelContext& context,
                 std::vector<Variable> variables, Reduction reduction)
    : optimizer_(std::move(optimizer)),
      loss_(std::move(loss)),
      context_(&context),
      variables_(std::move(variables)),
      loss_reduction_(reduction) {}

void TrainOp::check_defined(const char* what) const {
  if (!defined())
    throw FailedPreconditionError(fmt::format(
        "TrainOp::{}: this train op is empty; build it with optimizer.minimize(loss, ctx)", what));
}

const optim::Optimizer& TrainOp::optimizer() const {
  check_defined("optimizer");
  return *optimizer_;
}

VariableStore& TrainOp::store() const {
  check_defined("store");
  return context_->store();
}

ModelContext& TrainOp::context() const {
  check_defined("context");
  return *context_;
}

std::vector<std::string> TrainOp::variable_names() const {
  std::vector<std::string> out;
  out.reserve(variables_.size());
  for (const Variable& v : variables_) out.push_back(v.name);
  return out;
}

std::vector<GradAndVar> TrainOp::compute_gradients() const { return compute_gradients({}); }

std::vector<GradAndVar> TrainOp::compute_gradients(const ops::GradientReady& on_ready) const {
  check_defined("compute_gradients");
  std::vector<Tensor> sources;
  sources.reserve(variables_.size());
  for (const Variable& v : variables_) sources.push_back(v.value);
  std::vector<GradAndVar> out;
  out.reserve(variables_.size());
  if (on_ready) {  // the caller reduces each gradient as it completes: dense ones
    std::vector<Tensor> gradients = ops::gradients(loss_, sources, on_ready);
    for (size_t i = 0; i < variables_.size(); ++i)
      out.push_back({variables_[i].name, gradients[i], variables_[i].value});
    return out;
  }
  std::vector<ops::SourceGradient> gradients = ops::row_sparse_gradients(loss_, sources);
  for (size_t i = 0; i < variables_.size(); ++i) {
    GradAndVar entry{variables_[i].name, gradients[i].dense, variables_[i].value};
    entry.sparse_gradient = std::move(gradients[i].rows);
    out.push_back(std::move(entry));
  }
  return out;
}

void TrainOp::apply(std::vector<GradAndVar> grads_and_vars, optim::ApplyOptions options) const {
  check_defined("apply");
  optimizer_->apply_gradients(*context_, std::move(grads_and_vars), options);
}

void TrainOp::run() const { run(transform_); }

void TrainOp::run(const GradientTransform& transform) const {
  std::vector<GradAndVar> grads = compute_gradients();
  if (transform) {
    size_t count = grads.size();
    transform(grads);
    if (grads.size() != count)
      throw InternalError(fmt::format(
          "TrainOp::run: the gradient transform changed the number of gradients from {} to {}",
          count, grads.size()));
    apply(std::move(grads), {.experimental_aggregate_gradients = false});
    return;
  }
  apply(std::move(grads));
}

}  // namespace est::nn
