// Sequence feature columns and the SequenceFeatures layer, following
// tensorflow/python/feature_column/sequence_feature_column.py (sequence_numeric_column,
// sequence_categorical_column_with_*), SequenceCategoricalColumn / SequenceDenseColumn in
// feature_column_v2.py, sequence_length_from_sparse_tensor in feature_column/utils.py, and
// Keras' SequenceFeatures layer
// (tensorflow/python/keras/feature_column/sequence_feature_column.py).
//
// A sequence column reads a sparse feature per example: [batch, values] (a VarLenFeature of
// an Example, the spec make_parse_example_spec gives) or [batch, steps, values] (a
// VarLenFeature of a SequenceExample's feature lists). It gives a dense float32
// [batch, T, ...variable_shape] and each example's length (int64 [batch]), as
// get_sequence_dense_tensor does:
//   - sequence_numeric_column: values to dense (padding with default_value), regrouped as
//     elements of `shape`; length = ceil(values / elements) ([batch, values] input) or the
//     number of steps ([batch, steps, values] input);
//   - embedding_column / indicator_column over a sequence_categorical_column_with_*: one
//     embedding (or multi-hot row) per step; length = the number of steps with ids.
// sequence_features (SequenceFeatures) sorts its columns by name, flattens each to
// [batch, T, elements] and concatenates them on the last axis; the columns' lengths must
// agree. A column that is not a sequence column is an error naming it; so is an embedding or
// indicator column of a non-sequence categorical column, and (in input_layer) one of a
// sequence categorical column, with TF's suggested fixes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "feature_column/categorical.h"
#include "feature_column/column.h"

namespace est::feature_column {

struct SequenceDenseTensor {
  Tensor dense;            // float32 [batch, T, ...variable_shape]
  Tensor sequence_length;  // int64 [batch]
};

class SequenceDenseColumn : public virtual FeatureColumn {
 public:
  virtual Shape variable_shape() const = 0;
  virtual SequenceDenseTensor sequence_dense_tensor(const Features& features,
                                                    nn::ModelContext* context) const = 0;
};
using SequenceDenseColumnPtr = std::shared_ptr<const SequenceDenseColumn>;

// A categorical column read as a sequence: the wrapped column's ids (and weights) reshaped to
// sparse [batch, T, k] so that steps are not combined. Same name, parse spec and buckets.
class SequenceCategoricalColumn final : public CategoricalColumn {
 public:
  explicit SequenceCategoricalColumn(CategoricalColumnPtr categorical);
  std::string name() const override { return categorical_->name(); }
  void add_parse_spec(FeatureSpecs& specs) const override { categorical_->add_parse_spec(specs); }
  int64_t num_buckets() const override { return categorical_->num_buckets(); }
  IdWeightPair sparse_tensors(const Features& features) const override;

 private:
  CategoricalColumnPtr categorical_;
};

struct SequenceNumericColumnOptions {
  Shape shape{1};                                      // per step
  double default_value = 0.0;                          // pads the sparse values to dense
  DType dtype = DType::kF32;                           // parse dtype: kF32 or kI64
  std::function<Tensor(const Tensor&)> normalizer_fn;  // applied to the values present
};

class SequenceNumericColumn final : public SequenceDenseColumn {
 public:
  SequenceNumericColumn(std::string key, SequenceNumericColumnOptions options);
  std::string name() const override { return key_; }
  void add_parse_spec(FeatureSpecs& specs) const override;
  Shape variable_shape() const override { return options_.shape; }
  SequenceDenseTensor sequence_dense_tensor(const Features& features,
                                            nn::ModelContext* context) const override;

 private:
  std::string key_;
  SequenceNumericColumnOptions options_;
};

std::shared_ptr<const SequenceNumericColumn> sequence_numeric_column(
    std::string key, SequenceNumericColumnOptions options = {});
std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_identity(
    std::string key, int64_t num_buckets, std::optional<int64_t> default_value = std::nullopt);
std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_hash_bucket(
    std::string key, int64_t hash_bucket_size, DType dtype = DType::kString);
std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_vocabulary_list(
    std::string key, std::vector<std::string> vocabulary_list, VocabularyOptions options = {});
std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_vocabulary_list(
    std::string key, std::vector<int64_t> vocabulary_list, VocabularyOptions options = {});
std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_vocabulary_file(
    std::string key, const std::string& vocabulary_file, VocabularyFileOptions options = {});

struct SequenceFeaturesOptions {
  std::string name;  // the layer's scope; empty: "sequence_features" (numbered per call)
};
struct SequenceInput {
  Tensor input;            // float32 [batch, T, total elements of the columns]
  Tensor sequence_length;  // int64 [batch]
};
// The Keras SequenceFeatures layer: variables under "sequence_features/<column>/..." (an
// embedding's "sequence_features/<categorical>_embedding/embedding_weights").
SequenceInput sequence_features(const Features& features, const std::vector<ColumnPtr>& columns,
                                nn::ModelContext& context,
                                const SequenceFeaturesOptions& options = {});
template <class Column>
SequenceInput sequence_features(const Features& features,
                                const std::vector<std::shared_ptr<const Column>>& columns,
                                nn::ModelContext& context,
                                const SequenceFeaturesOptions& options = {}) {
  return sequence_features(features, std::vector<ColumnPtr>(columns.begin(), columns.end()),
                           context, options);
}

// concatenate_context_input: context [batch, d1] repeated at every step of sequence
// [batch, T, d0] and appended: [batch, T, d0 + d1].
Tensor concatenate_context_input(const Tensor& context_input, const Tensor& sequence_input);

namespace detail {
// sequence_length_from_sparse_tensor: per row of `sparse` (indices [n, rank >= 2]), the largest
// index in dimension 1 plus one, over `num_elements` rounded up; 0 for rows without entries.
Tensor sequence_length_from_sparse(const Tensor& sparse, int64_t num_elements = 1);
// Whether `categorical` is a sequence column.
bool is_sequence(const CategoricalColumn& categorical);
// The errors an embedding or indicator column (kind "embedding_column" / "indicator_column",
// named `column`) raises when used in the wrong layer.
[[noreturn]] void throw_sequence_in_dense_layer(const std::string& kind, const std::string& column);
[[noreturn]] void throw_dense_in_sequence_layer(const std::string& kind, const std::string& column);
}  // namespace detail

}  // namespace est::feature_column
