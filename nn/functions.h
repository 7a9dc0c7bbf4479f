// The ops that model code calls unqualified after `using namespace est::nn`.
//
// They are using-declarations, not wrappers: a wrapper with the same signature as the op would
// make `relu(x)` ambiguous, because argument-dependent lookup also finds est::ops::relu through
// the Tensor argument. Re-exporting the same entity keeps every call unambiguous and keeps
// `&nn::relu == &ops::relu`, which is how Activation recognises the fusable activations.
#pragma once

#include "ops/array_ops.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "ops/nn_ops.h"

namespace est::nn {

// The value types, so that model code under `using namespace est::nn` can name them.
using ops::DType;
using ops::Shape;
using ops::Tensor;

// Activations (each a plain, non-overloaded `Tensor f(const Tensor&)`).
using ops::log_softmax;
using ops::relu;
using ops::sigmoid;
using ops::softmax;
using ops::tanh;

// Shapes and indexing.
using ops::cast;
using ops::concat;
using ops::expand_dims;
using ops::flatten;
using ops::gather;
using ops::one_hot;
using ops::reshape;
using ops::slice;
using ops::squeeze;
using ops::stack;
using ops::transpose;

// Arithmetic and reductions.
using ops::abs;
using ops::add;
using ops::argmax;
using ops::clip;
using ops::div;
using ops::equal;
using ops::exp;
using ops::log;
using ops::matmul;
using ops::max;
using ops::maximum;
using ops::mean;
using ops::minimum;
using ops::mul;
using ops::pow;
using ops::sqrt;
using ops::square;
using ops::sub;
using ops::sum;

}  // namespace est::nn
