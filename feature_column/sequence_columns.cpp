// Sequence columns (see sequence_column.h): SequenceCategoricalColumn,
// SequenceNumericColumn, and the sequence forms of the embedding and indicator columns,
// following sequence_feature_column.py and feature_column_v2.py (get_sequence_dense_tensor,
// _get_sparse_tensors_helper's reshape to [batch, T, k]) and feature_column/utils.py
// (sequence_length_from_sparse_tensor).
#include <algorithm>

#include <fmt/format.h>

#include "feature_column/dense_columns.h"
#include "feature_column/sequence_column.h"
#include "ops/array_ops.h"
#include "ops/sparse.h"

namespace est::feature_column {

namespace detail {

Tensor sequence_length_from_sparse(const Tensor& sparse, int64_t num_elements) {
  const int64_t rows = sparse.dim(0), rank = sparse.rank();
  Tensor lengths = Tensor::zeros({rows}, DType::kI64);
  int64_t* out = lengths.data<int64_t>();
  const Tensor indices = sparse.indices().to(ops::Device::cpu());
  const int64_t* index = indices.data<int64_t>();
  for (int64_t e = 0; e < indices.dim(0); ++e)
    out[index[e * rank]] = std::max(out[index[e * rank]], index[e * rank + 1] + 1);
  for (int64_t r = 0; r < rows; ++r) out[r] = (out[r] + num_elements - 1) / num_elements;
  return lengths;
}

bool is_sequence(const CategoricalColumn& categorical) {
  return dynamic_cast<const SequenceCategoricalColumn*>(&categorical) != nullptr;
}

void throw_sequence_in_dense_layer(const std::string& kind, const std::string& column) {
  throw InvalidArgumentError(fmt::format(
      "In {}: {}. categorical_column must not be a sequence categorical column. Suggested fix "
      "A: to use input_layer / dense_features, use a non-sequence categorical_column_with_*. "
      "Suggested fix B: to create sequence input, use sequence_features instead",
      kind, column));
}

void throw_dense_in_sequence_layer(const std::string& kind, const std::string& column) {
  throw InvalidArgumentError(
      fmt::format("In {}: {}. categorical_column must be a sequence categorical column to use "
                  "sequence_features. Suggested fix: use one of sequence_categorical_column_with_*",
                  kind, column));
}

}  // namespace detail

namespace {

// Sparse [batch, T, ...] as [batch, T, k]: the dimensions after the second folded into one
// (a [batch, T] tensor gets k = 1).
Tensor as_steps(const Tensor& sparse) {
  if (!sparse.defined()) return sparse;
  const Shape& shape = sparse.shape();
  int64_t k = 1;
  for (size_t a = 2; a < shape.size(); ++a) k *= shape[a];
  return ops::sparse::reshape(sparse, {shape[0], shape[1], k});
}

// ids [batch, T, k] as [batch * T, k] (and weights alike), for the per-example lookups.
IdWeightPair steps_as_rows(const IdWeightPair& pair) {
  const Shape& shape = pair.ids.shape();
  const Shape rows{shape[0] * shape[1], shape[2]};
  return {ops::sparse::reshape(pair.ids, rows),
          pair.weights.defined() ? ops::sparse::reshape(pair.weights, rows) : Tensor()};
}

}  // namespace

SequenceCategoricalColumn::SequenceCategoricalColumn(CategoricalColumnPtr categorical)
    : categorical_(std::move(categorical)) {
  if (!categorical_)
    throw InvalidArgumentError("sequence categorical column: categorical_column is null");
}

IdWeightPair SequenceCategoricalColumn::sparse_tensors(const Features& features) const {
  IdWeightPair pair = categorical_->sparse_tensors(features);
  if (pair.ids.rank() < 2)
    throw InvalidArgumentError(
        fmt::format("sequence categorical column '{}': ids of shape {} have no step dimension",
                    name(), ops::shape_str(pair.ids.shape())));
  return {as_steps(pair.ids), as_steps(pair.weights)};
}

SequenceNumericColumn::SequenceNumericColumn(std::string key, SequenceNumericColumnOptions options)
    : key_(std::move(key)), options_(std::move(options)) {
  for (int64_t d : options_.shape)
    if (d < 1)
      throw InvalidArgumentError(
          fmt::format("sequence_numeric_column '{}': shape {} must have positive dimensions", key_,
                      ops::shape_str(options_.shape)));
  if (options_.dtype != DType::kF32 && options_.dtype != DType::kI64)
    throw InvalidArgumentError(fmt::format(
        "sequence_numeric_column '{}': dtype must be convertible to float (float32 or int64), "
        "got {}",
        key_, ops::dtype_name(options_.dtype)));
}

void SequenceNumericColumn::add_parse_spec(FeatureSpecs& specs) const {
  detail::add_spec(specs, key_, data::VarLenFeature{options_.dtype});
}

SequenceDenseTensor SequenceNumericColumn::sequence_dense_tensor(const Features& features,
                                                                 nn::ModelContext*) const {
  Tensor raw = detail::raw_feature(features, key_, key_);
  if (!raw.is_sparse())
    throw InvalidArgumentError(fmt::format(
        "sequence_numeric_column '{}': the feature is dense; a sequence column reads a sparse one "
        "(parse it with a VarLenFeature, as make_parse_example_spec says)",
        key_));
  if (raw.dtype() == DType::kString)
    throw InvalidArgumentError(fmt::format(
        "sequence_numeric_column '{}': the feature holds strings; numbers are needed", key_));
  raw = Tensor::sparse(raw.indices().to(ops::Device::cpu()), raw.values().to(ops::Device::cpu()),
                       raw.shape());
  if (options_.normalizer_fn) raw = detail::with_values(raw, options_.normalizer_fn(raw.values()));
  const Tensor dense = ops::sparse::to_dense(raw, {.default_value = options_.default_value});
  const int64_t batch = dense.dim(0), elements = ops::num_elements(options_.shape);
  const int64_t per_example = batch ? dense.numel() / batch : 0;
  if (per_example % elements != 0)
    throw InvalidArgumentError(fmt::format(
        "sequence_numeric_column '{}': the padded feature has {} values per example, not a whole "
        "number of steps of shape {}; give every example a multiple of {} values",
        key_, per_example, ops::shape_str(options_.shape), elements));
  Shape shape{batch, per_example / elements};
  shape.insert(shape.end(), options_.shape.begin(), options_.shape.end());
  Tensor values = dense.dtype() == DType::kF32 ? dense : ops::cast(dense, DType::kF32);
  // [batch, values] input: steps are groups of `elements` values; [batch, T, values]: steps.
  const int64_t grouped = raw.rank() == 2 ? elements : 1;
  return {values.reshape(shape), detail::sequence_length_from_sparse(raw, grouped)};
}

SequenceDenseTensor IndicatorColumn::sequence_dense_tensor(const Features& features,
                                                           nn::ModelContext*) const {
  if (!detail::is_sequence(*categorical_))
    detail::throw_dense_in_sequence_layer("indicator_column", name());
  IdWeightPair pair = categorical_->sparse_tensors(features);  // [batch, T, k]
  const int64_t batch = pair.ids.dim(0), steps = pair.ids.dim(1);
  const int64_t buckets = categorical_->num_buckets();
  const Tensor indices = pair.ids.indices().to(ops::Device::cpu());
  const std::vector<int64_t> ids = pair.ids.values().to_vector<int64_t>();
  const std::vector<float> weights = pair.weights.defined()
                                         ? pair.weights.values().to_vector<float>()
                                         : std::vector<float>(ids.size(), 1.0f);
  Tensor out = Tensor::zeros({batch, steps, buckets});
  float* dst = out.data<float>();
  const int64_t* index = indices.data<int64_t>();
  for (size_t e = 0; e < ids.size(); ++e)
    if (ids[e] >= 0 && ids[e] < buckets)
      dst[(index[3 * e] * steps + index[3 * e + 1]) * buckets + ids[e]] += weights[e];
  return {out, detail::sequence_length_from_sparse(pair.ids)};
}

namespace {

SequenceDenseTensor embed_steps(const Features& features, nn::ModelContext* context,
                                const std::string& column, const CategoricalColumn& categorical,
                                int64_t dimension, const EmbeddingColumnOptions& options) {
  if (!detail::is_sequence(categorical))
    detail::throw_dense_in_sequence_layer("embedding_column", column);
  IdWeightPair pair = categorical.sparse_tensors(features);  // [batch, T, k]
  const Tensor weights = detail::embedding_weights(context, column, categorical.num_buckets(),
                                                   dimension, options, pair.ids.values());
  const int64_t batch = pair.ids.dim(0), steps = pair.ids.dim(1);
  const IdWeightPair rows = steps_as_rows(pair);
  const Tensor embedded = safe_embedding_lookup_sparse(weights, rows.ids, rows.weights,
                                                       options.combiner, options.max_norm);
  return {embedded.reshape({batch, steps, dimension}),
          detail::sequence_length_from_sparse(pair.ids)};
}

}  // namespace

SequenceDenseTensor EmbeddingColumn::sequence_dense_tensor(const Features& features,
                                                           nn::ModelContext* context) const {
  return embed_steps(features, context, name(), *categorical_, dimension_, options_);
}

SequenceDenseTensor SharedEmbeddingColumn::sequence_dense_tensor(const Features& features,
                                                                 nn::ModelContext* context) const {
  return embed_steps(features, context, name(), *categorical_, dimension_, options_);
}

std::shared_ptr<const SequenceNumericColumn> sequence_numeric_column(
    std::string key, SequenceNumericColumnOptions options) {
  return std::make_shared<const SequenceNumericColumn>(std::move(key), std::move(options));
}

std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_identity(
    std::string key, int64_t num_buckets, std::optional<int64_t> default_value) {
  return std::make_shared<const SequenceCategoricalColumn>(
      categorical_column_with_identity(std::move(key), num_buckets, default_value));
}

std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_hash_bucket(
    std::string key, int64_t hash_bucket_size, DType dtype) {
  return std::make_shared<const SequenceCategoricalColumn>(
      categorical_column_with_hash_bucket(std::move(key), hash_bucket_size, dtype));
}

std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_vocabulary_list(
    std::string key, std::vector<std::string> vocabulary_list, VocabularyOptions options) {
  return std::make_shared<const SequenceCategoricalColumn>(
      categorical_column_with_vocabulary_list(std::move(key), std::move(vocabulary_list), options));
}

std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_vocabulary_list(
    std::string key, std::vector<int64_t> vocabulary_list, VocabularyOptions options) {
  return std::make_shared<const SequenceCategoricalColumn>(
      categorical_column_with_vocabulary_list(std::move(key), std::move(vocabulary_list), options));
}

std::shared_ptr<const SequenceCategoricalColumn> sequence_categorical_column_with_vocabulary_file(
    std::string key, const std::string& vocabulary_file, VocabularyFileOptions options) {
  return std::make_shared<const SequenceCategoricalColumn>(
      categorical_column_with_vocabulary_file(std::move(key), vocabulary_file, options));
}

}  // namespace est::feature_column
