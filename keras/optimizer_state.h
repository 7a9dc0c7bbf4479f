// The optimizer's state in Keras's files and in est's checkpoints. Internal to keras/ (saving).
//
// Keras 3 (keras/src/optimizers/base_optimizer.py, adam.py, sgd.py, rmsprop.py as of 3.10,
// whose `.h5` files the test fixture is): optimizer.variables = iterations (int64),
// learning_rate (float32), then the slots: Adam "momentum" and "velocity" per variable (one
// variable after the other), SGD "momentum" (when momentum > 0), RMSprop every "velocity", then
// every "momentum" (momentum > 0), then every "average_gradient" (centered), Adagrad every
// "accumulator" (adagrad.py).
// Keras 2.x (keras/optimizers/optimizer_v2/*.py, what model.save("x.h5") writes as
// optimizer_weights): "<Adam>/iter:0", then the slots grouped by kind, "<Adam>/<dense/kernel>/m:0"
// (Adam m, v; SGD momentum; RMSprop rms, momentum, mg; Adagrad accumulator).
//
// est keeps TF1's names (`dense/kernel/Adam`, `dense/kernel/Adam_1`, `dense/kernel/Momentum`,
// `dense/kernel/RMSProp`, `dense/kernel/Adagrad`...), the global step (Keras's iterations) and
// Adam's beta powers (beta^(t+1), rebuilt from iterations on load by the same float32 products the
// optimizer makes). A slot absent from est's state (not yet created) is saved as its initial value:
// zeros, Adagrad's initial_accumulator_value.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/bundle.h"
#include "keras/compile.h"
#include "ops/tensor.h"

namespace est::keras {

struct OptimizerVariable {
  std::string name;      // as Keras stores it ("adam/dense_kernel_momentum", "Adam/iter:0")
  std::string kind;      // "iterations", "learning_rate", or a slot: "momentum", "velocity", ...
  std::string variable;  // the model variable of a slot ("dense/kernel"), else empty
};

// `trainable`: the model's trainable weights in Keras's order, with their shapes.
using TrainableWeights = std::vector<std::pair<std::string, ops::Shape>>;

std::vector<OptimizerVariable> keras3_optimizer_variables(const Optimizer& optimizer,
                                                          const TrainableWeights& trainable);
std::vector<OptimizerVariable> keras2_optimizer_variables(const Optimizer& optimizer,
                                                          const TrainableWeights& trainable);

// The values of `variables` from est's state.
std::vector<ops::Tensor> optimizer_values(const std::vector<OptimizerVariable>& variables,
                                          const Optimizer& optimizer,
                                          const TrainableWeights& trainable,
                                          const checkpoint::TensorBundle& state);

// Keras's stored variable names (either version, or Keras 3's legacy h5 names such as
// "adam/sequential_dense_kernel_momentum") matched to kinds and model variables.
// InvalidArgumentError naming `where` and the name for one that matches nothing.
std::vector<OptimizerVariable> parse_optimizer_variables(const std::vector<std::string>& names,
                                                         const TrainableWeights& trainable,
                                                         const std::string& where);

// Writes Keras's values into est's state: the global step, the slots, Adam's beta powers.
void apply_optimizer_values(const std::vector<OptimizerVariable>& variables,
                            const std::vector<ops::Tensor>& values, const Optimizer& optimizer,
                            checkpoint::TensorBundle& state);

}  // namespace est::keras
