// weighted_categorical_column and linear_model, after WeightedCategoricalColumn and
// linear_model / _create_weighted_sum in tensorflow/python/feature_column/feature_column_v2.py
// and feature_column.py.
#pragma once

#include <string>
#include <vector>

#include "feature_column/column.h"
#include "feature_column/dense_columns.h"

namespace est::feature_column {

// A categorical column whose ids carry the float weights of the feature `weight_feature_key`
// (sparse with the ids' indices, or dense [batch, k] where 0 counts as absent). Name:
// "<categorical>_weighted_by_<weight key>".
class WeightedCategoricalColumn final : public CategoricalColumn {
 public:
  WeightedCategoricalColumn(CategoricalColumnPtr categorical, std::string weight_feature_key);
  std::string name() const override;
  void add_parse_spec(FeatureSpecs& specs) const override;
  int64_t num_buckets() const override { return categorical_->num_buckets(); }
  IdWeightPair sparse_tensors(const Features& features) const override;

 private:
  CategoricalColumnPtr categorical_;
  std::string weight_feature_key_;
};

std::shared_ptr<const WeightedCategoricalColumn> weighted_categorical_column(
    CategoricalColumnPtr categorical, std::string weight_feature_key);

struct LinearModelOptions {
  int64_t units = 1;
  Combiner sparse_combiner = Combiner::kSum;  // how a categorical column's weights combine
  std::string name;                           // the scope; empty: "linear_model"
};

// tf.compat.v1.feature_column.linear_model: float32 [batch, units], the sum over the columns
// (sorted by name) of their weighted sums plus "bias_weights" [units]. A categorical column
// (bucketized ones included) contributes its ids' rows of "<column>/weights"
// [num_buckets, units] combined by sparse_combiner; a dense column its flattened tensor times
// "<column>/weights" [elements, units]. Every weight starts at zero, as in TF.
Tensor linear_model(const Features& features, const std::vector<ColumnPtr>& columns,
                    nn::ModelContext& context, const LinearModelOptions& options = {});

}  // namespace est::feature_column
