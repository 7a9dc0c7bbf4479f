// indicator_column and embedding_column: dense views of a categorical column, after
// IndicatorColumn and EmbeddingColumn in tensorflow/python/feature_column/feature_column_v2.py
// and safe_embedding_lookup_sparse in tensorflow/python/ops/embedding_ops.py.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "feature_column/column.h"
#include "feature_column/sequence_column.h"
#include "nn/initializers.h"

namespace est::feature_column {

// Multi-hot: float32 [batch, num_buckets], each id's count in its example (the sum of its
// weights for a weighted column). Ids outside [0, num_buckets), such as the -1 of an unknown
// vocabulary value, count for nothing. Over a sequence categorical column it is a sequence
// column (one multi-hot row per step, sequence_column.h) and not a dense one.
class IndicatorColumn final : public DenseColumn, public SequenceDenseColumn {
 public:
  explicit IndicatorColumn(CategoricalColumnPtr categorical);
  std::string name() const override { return categorical_->name() + "_indicator"; }
  void add_parse_spec(FeatureSpecs& specs) const override { categorical_->add_parse_spec(specs); }
  Shape variable_shape() const override { return {categorical_->num_buckets()}; }
  Tensor dense_tensor(const Features& features, nn::ModelContext* context) const override;
  SequenceDenseTensor sequence_dense_tensor(const Features& features,
                                            nn::ModelContext* context) const override;

 private:
  CategoricalColumnPtr categorical_;
};

enum class Combiner { kMean, kSqrtn, kSum };

struct EmbeddingColumnOptions {
  Combiner combiner = Combiner::kMean;
  // Default: truncated normal with mean 0 and standard deviation 1 / sqrt(dimension).
  std::optional<nn::Initializer> initializer;
  // Each looked-up embedding with an L2 norm above max_norm is scaled to it before combining
  // (tf.clip_by_norm per row, as embedding_lookup's max_norm); must be positive.
  std::optional<double> max_norm;
  bool trainable = true;
};

// float32 [batch, dimension]: each example's embeddings (rows of the variable
// "embedding_weights" [num_buckets, dimension], created under the context's current scope)
// combined by the combiner over its ids: sum, mean (sum / total weight) or sqrtn
// (sum / sqrt(sum of squared weights)); ids < 0 (and weights <= 0) are dropped first, and an
// example with no ids gets zeros. Over a sequence categorical column it is a sequence column
// (one combined embedding per step, sequence_column.h) and not a dense one.
class EmbeddingColumn final : public DenseColumn, public SequenceDenseColumn {
 public:
  EmbeddingColumn(CategoricalColumnPtr categorical, int64_t dimension,
                  EmbeddingColumnOptions options);
  std::string name() const override { return categorical_->name() + "_embedding"; }
  void add_parse_spec(FeatureSpecs& specs) const override { categorical_->add_parse_spec(specs); }
  Shape variable_shape() const override { return {dimension_}; }
  Tensor dense_tensor(const Features& features, nn::ModelContext* context) const override;
  SequenceDenseTensor sequence_dense_tensor(const Features& features,
                                            nn::ModelContext* context) const override;

 private:
  CategoricalColumnPtr categorical_;
  int64_t dimension_;
  EmbeddingColumnOptions options_;
};

// shared_embedding_columns (tf.compat.v1.feature_column.shared_embedding_columns): embedding
// columns over categorical columns with equal num_buckets that look up one variable,
// "<shared name>/embedding_weights" (shared name: the columns' names sorted, joined with "_",
// plus "_shared_embedding", unless given). Each column is named
// "<categorical>_shared_embedding".
class SharedEmbeddingColumn final : public DenseColumn, public SequenceDenseColumn {
 public:
  SharedEmbeddingColumn(CategoricalColumnPtr categorical, int64_t dimension,
                        EmbeddingColumnOptions options, std::string shared_name);
  std::string name() const override { return categorical_->name() + "_shared_embedding"; }
  std::string var_scope_name() const override { return shared_name_; }
  void add_parse_spec(FeatureSpecs& specs) const override { categorical_->add_parse_spec(specs); }
  Shape variable_shape() const override { return {dimension_}; }
  Tensor dense_tensor(const Features& features, nn::ModelContext* context) const override;
  SequenceDenseTensor sequence_dense_tensor(const Features& features,
                                            nn::ModelContext* context) const override;

 private:
  CategoricalColumnPtr categorical_;
  int64_t dimension_;
  EmbeddingColumnOptions options_;
  std::string shared_name_;
};

std::shared_ptr<const IndicatorColumn> indicator_column(CategoricalColumnPtr categorical);
std::vector<std::shared_ptr<const SharedEmbeddingColumn>> shared_embedding_columns(
    const std::vector<CategoricalColumnPtr>& categorical_columns, int64_t dimension,
    EmbeddingColumnOptions options = {}, std::string shared_embedding_collection_name = "");
std::shared_ptr<const EmbeddingColumn> embedding_column(CategoricalColumnPtr categorical,
                                                        int64_t dimension,
                                                        EmbeddingColumnOptions options = {});

namespace detail {
// The variable "embedding_weights" [num_buckets, dimension] under the context's current scope.
Tensor embedding_weights(nn::ModelContext* context, const std::string& column, int64_t num_buckets,
                         int64_t dimension, const EmbeddingColumnOptions& options);
}  // namespace detail

// safe_embedding_lookup_sparse over `weights` [vocabulary, dimension]: `ids` sparse int64
// [batch, k], `id_weights` undefined or sparse float32 with the same indices; `max_norm` clips
// each looked-up row's L2 norm first (TF's _clip in embedding_ops.py).
// (sequence_columns.cpp applies it to [batch, T, k] ids through [batch * T, k].)
Tensor safe_embedding_lookup_sparse(const Tensor& weights, const Tensor& ids,
                                    const Tensor& id_weights, Combiner combiner,
                                    std::optional<double> max_norm = std::nullopt);

// The PREDICT-mode forms over dense ids (CategoricalColumn::dense_ids: int64 [batch, k], -1
// for none), built from ops only so that an export traces them into its graph; they give what
// the sparse forms give. dense_ids_for_predict: the column's dense ids when `context` is in
// PREDICT mode and the raw feature is dense, else nullopt (training keeps the sparse forms,
// whose gradients are row-sparse over the ids present only).
std::optional<Tensor> dense_ids_for_predict(const CategoricalColumn& column,
                                            const Features& features,
                                            const nn::ModelContext* context);
Tensor indicator_from_dense_ids(const Tensor& ids, int64_t num_buckets);  // f32 [batch, buckets]
Tensor embedding_lookup_dense(const Tensor& weights, const Tensor& ids, Combiner combiner,
                              std::optional<double> max_norm = std::nullopt);

// tf.clip_by_norm over each row of `rows` [n, d]: rows * max_norm / max(||row||, max_norm),
// with TF's safe norm (a zero row stays zero, with a finite gradient).
Tensor clip_rows_by_norm(const Tensor& rows, double max_norm);

}  // namespace est::feature_column
