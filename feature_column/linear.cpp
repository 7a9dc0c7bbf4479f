// weighted_categorical_column and linear_model (see linear.h).
#include "feature_column/linear.h"

#include <algorithm>

#include <fmt/format.h>

#include "ops/array_ops.h"
#include "ops/linalg.h"
#include "ops/math.h"

namespace est::feature_column {

WeightedCategoricalColumn::WeightedCategoricalColumn(CategoricalColumnPtr categorical,
                                                     std::string weight_feature_key)
    : categorical_(std::move(categorical)), weight_feature_key_(std::move(weight_feature_key)) {
  if (!categorical_)
    throw InvalidArgumentError("weighted_categorical_column: categorical_column is null");
  if (weight_feature_key_.empty())
    throw InvalidArgumentError("weighted_categorical_column '" + categorical_->name() +
                               "': weight_feature_key must not be empty");
}

std::string WeightedCategoricalColumn::name() const {
  return categorical_->name() + "_weighted_by_" + weight_feature_key_;
}

void WeightedCategoricalColumn::add_parse_spec(FeatureSpecs& specs) const {
  categorical_->add_parse_spec(specs);
  detail::add_spec(specs, weight_feature_key_, data::VarLenFeature{DType::kF32});
}

IdWeightPair WeightedCategoricalColumn::sparse_tensors(const Features& features) const {
  IdWeightPair pair = categorical_->sparse_tensors(features);
  if (pair.weights.defined())
    throw InvalidArgumentError("weighted_categorical_column '" + name() +
                               "': the categorical column is weighted already");
  Tensor weights = detail::raw_feature(features, weight_feature_key_, name());
  if (!weights.is_sparse()) {  // dense: 0 counts as absent, as TF's ignore_value 0.0
    const Tensor host = ops::cast(weights, DType::kF32).to(ops::Device::cpu());
    std::vector<int64_t> indices;
    std::vector<float> values;
    const float* in = host.data<float>();
    for (int64_t i = 0; i < host.numel(); ++i)
      if (in[i] != 0.0f) {
        indices.push_back(i / host.dim(1));
        indices.push_back(i % host.dim(1));
        values.push_back(in[i]);
      }
    const int64_t n = static_cast<int64_t>(values.size());
    weights = Tensor::sparse(Tensor::from_vector(indices, {n, 2}), Tensor::from_vector(values),
                             host.shape());
  } else if (weights.dtype() != DType::kF32) {
    weights = detail::with_values(weights, ops::cast(weights.values(), DType::kF32));
  }
  if (weights.indices().shape() != pair.ids.indices().shape() ||
      weights.indices().to_vector<int64_t>() != pair.ids.indices().to_vector<int64_t>())
    throw InvalidArgumentError(fmt::format(
        "weighted_categorical_column '{}': the weights of '{}' must have the same indices as "
        "the ids ({} entries vs {})",
        name(), weight_feature_key_, weights.indices().dim(0), pair.ids.indices().dim(0)));
  return {pair.ids, weights};
}

std::shared_ptr<const WeightedCategoricalColumn> weighted_categorical_column(
    CategoricalColumnPtr categorical, std::string weight_feature_key) {
  return std::make_shared<const WeightedCategoricalColumn>(std::move(categorical),
                                                           std::move(weight_feature_key));
}

Tensor linear_model(const Features& features, const std::vector<ColumnPtr>& columns,
                    nn::ModelContext& context, const LinearModelOptions& options) {
  if (columns.empty()) throw InvalidArgumentError("linear_model: no feature columns");
  if (options.units < 1) throw InvalidArgumentError("linear_model: units must be >= 1");
  std::vector<ColumnPtr> sorted = columns;
  for (const ColumnPtr& column : sorted)
    if (!column) throw InvalidArgumentError("linear_model: a feature column is null");
  std::sort(sorted.begin(), sorted.end(),
            [](const ColumnPtr& a, const ColumnPtr& b) { return a->name() < b->name(); });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name() == sorted[i - 1]->name())
      throw InvalidArgumentError("linear_model: duplicate feature column name '" +
                                 sorted[i]->name() + "'");
  auto scope = context.variable_scope(context.layer_name("linear_model", options.name));
  Tensor total;
  for (const ColumnPtr& column : sorted) {
    auto column_scope = context.variable_scope(column->name());
    Tensor sum;
    if (const auto* categorical = dynamic_cast<const CategoricalColumn*>(column.get())) {
      Tensor weights = context.get_variable("weights", {categorical->num_buckets(), options.units},
                                            DType::kF32, nn::zeros());
      if (auto ids = dense_ids_for_predict(*categorical, features, &context)) {
        sum = embedding_lookup_dense(weights, *ids, options.sparse_combiner);
      } else {
        IdWeightPair pair = categorical->sparse_tensors(features);
        sum =
            safe_embedding_lookup_sparse(weights, pair.ids, pair.weights, options.sparse_combiner);
      }
    } else if (const auto* dense = dynamic_cast<const DenseColumn*>(column.get())) {
      const int64_t elements = ops::num_elements(dense->variable_shape());
      Tensor weights =
          context.get_variable("weights", {elements, options.units}, DType::kF32, nn::zeros());
      Tensor tensor = dense->dense_tensor(features, &context);
      sum = ops::matmul(tensor.reshape({tensor.dim(0), elements}), weights);
    } else {
      throw InvalidArgumentError("linear_model: column '" + column->name() +
                                 "' is neither dense nor categorical");
    }
    if (total.defined() && sum.dim(0) != total.dim(0))
      throw InvalidArgumentError(fmt::format(
          "linear_model: batch size (first dimension) of each feature must be the same; column "
          "'{}' has {} but the columns before it have {}",
          column->name(), sum.dim(0), total.dim(0)));
    total = total.defined() ? ops::add(total, sum) : sum;
  }
  Tensor bias = context.get_variable("bias_weights", {options.units}, DType::kF32, nn::zeros());
  return ops::add(total, bias);
}

}  // namespace est::feature_column
