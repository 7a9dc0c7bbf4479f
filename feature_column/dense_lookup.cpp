// Indicator and embedding lookups over dense ids, from ops only (see dense_columns.h): what an
// export traces for the categorical columns' dense views. Every constant here is a scalar or
// the weights, so nothing in the graph depends on the batch.
//
//   indicator: sum over k of one_hot(ids, buckets) (one_hot gives zeros for -1);
//   embedding: rows gathered at max(ids, 0), each clipped to max_norm as tf.clip_by_norm does,
//     times the mask ids >= 0, summed over k and divided by the combiner's denominator (mean:
//     the count of ids, sqrtn: its root, sum: 1), at least 1, so an example without ids gets
//     zeros as safe_embedding_lookup_sparse gives them.
#include <fmt/format.h>

#include "feature_column/dense_columns.h"
#include "ops/array_ops.h"
#include "ops/math.h"

namespace est::feature_column {

std::optional<Tensor> dense_ids_for_predict(const CategoricalColumn& column,
                                            const Features& features,
                                            const nn::ModelContext* context) {
  if (context == nullptr || context->mode() != nn::Mode::kPredict) return std::nullopt;
  return column.dense_ids(features);
}

Tensor indicator_from_dense_ids(const Tensor& ids, int64_t num_buckets) {
  return ops::sum(ops::one_hot(ids, num_buckets), {1});
}

Tensor embedding_lookup_dense(const Tensor& weights, const Tensor& ids, Combiner combiner,
                              std::optional<double> max_norm) {
  if (ids.rank() != 2 || ids.dtype() != DType::kI64)
    throw InvalidArgumentError(
        fmt::format("embedding_lookup_dense: ids must be int64 [batch, k], got {} {}",
                    ops::dtype_name(ids.dtype()), ops::shape_str(ids.shape())));
  const Tensor local = ids.to(weights.device());
  const Tensor present =
      ops::cast(ops::greater(local, Tensor::scalar(-1, DType::kI64).to(weights.device())),
                weights.dtype());  // [batch, k]
  const Tensor safe = ops::maximum(local, Tensor::scalar(0, DType::kI64).to(weights.device()));
  Tensor rows = ops::gather(weights, safe);  // [batch, k, dimension]
  const auto scalar = [&](double value) {
    return Tensor::scalar(value, weights.dtype()).to(weights.device());
  };
  if (max_norm) {
    const Tensor norm = ops::sqrt(ops::sum(ops::mul(rows, rows), {2}, true));  // [batch, k, 1]
    rows = ops::div(ops::mul(rows, scalar(*max_norm)), ops::maximum(norm, scalar(*max_norm)));
  }
  rows = ops::mul(rows, ops::expand_dims(present, 2));
  const Tensor total = ops::sum(rows, {1});  // [batch, dimension]
  if (combiner == Combiner::kSum) return total;
  Tensor denominator = ops::sum(present, {1}, true);  // [batch, 1]
  if (combiner == Combiner::kSqrtn) denominator = ops::sqrt(denominator);
  return ops::div(total, ops::maximum(denominator, scalar(1.0)));
}

}  // namespace est::feature_column
