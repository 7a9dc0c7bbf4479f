// The feature-column interfaces, following tensorflow/python/feature_column/feature_column_v2.py.
//
// A column is an immutable description, shared by pointer (ColumnPtr), that knows which raw
// features it reads (its parse spec) and how to turn them into a tensor:
//   - a DenseColumn (numeric, bucketized, indicator, embedding) gives a float32 tensor
//     [batch, ...variable_shape], which input_layer flattens and concatenates;
//   - a CategoricalColumn (identity, vocabulary, hash bucket, crossed, bucketized) gives ids:
//     a sparse int64 [batch, k] tensor of ids in [0, num_buckets), with optional weights.
// Raw features come from Features as the input pipeline made them: dense [batch] or
// [batch, ...] tensors, or sparse [batch, k] ones (VarLenFeature). A rank-1 feature is read as
// [batch, 1], as TF does.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "data/element.h"
#include "data/example.h"
#include "nn/model_context.h"

namespace est::feature_column {

using data::Features;
using data::FeatureSpecs;
using ops::Shape;
using ops::Tensor;

// A categorical column's output: ids, sparse int64 [batch, k]; weights, undefined or sparse
// float32 with the same indices (weighted_categorical_column).
struct IdWeightPair {
  Tensor ids;
  Tensor weights;
};

class FeatureColumn {
 public:
  virtual ~FeatureColumn() = default;
  // The column's name, used for sorting in input_layer and in variable names.
  virtual std::string name() const = 0;
  // Adds the raw features it reads to `specs` (make_parse_example_spec); a feature asked for
  // twice with different specs is an InvalidArgumentError.
  virtual void add_parse_spec(FeatureSpecs& specs) const = 0;
};

class DenseColumn : public virtual FeatureColumn {
 public:
  // Per-example shape of the dense tensor (e.g. {dimension} for an embedding).
  virtual Shape variable_shape() const = 0;
  // float32 [batch, ...variable_shape]. Columns with variables (embedding) create or find them
  // through `context` under its current variable scope; the others ignore it.
  virtual Tensor dense_tensor(const Features& features, nn::ModelContext* context) const = 0;
  // The variable scope input_layer opens for the column (TF's _var_scope_name): its name,
  // or the shared name of columns that share their variables (shared embeddings).
  virtual std::string var_scope_name() const { return name(); }
};

class CategoricalColumn : public virtual FeatureColumn {
 public:
  virtual int64_t num_buckets() const = 0;
  virtual IdWeightPair sparse_tensors(const Features& features) const = 0;
  // The ids of a dense raw feature in its own layout: int64 [batch, k], -1 where TF's ignore
  // value ("" or -1) stood; nullopt where the column has none (a sparse feature, a weighted or
  // crossed column). Indicator, embedding and linear columns use it in PREDICT mode, with ops
  // an export can trace (the lookup itself is reported to the tracer: lookup.h).
  virtual std::optional<Tensor> dense_ids(const Features& features) const {
    (void)features;
    return std::nullopt;
  }
};

using ColumnPtr = std::shared_ptr<const FeatureColumn>;
using DenseColumnPtr = std::shared_ptr<const DenseColumn>;
using CategoricalColumnPtr = std::shared_ptr<const CategoricalColumn>;

// tf.feature_column.make_parse_example_spec: every raw feature the columns read.
FeatureSpecs make_parse_example_spec(const std::vector<ColumnPtr>& columns);
// The same for a list of dense (or categorical) columns, such as input_layer's.
template <class Column>
FeatureSpecs make_parse_example_spec(const std::vector<std::shared_ptr<const Column>>& columns) {
  return make_parse_example_spec(std::vector<ColumnPtr>(columns.begin(), columns.end()));
}

// Helpers the columns share (columns_util.cpp).
namespace detail {
// The raw feature `key` with a batch dimension: rank-1 dense [batch] becomes [batch, 1], a
// sparse [batch] becomes [batch, 1]; a missing feature or a scalar is an InvalidArgumentError
// naming the column.
Tensor raw_feature(const Features& features, const std::string& key, const std::string& column);
// TF's _to_sparse_input_and_drop_ignore_values: a dense [batch, k] input becomes sparse without
// its "ignore" values ("" for strings, -1 for integers); a sparse input is returned as is.
Tensor to_sparse_dropping_ignored(const Tensor& input);
// Adds `spec` for `key`, checking that an existing spec for it is the same kind and dtype.
void add_spec(FeatureSpecs& specs, const std::string& key, const data::FeatureSpec& spec);
// A sparse tensor with the same indices and shape holding `values`.
Tensor with_values(const Tensor& sparse_tensor, const Tensor& values);
}  // namespace detail

}  // namespace est::feature_column
