// indicator_column, embedding_column and safe_embedding_lookup_sparse (see dense_columns.h).
//
// The lookup gathers the rows of the ids that remain (ops::gather, whose gradient adds into
// the weights' rows) and combines them with one matmul by a constant [batch, n] matrix holding
// each entry's weight over its example's denominator, so the combiners' gradients are the
// matmul's; rows of examples without ids stay zero. max_norm clips each gathered row first as
// tf.clip_by_norm does (tensorflow/python/ops/clip_ops.py: the norm made safe where it is 0),
// which keeps the table's gradient row-sparse: it still reaches the table through the gather.
#include "feature_column/dense_columns.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ops/array_ops.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "ops/registry.h"

namespace est::feature_column {

IndicatorColumn::IndicatorColumn(CategoricalColumnPtr categorical)
    : categorical_(std::move(categorical)) {
  if (!categorical_) throw InvalidArgumentError("indicator_column: categorical_column is null");
}

Tensor IndicatorColumn::dense_tensor(const Features& features, nn::ModelContext* context) const {
  if (detail::is_sequence(*categorical_))
    detail::throw_sequence_in_dense_layer("indicator_column", name());
  if (auto ids = dense_ids_for_predict(*categorical_, features, context))
    return indicator_from_dense_ids(*ids, categorical_->num_buckets());
  IdWeightPair pair = categorical_->sparse_tensors(features);
  const int64_t batch = pair.ids.dim(0), buckets = categorical_->num_buckets();
  const Tensor indices = pair.ids.indices().to(ops::Device::cpu());
  const std::vector<int64_t> ids = pair.ids.values().to_vector<int64_t>();
  const std::vector<float> weights = pair.weights.defined()
                                         ? pair.weights.values().to_vector<float>()
                                         : std::vector<float>(ids.size(), 1.0f);
  Tensor out = Tensor::zeros({batch, buckets});
  float* dst = out.data<float>();
  const int64_t* index = indices.data<int64_t>();
  for (size_t e = 0; e < ids.size(); ++e)
    if (ids[e] >= 0 && ids[e] < buckets) dst[index[2 * e] * buckets + ids[e]] += weights[e];
  // A loop on the host over the ids (training, or a sparse or weighted feature): an export
  // refuses the column by its name.
  ops::report_host_computation(fmt::format("indicator_column '{}'", name()).c_str(), out);
  return out;
}

EmbeddingColumn::EmbeddingColumn(CategoricalColumnPtr categorical, int64_t dimension,
                                 EmbeddingColumnOptions options)
    : categorical_(std::move(categorical)), dimension_(dimension), options_(std::move(options)) {
  if (!categorical_) throw InvalidArgumentError("embedding_column: categorical_column is null");
  if (dimension_ < 1)
    throw InvalidArgumentError(fmt::format("embedding_column '{}': dimension must be >= 1, got {}",
                                           categorical_->name(), dimension_));
  if (options_.max_norm && !(*options_.max_norm > 0 && std::isfinite(*options_.max_norm)))
    throw InvalidArgumentError(fmt::format(
        "embedding_column '{}': max_norm must be positive and finite (or not given), got {}",
        categorical_->name(), *options_.max_norm));
}

namespace {

// The embedding of `categorical`'s ids in "embedding_weights" under the context's scope.
Tensor embed(const Features& features, nn::ModelContext* context, const std::string& column,
             const CategoricalColumn& categorical, int64_t dimension,
             const EmbeddingColumnOptions& options) {
  if (detail::is_sequence(categorical))
    detail::throw_sequence_in_dense_layer("embedding_column", column);
  Tensor weights =
      detail::embedding_weights(context, column, categorical.num_buckets(), dimension, options);
  if (auto ids = dense_ids_for_predict(categorical, features, context))
    return embedding_lookup_dense(weights, *ids, options.combiner, options.max_norm);
  IdWeightPair pair = categorical.sparse_tensors(features);
  Tensor embedded = safe_embedding_lookup_sparse(weights, pair.ids, pair.weights, options.combiner,
                                                 options.max_norm);
  // Its combination of the ids is built on the host (training, or a sparse or weighted
  // feature): an export refuses the column by its name.
  ops::report_host_computation(fmt::format("embedding_column '{}'", column).c_str(), embedded);
  return embedded;
}

}  // namespace

Tensor detail::embedding_weights(nn::ModelContext* context, const std::string& column,
                                 int64_t num_buckets, int64_t dimension,
                                 const EmbeddingColumnOptions& options) {
  if (!context)
    throw InvalidArgumentError("embedding column '" + column +
                               "' needs a ModelContext for its embedding_weights variable");
  const nn::Initializer initializer =
      options.initializer
          ? *options.initializer
          : nn::truncated_normal(0.0, 1.0 / std::sqrt(static_cast<double>(dimension)));
  return context->get_variable("embedding_weights", {num_buckets, dimension}, DType::kF32,
                               initializer, options.trainable);
}

Tensor EmbeddingColumn::dense_tensor(const Features& features, nn::ModelContext* context) const {
  return embed(features, context, name(), *categorical_, dimension_, options_);
}

SharedEmbeddingColumn::SharedEmbeddingColumn(CategoricalColumnPtr categorical, int64_t dimension,
                                             EmbeddingColumnOptions options,
                                             std::string shared_name)
    : categorical_(std::move(categorical)),
      dimension_(dimension),
      options_(std::move(options)),
      shared_name_(std::move(shared_name)) {}

Tensor SharedEmbeddingColumn::dense_tensor(const Features& features,
                                           nn::ModelContext* context) const {
  return embed(features, context, name(), *categorical_, dimension_, options_);
}

Tensor safe_embedding_lookup_sparse(const Tensor& weights, const Tensor& ids,
                                    const Tensor& id_weights, Combiner combiner,
                                    std::optional<double> max_norm) {
  if (!ids.is_sparse() || ids.rank() != 2)
    throw InvalidArgumentError("safe_embedding_lookup_sparse: ids must be sparse [batch, k]");
  const int64_t batch = ids.dim(0), dimension = weights.dim(1);
  const Tensor indices = ids.indices().to(ops::Device::cpu());
  const std::vector<int64_t> all_ids = ids.values().to_vector<int64_t>();
  const std::vector<float> all_weights = id_weights.defined()
                                             ? id_weights.values().to_vector<float>()
                                             : std::vector<float>(all_ids.size(), 1.0f);
  // Entries kept (id >= 0; weight > 0 when weighted), each example's denominator.
  std::vector<int64_t> kept_ids, kept_rows;
  std::vector<double> kept_weights, total(static_cast<size_t>(batch), 0.0),
      squares(static_cast<size_t>(batch), 0.0);
  for (size_t e = 0; e < all_ids.size(); ++e) {
    if (all_ids[e] < 0 || (id_weights.defined() && !(all_weights[e] > 0))) continue;
    const int64_t row = indices.data<int64_t>()[2 * e];
    kept_ids.push_back(all_ids[e]);
    kept_rows.push_back(row);
    kept_weights.push_back(all_weights[e]);
    total[static_cast<size_t>(row)] += all_weights[e];
    squares[static_cast<size_t>(row)] += static_cast<double>(all_weights[e]) * all_weights[e];
  }
  const int64_t n = static_cast<int64_t>(kept_ids.size());
  if (n == 0) return Tensor::zeros({batch, dimension}, weights.dtype(), weights.device());
  Tensor combine = Tensor::zeros({batch, n});
  float* c = combine.data<float>();
  for (int64_t e = 0; e < n; ++e) {
    const size_t row = static_cast<size_t>(kept_rows[static_cast<size_t>(e)]);
    const double denominator = combiner == Combiner::kSum    ? 1.0
                               : combiner == Combiner::kMean ? total[row]
                                                             : std::sqrt(squares[row]);
    c[kept_rows[static_cast<size_t>(e)] * n + e] =
        static_cast<float>(kept_weights[static_cast<size_t>(e)] / denominator);
  }
  Tensor rows = ops::gather(weights, Tensor::from_vector(kept_ids).to(weights.device()));
  if (max_norm) rows = clip_rows_by_norm(rows, *max_norm);
  return ops::matmul(combine.to(weights.device()), rows);
}

Tensor clip_rows_by_norm(const Tensor& rows, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    throw InvalidArgumentError(
        fmt::format("embedding max_norm must be positive and finite, got {}", max_norm));
  const int64_t n = rows.dim(0);
  Tensor l2sum = ops::sum(ops::mul(rows, rows), {1}, true);  // [n, 1]
  // TF's where(l2sum > 0, sqrt(l2sum), l2sum) without a where op: zero rows get 1 under the
  // root (so its gradient stays finite) and a 0 factor after it; other rows are exact.
  std::vector<float> zero(static_cast<size_t>(n));
  {
    const std::vector<float> sums = l2sum.detach().to_vector<float>();
    for (size_t i = 0; i < sums.size(); ++i) zero[i] = sums[i] > 0 ? 0.f : 1.f;
  }
  const Tensor is_zero = Tensor::from_vector(zero, {n, 1}).to(rows.device());
  const Tensor one = Tensor::ones({n, 1}, rows.dtype(), rows.device());
  Tensor l2norm = ops::mul(ops::sqrt(ops::add(l2sum, is_zero)), ops::sub(one, is_zero));
  const Tensor limit = Tensor::full({n, 1}, max_norm, rows.dtype(), rows.device());
  return ops::div(ops::mul(rows, max_norm), ops::maximum(l2norm, limit));
}

std::shared_ptr<const IndicatorColumn> indicator_column(CategoricalColumnPtr categorical) {
  return std::make_shared<const IndicatorColumn>(std::move(categorical));
}

std::vector<std::shared_ptr<const SharedEmbeddingColumn>> shared_embedding_columns(
    const std::vector<CategoricalColumnPtr>& categorical_columns, int64_t dimension,
    EmbeddingColumnOptions options, std::string shared_embedding_collection_name) {
  if (categorical_columns.empty())
    throw InvalidArgumentError("shared_embedding_columns: no categorical columns");
  if (dimension < 1)
    throw InvalidArgumentError(
        fmt::format("shared_embedding_columns: dimension must be >= 1, got {}", dimension));
  std::vector<std::string> names;
  for (const CategoricalColumnPtr& column : categorical_columns) {
    if (!column) throw InvalidArgumentError("shared_embedding_columns: a column is null");
    if (column->num_buckets() != categorical_columns[0]->num_buckets())
      throw InvalidArgumentError(fmt::format(
          "shared_embedding_columns: to be shared, all categorical columns must have the same "
          "number of buckets; '{}' has {} but '{}' has {}",
          column->name(), column->num_buckets(), categorical_columns[0]->name(),
          categorical_columns[0]->num_buckets()));
    names.push_back(column->name());
  }
  if (shared_embedding_collection_name.empty()) {
    std::sort(names.begin(), names.end());
    for (const std::string& name : names)
      shared_embedding_collection_name +=
          (shared_embedding_collection_name.empty() ? "" : "_") + name;
    shared_embedding_collection_name += "_shared_embedding";
  }
  std::vector<std::shared_ptr<const SharedEmbeddingColumn>> out;
  for (const CategoricalColumnPtr& column : categorical_columns)
    out.push_back(std::make_shared<const SharedEmbeddingColumn>(column, dimension, options,
                                                                shared_embedding_collection_name));
  return out;
}

std::shared_ptr<const EmbeddingColumn> embedding_column(CategoricalColumnPtr categorical,
                                                        int64_t dimension,
                                                        EmbeddingColumnOptions options) {
  return std::make_shared<const EmbeddingColumn>(std::move(categorical), dimension,
                                                 std::move(options));
}

}  // namespace est::feature_column
