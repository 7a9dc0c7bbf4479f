// Keras's Adagrad update (Keras 2.11+ and Keras 3: keras/optimizers/adagrad.py), TF1's rule
// (nn/optimizers.h: adagrad, slot `Adagrad`) with epsilon inside the square root:
//   accum += g^2; var -= lr * g / sqrt(accum + epsilon)
// Keras 2.x's older optimizer_v2/adagrad.py (ResourceApplyAdagradV2) adds epsilon after the root
// instead; with its defaults (accumulator from 0.1, epsilon 1e-7) the two differ by less than
// 4e-7 of a step. Internal: keras::optimizers::Adagrad is the public form.
#pragma once

#include "nn/optimizer.h"

namespace est::nn::optim {

// InvalidArgumentError for a negative initial_accumulator_value or an epsilon that is not > 0.
Optimizer adagrad_with_epsilon(LearningRate learning_rate, double initial_accumulator_value,
                               double epsilon);

}  // namespace est::nn::optim
