// IndexedSlices: a row-sparse value of a dense tensor, as TensorFlow's IndexedSlices
// (tensorflow/python/framework/indexed_slices.py): `values` holds rows of a tensor of shape
// `dense_shape` (rows along its first axis), `indices` which rows. Rows may repeat and come in
// any order; the dense value sums the repeats.
//
// It is what the gradient of a row read (gather along axis 0: embedding lookups, the linear
// model's sparse sums) is before anything densifies it: an embedding table of 1M rows read at
// 256 ids gets a gradient of 256 rows, not of 1M. It is a separate type rather than a kind of
// Tensor so that no code that expects a dense tensor can be handed one unawares: whoever holds
// one densifies it (to_dense) or works on its rows.
#pragma once

#include <vector>

#include "ops/tensor.h"

namespace est::ops {

struct IndexedSlices {
  Tensor indices;  // int64 [n]: rows of the dense tensor, in [0, dense_shape[0])
  Tensor values;   // [n, dense_shape[1:]...], the dense tensor's dtype and device
  Shape dense_shape;

  bool defined() const { return values.defined(); }
  int64_t num_rows() const { return indices.defined() ? indices.numel() : 0; }
  // Elements in one row of the dense tensor (the product of dense_shape[1:]).
  int64_t row_elements() const;
  // Bytes the slices occupy (indices as int64 and values), what moving them costs.
  size_t nbytes() const;
};

// Slices checked: indices int64 of rank 1 within [0, dense_shape[0]), values of shape
// [n, dense_shape[1:]...] on the indices' device. An InvalidArgumentError names what differs.
IndexedSlices make_indexed_slices(Tensor indices, Tensor values, Shape dense_shape);

// The dense tensor: zeros with every row of `values` added at its index, repeats in their
// order (what gather's dense gradient computes, bit for bit).
Tensor to_dense(const IndexedSlices& slices);

// The same rows with repeats summed (TF's _deduplicate_indexed_slices: unique, then a segment
// sum): each row once, in the order of its first appearance, its values summed in their order.
// Slices on the CPU; on another device an InvalidArgumentError (densify them instead).
IndexedSlices sum_duplicates(const IndexedSlices& slices);

// Slices of one dense shape and dtype, concatenated (the values of a row read twice, or read by
// several replicas); their dense value is the sum of theirs.
IndexedSlices concat_slices(const std::vector<IndexedSlices>& parts);

// The slices with values multiplied by `factor`.
IndexedSlices scale_slices(const IndexedSlices& slices, double factor);

// Writes `rows` (values of shape [k, target.shape()[1:]...]) into `target` at the distinct row
// indices `indices` (int64 [k]), in place; CPU tensors. What a row-sparse update stores back
// after computing the new values of the rows it touched.
void scatter_rows(Tensor& target, const Tensor& indices, const Tensor& rows);

}  // namespace est::ops
