// The optimizers, as tf.compat.v1.train's: each returns an Optimizer config whose state
// (slots) lives in the VariableStore under TF1's slot names.
//
//   sgd:      var -= lr * g
//   momentum: accum = m * accum + g; var -= lr * accum
//             (nesterov: var -= lr * g + lr * m * accum)             slot Momentum
//   adagrad:  accum += g^2; var -= lr * g / sqrt(accum)               slot Adagrad
//   adam:     m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//             var -= lr * sqrt(1-b2^t) / (1-b1^t) * m / (sqrt(v) + eps)
//             slots Adam (m), Adam_1 (v); beta1_power, beta2_power
//   rmsprop:  ms = d ms + (1-d) g^2; mom = mu mom + lr g / sqrt(ms + eps); var -= mom
//             slots RMSProp (ms, starts at 1), RMSProp_1 (mom); centered adds mg = d mg +
//             (1-d) g, divides by sqrt(ms - mg^2 + eps), and shifts mom to RMSProp_2
//   ftrl:     FTRL-proximal (see nn/ftrl.cpp); slots Ftrl (accumulator, starts at 0.1),
//             Ftrl_1 (linear)
//
// Row-sparse gradients (embedding lookups; nn/row_update.h): sgd, momentum, adagrad, ftrl and
// lazy_adam update only the rows named, duplicates summed first; adam decays every row (TF1);
// rmsprop densifies.
#pragma once

#include "nn/optimizer.h"
#include "nn/train_op.h"

namespace est::nn::optim {

Optimizer sgd(LearningRate learning_rate);
Optimizer momentum(LearningRate learning_rate, double momentum, bool use_nesterov = false);
Optimizer adagrad(LearningRate learning_rate, double initial_accumulator_value = 0.1);
Optimizer adam(LearningRate learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
               double epsilon = 1e-8);
// Adam whose row-sparse updates are lazy (LazyAdamOptimizer): only the gradient's rows and
// their m and v move. adam() decays m and v on every row, as TF1's AdamOptimizer does.
Optimizer lazy_adam(LearningRate learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                    double epsilon = 1e-8);
// initial_mean_square: TF1 starts the mean square at 1; Keras 2.11+ at 0 (keras/ passes 0).
Optimizer rmsprop(LearningRate learning_rate, double decay = 0.9, double momentum = 0.0,
                  double epsilon = 1e-10, bool centered = false, double initial_mean_square = 1.0);

// tf.compat.v1.train.FtrlOptimizer's arguments after learning_rate, with its defaults.
struct FtrlOptions {
  double learning_rate_power = -0.5;  // <= 0; 0 keeps the learning rate fixed
  double initial_accumulator_value = 0.1;
  double l1_regularization_strength = 0.0;
  double l2_regularization_strength = 0.0;
  double l2_shrinkage_regularization_strength = 0.0;  // a magnitude penalty on the weights
};
Optimizer ftrl(LearningRate learning_rate, const FtrlOptions& options = {});

}  // namespace est::nn::optim
