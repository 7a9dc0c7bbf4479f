// Optimizers of the canned estimators, after tensorflow/estimator canned/optimizers.py
// (get_optimizer_instance) and dnn_linear_combined.py (two optimizers for one model).
//
// An estimator's `optimizer` argument is a name or an Optimizer, as in TF: a name ('Adagrad',
// 'Adam', 'Ftrl', 'RMSProp', 'SGD') becomes the tf.compat.v1.train optimizer of that name with
// the estimator's default learning rate and the optimizer's own other defaults; an Optimizer is
// used as given. est's optimizers are TF1's, so the names map to TF1's classes (TF2's canned
// *V2 classes map them to Keras optimizers, whose Adagrad and Ftrl defaults differ slightly).
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nn/optimizers.h"

namespace est::canned {

// What an estimator's `optimizer` argument holds: `.optimizer = "SGD"` or
// `.optimizer = optim::adagrad(0.1)`.
using OptimizerArg = std::variant<std::string, optim::Optimizer>;

// The optimizer `optimizer` names (with `learning_rate`), or the one it holds. An unknown
// name is an InvalidArgumentError listing the supported names.
optim::Optimizer get_optimizer_instance(const OptimizerArg& optimizer, double learning_rate);

// One optimizer per variable scope, applied as one step (dnn_linear_combined.py's train op:
// each optimizer minimizes over the trainable variables under its scope, then global_step += 1
// once). Each variable must lie under one of the scopes (`dnn`, `linear`): a variable under
// none is an InvalidArgumentError naming it. Each part keeps its own slots and learning rate
// schedule, read at the step being taken.
optim::Optimizer per_scope_optimizer(std::vector<std::pair<std::string, optim::Optimizer>> parts);

}  // namespace est::canned
