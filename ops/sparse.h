// Sparse tensors (tf.SparseTensor) and the few sparse ops the input layer needs, following
// tensorflow/python/ops/sparse_ops.py and the kernels it calls (sparse_to_dense_op.cc,
// reshape_util.cc, sparse_fill_empty_rows_op.cc).
//
// A sparse tensor is a Tensor (Tensor::sparse, is_sparse, indices, values; see ops/tensor.h),
// so it travels in Features like any other. These functions run on the host, for every dtype
// strings included; they are input-pipeline work, not differentiable ops.
#pragma once

#include <string>

#include "ops/tensor.h"

namespace est::ops::sparse {

// tf.sparse.to_dense: a dense tensor of the sparse tensor's shape and dtype holding `values` at
// `indices` and `default_value` elsewhere (0, or "" for strings). With `validate_indices` (TF's
// default) indices must be in row-major order without repeats, else an InvalidArgumentError.
struct ToDenseOptions {
  double default_value = 0.0;
  std::string default_string;  // for string tensors
  bool validate_indices = true;
};
Tensor to_dense(const Tensor& sparse_tensor, const ToDenseOptions& options = {});

// tf.sparse.from_dense: the entries of `dense` that differ from 0 (or ""), in row-major order.
Tensor from_dense(const Tensor& dense);

// tf.sparse.reshape: the same entries in a new dense shape with as many elements (one dimension
// may be -1, inferred), indices relinearised in row-major order.
Tensor reshape(const Tensor& sparse_tensor, const Shape& new_shape);

// tf.sparse.fill_empty_rows: every row (index in dimension 0) without an entry gets one at
// [row, 0, ..., 0] holding the default value. Output entries are grouped by row, each row's in
// their input order. `empty_row_indicator` is bool [rows]; `reverse_index_map` int64 [n] gives
// each input entry's position in the output.
struct FilledRows {
  Tensor output;
  Tensor empty_row_indicator;
  Tensor reverse_index_map;
};
struct FillOptions {
  double default_value = 0.0;
  std::string default_string;  // for string tensors
};
FilledRows fill_empty_rows(const Tensor& sparse_tensor, const FillOptions& options = {});

}  // namespace est::ops::sparse

namespace est {
namespace sparse = ops::sparse;
}  // namespace est
