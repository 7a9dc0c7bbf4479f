// Shape and indexing ops: copies, never strided views (see tensor.h).
#pragma once

#include <vector>

#include "ops/tensor.h"

namespace est::ops {

Tensor reshape(const Tensor& x, const Shape& shape);  // same as x.reshape(shape)
Tensor flatten(const Tensor& x);                      // [N, ...] -> [N, prod(...)]
Tensor transpose(const Tensor& x, const std::vector<int>& perm = {});  // reverse when empty
Tensor concat(const std::vector<Tensor>& tensors, int axis);
Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);
// `begin` and `size` per axis; size -1 means "to the end", as tf.slice.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size);
// Rows of `params` picked by integer `indices` (any shape) along `axis`, as tf.gather; the
// gradient scatters-adds into params (embedding lookup). Out-of-range ids are an error naming
// the id and the valid range.
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
Tensor cast(const Tensor& x, DType dtype);  // gradient flows between floating types
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value = 1.0, double off_value = 0.0,
               DType dtype = DType::kF32);
Tensor expand_dims(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, const std::vector<int>& axes = {});

}  // namespace est::ops
