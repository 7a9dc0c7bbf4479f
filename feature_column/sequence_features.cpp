// sequence_features (Keras' SequenceFeatures layer) and concatenate_context_input (see
// sequence_column.h), following tensorflow/python/keras/feature_column/sequence_feature_column.py
// (columns checked to be SequenceDenseColumns and sorted by name, each reshaped to
// [batch, T, -1], concatenated on the last axis, lengths asserted equal) and
// tensorflow/python/feature_column/sequence_feature_column.py (concatenate_context_input).
#include <algorithm>

#include <fmt/format.h>

#include "feature_column/dense_columns.h"
#include "feature_column/sequence_column.h"
#include "ops/array_ops.h"

namespace est::feature_column {

SequenceInput sequence_features(const Features& features, const std::vector<ColumnPtr>& columns,
                                nn::ModelContext& context, const SequenceFeaturesOptions& options) {
  constexpr std::string_view kBase = "sequence_features";
  if (columns.empty()) throw InvalidArgumentError("sequence_features: no feature columns");
  std::vector<SequenceDenseColumnPtr> sorted;
  for (const ColumnPtr& column : columns) {
    if (!column) throw InvalidArgumentError("sequence_features: a feature column is null");
    auto sequence = std::dynamic_pointer_cast<const SequenceDenseColumn>(column);
    if (!sequence)
      throw InvalidArgumentError(fmt::format(
          "sequence_features: feature column '{}' is not a sequence column; items of "
          "feature_columns must be SequenceDenseColumns (sequence_numeric_column, or an "
          "embedding_column / indicator_column over a sequence_categorical_column_with_*). You "
          "can wrap a sequence categorical column with an embedding_column or indicator_column",
          column->name()));
    sorted.push_back(std::move(sequence));
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name() == sorted[i - 1]->name())
      throw InvalidArgumentError(
          fmt::format("sequence_features: duplicate feature column name '{}'", sorted[i]->name()));
  auto layer_scope = context.variable_scope(context.layer_name(kBase, options.name));
  std::vector<Tensor> parts;
  Tensor length;
  std::string first;
  for (const SequenceDenseColumnPtr& column : sorted) {
    const auto* dense = dynamic_cast<const DenseColumn*>(column.get());
    auto column_scope = context.variable_scope(dense ? dense->var_scope_name() : column->name());
    SequenceDenseTensor out = column->sequence_dense_tensor(features, &context);
    const int64_t batch = out.dense.dim(0), steps = out.dense.dim(1);
    if (!length.defined()) {
      length = out.sequence_length;
      first = column->name();
    } else {
      const std::vector<int64_t> a = length.to_vector<int64_t>(),
                                 b = out.sequence_length.to_vector<int64_t>();
      if (a != b || parts[0].dim(1) != steps)
        throw InvalidArgumentError(fmt::format(
            "sequence_features: the sequence lengths of column '{}' (padded to {} steps) differ "
            "from those of column '{}' (padded to {}); every column must read sequences of the "
            "same lengths",
            column->name(), steps, first, parts[0].dim(1)));
    }
    parts.push_back(out.dense.reshape({batch, steps, ops::num_elements(column->variable_shape())}));
  }
  return {parts.size() == 1 ? parts[0] : ops::concat(parts, 2), length};
}

Tensor concatenate_context_input(const Tensor& context_input, const Tensor& sequence_input) {
  if (sequence_input.rank() != 3)
    throw InvalidArgumentError("concatenate_context_input: sequence_input must have rank 3, got " +
                               ops::shape_str(sequence_input.shape()));
  if (context_input.rank() != 2)
    throw InvalidArgumentError("concatenate_context_input: context_input must have rank 2, got " +
                               ops::shape_str(context_input.shape()));
  if (sequence_input.dtype() != DType::kF32 || context_input.dtype() != DType::kF32)
    throw InvalidArgumentError("concatenate_context_input: both inputs must be float32");
  if (context_input.dim(0) != sequence_input.dim(0))
    throw InvalidArgumentError(
        fmt::format("concatenate_context_input: batch sizes differ (context {}, sequence {})",
                    context_input.dim(0), sequence_input.dim(0)));
  const int64_t steps = sequence_input.dim(1);
  if (steps == 0)
    return Tensor::zeros({sequence_input.dim(0), 0, sequence_input.dim(2) + context_input.dim(1)},
                         DType::kF32, sequence_input.device());
  const std::vector<Tensor> tiled(static_cast<size_t>(steps), ops::expand_dims(context_input, 1));
  return ops::concat({sequence_input, ops::concat(tiled, 1)}, 2);
}

}  // namespace est::feature_column
