// numeric_column and bucketized_column (tensorflow/python/feature_column/feature_column_v2.py).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "feature_column/column.h"

namespace est::feature_column {

struct NumericColumnOptions {
  Shape shape{1};                                    // per example
  std::optional<std::vector<double>> default_value;  // parse default: one value or shape's count
  DType dtype = DType::kF32;                         // parse dtype: kF32 or kI64
  // The parse default of a kI64 column, exact (default_value's doubles hold integers exactly
  // only up to 2^53; TF's numeric_column(dtype=int64) default is exact). Not with default_value.
  std::optional<std::vector<int64_t>> default_int64;
  std::function<Tensor(const Tensor&)> normalizer_fn;  // applied to the raw feature, then float32
};

class NumericColumn final : public DenseColumn {
 public:
  NumericColumn(std::string key, NumericColumnOptions options);
  std::string name() const override { return key_; }
  void add_parse_spec(FeatureSpecs& specs) const override;
  Shape variable_shape() const override { return options_.shape; }
  // float32 [batch, ...shape]: the raw feature (dense only), normalised, cast.
  Tensor dense_tensor(const Features& features, nn::ModelContext* context) const override;
  const std::string& key() const { return key_; }

 private:
  std::string key_;
  NumericColumnOptions options_;
};

// Buckets of a numeric column: bucket i holds boundaries[i-1] <= x < boundaries[i] (a value
// equal to a boundary goes to the bucket above it, as tf.bucketize does). Dense: one-hot
// [batch, ...source shape, buckets]; categorical: for source element j the id
// bucket + j * (boundaries + 1), num_buckets = (boundaries + 1) * source elements.
class BucketizedColumn final : public DenseColumn, public CategoricalColumn {
 public:
  BucketizedColumn(std::shared_ptr<const NumericColumn> source, std::vector<double> boundaries);
  std::string name() const override { return source_->name() + "_bucketized"; }
  void add_parse_spec(FeatureSpecs& specs) const override { source_->add_parse_spec(specs); }
  Shape variable_shape() const override;
  Tensor dense_tensor(const Features& features, nn::ModelContext* context) const override;
  int64_t num_buckets() const override;
  IdWeightPair sparse_tensors(const Features& features) const override;

 private:
  Tensor bucket_ids(const Features& features) const;  // int64 [batch, source elements]
  std::shared_ptr<const NumericColumn> source_;
  std::vector<double> boundaries_;
};

std::shared_ptr<const NumericColumn> numeric_column(std::string key,
                                                    NumericColumnOptions options = {});
// Boundaries must be strictly increasing and not empty.
std::shared_ptr<const BucketizedColumn> bucketized_column(
    std::shared_ptr<const NumericColumn> source, std::vector<double> boundaries);

}  // namespace est::feature_column
