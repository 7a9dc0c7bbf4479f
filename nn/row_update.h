// Row-sparse updates (TF1's Optimizer._apply_sparse, tensorflow/python/training/optimizer.py,
// and the SparseApply* kernels of tensorflow/core/kernels/training_ops.cc): the rule's own dense
// update run on the rows a gradient's IndexedSlices name, gathered from the variable and its
// slots, then written back. Rows the gradient does not name, and their slots, are not touched.
//
// Running the dense update itself (fused kernel or composite ops) on the gathered rows is what
// makes a sparse step compute, on each touched element, exactly what the dense step computes on
// it: one formula per rule, never a second copy of it that could drift.
#pragma once

#include <functional>
#include <vector>

#include "nn/optimizer.h"

namespace est::nn::optim {

// A rule's dense update over `grads` (dense entries) and `slots` (slots[s][i]: slot s of entry
// i), in place.
using DenseUpdate = std::function<void(const std::vector<GradAndVar>& grads,
                                       std::vector<std::vector<Tensor>>& slots)>;

// Runs `update` once over every entry: dense entries as they are, row-sparse ones (duplicates
// summed, CPU) as views of the rows they touch, stored back after. Entries with no rows drop
// out (nothing to update).
void update_rows(const std::vector<GradAndVar>& grads,
                 const std::vector<std::vector<Tensor>>& slots, const DenseUpdate& update);

}  // namespace est::nn::optim
