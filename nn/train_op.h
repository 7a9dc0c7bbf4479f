// TrainOp: the deferred training step that Optimizer::minimize returns.
//
// model_fn only describes the step; the Estimator runs it later, after the distribution
// strategy has had its say: gradients of the loss w.r.t. the trainable variables the call
// used (ops::gradients over the tape), an optional transform (the strategy's all-reduce), then
// the optimizer's apply_gradients (clipping, the in-place update, global_step += 1).
// Strategies that apply updates elsewhere (parameter servers) call compute_gradients() and
// ship the result instead of run().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/losses.h"
#include "nn/model_context.h"
#include "nn/optimizer.h"
#include "ops/autograd.h"

namespace est::nn {

class TrainOp {
 public:
  TrainOp() = default;  // empty: defined() is false (eval and predict specs)
  // `context`: the model_fn call's context (minimize's), which must outlive the train op.
  // `reduction`: the reduction the loss was computed with (minimize's options).
  TrainOp(optim::Optimizer optimizer, Tensor loss, ModelContext& context,
          std::vector<Variable> variables, Reduction reduction);

  bool defined() const { return optimizer_.has_value(); }
  const Tensor& loss() const { return loss_; }
  // The reduction the loss was computed with: MinimizeOptions::loss_reduction, else the one the
  // loss carries (nn::loss_reduction(loss), read when minimize built this train op). What
  // tf.compat.v1's Optimizer._scale_loss reads (tensorflow/python/training/optimizer.py): under
  // a strategy the Estimator's gradients are divided by num_replicas_in_sync unless it is kSum
  // (distribute/gradient_path.h, loss_reduction_scale).
  Reduction loss_reduction() const { return loss_reduction_; }
  const optim::Optimizer& optimizer() const;
  VariableStore& store() const;
  ModelContext& context() const;
  std::vector<std::string> variable_names() const;

  // The transform run() applies when called without one.
  void set_gradient_transform(GradientTransform transform) { transform_ = std::move(transform); }

  // Step 1: d loss / d variable for each trainable variable, in store order; row-sparse
  // (GradAndVar::sparse_gradient) for a variable the step only read rows of (embeddings).
  std::vector<GradAndVar> compute_gradients() const;
  // The same, calling on_ready(i, gradient) as soon as entry i's gradient is complete during
  // the backward pass (ops::gradients' callback), so that a strategy can start reducing it;
  // every gradient dense.
  std::vector<GradAndVar> compute_gradients(const ops::GradientReady& on_ready) const;
  // Steps 3-5: clipping, update, global step (the optimizer's apply_gradients with context()
  // and `options`: inside strategy.run, synchronized by its replica).
  void apply(std::vector<GradAndVar> grads_and_vars, optim::ApplyOptions options = {}) const;
  // The whole step. Each call differentiates the same recorded forward pass, so a training
  // loop runs it once per model_fn call. With a transform (the strategy's all-reduce) the
  // gradients it leaves are applied as aggregated (no second sum inside strategy.run).
  void run() const;
  void run(const GradientTransform& transform) const;

 private:
  void check_defined(const char* what) const;

  std::optional<optim::Optimizer> optimizer_;
  Tensor loss_;  // scalar
  ModelContext* context_ = nullptr;
  std::vector<Variable> variables_;
  GradientTransform transform_;
  Reduction loss_reduction_ = Reduction::kSumByNonzeroWeights;
};

}  // namespace est::nn
