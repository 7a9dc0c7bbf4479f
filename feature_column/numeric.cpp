// numeric_column and bucketized_column, after NumericColumn and BucketizedColumn in
// tensorflow/python/feature_column/feature_column_v2.py.
#include "feature_column/numeric.h"

#include <algorithm>

#include <fmt/format.h>

#include "ops/array_ops.h"
#include "ops/math.h"

namespace est::feature_column {

NumericColumn::NumericColumn(std::string key, NumericColumnOptions options)
    : key_(std::move(key)), options_(std::move(options)) {
  if (key_.empty()) throw InvalidArgumentError("numeric_column: key must not be empty");
  for (int64_t d : options_.shape)
    if (d < 1)
      throw InvalidArgumentError(
          fmt::format("numeric_column '{}': shape {} must have positive "
                      "dimensions",
                      key_, ops::shape_str(options_.shape)));
  if (options_.dtype != DType::kF32 && options_.dtype != DType::kI64)
    throw InvalidArgumentError(
        fmt::format("numeric_column '{}': dtype must be float32 or int64, "
                    "got {}",
                    key_, ops::dtype_name(options_.dtype)));
  auto check_count = [&](size_t count, const char* field) {
    if (count != 1 && static_cast<int64_t>(count) != ops::num_elements(options_.shape))
      throw InvalidArgumentError(
          fmt::format("numeric_column '{}': {} has {} values; shape {} needs 1 or {}", key_, field,
                      count, ops::shape_str(options_.shape), ops::num_elements(options_.shape)));
  };
  if (options_.default_value) check_count(options_.default_value->size(), "default_value");
  if (options_.default_int64) {
    if (options_.default_value)
      throw InvalidArgumentError(fmt::format(
          "numeric_column '{}': both default_value and default_int64 are given; give one", key_));
    if (options_.dtype != DType::kI64)
      throw InvalidArgumentError(fmt::format(
          "numeric_column '{}': default_int64 needs dtype int64, got {}; use default_value", key_,
          ops::dtype_name(options_.dtype)));
    check_count(options_.default_int64->size(), "default_int64");
  }
}

void NumericColumn::add_parse_spec(FeatureSpecs& specs) const {
  detail::add_spec(specs, key_,
                   data::FixedLenFeature{.shape = options_.shape,
                                         .dtype = options_.dtype,
                                         .default_value = options_.default_value,
                                         .default_int64 = options_.default_int64});
}

Tensor NumericColumn::dense_tensor(const Features& features, nn::ModelContext*) const {
  Tensor raw = detail::raw_feature(features, key_, key_);
  if (raw.is_sparse())
    throw InvalidArgumentError(fmt::format(
        "numeric_column '{}': the feature is a sparse tensor; a numeric column reads a dense one "
        "(parse it with a FixedLenFeature)",
        key_));
  if (raw.dtype() == DType::kString)
    throw InvalidArgumentError(
        fmt::format("numeric_column '{}': the feature holds strings; "
                    "numbers are needed",
                    key_));
  if (options_.normalizer_fn) raw = options_.normalizer_fn(raw);
  Tensor values = raw.dtype() == DType::kF32 ? raw : ops::cast(raw, DType::kF32);
  const int64_t batch = values.dim(0);
  const int64_t per_example = ops::num_elements(options_.shape);
  if (values.numel() != batch * per_example)
    throw InvalidArgumentError(fmt::format(
        "numeric_column '{}': the feature has shape {}, but the column's shape {} needs {} values "
        "per example",
        key_, ops::shape_str(values.shape()), ops::shape_str(options_.shape), per_example));
  Shape shape{batch};
  shape.insert(shape.end(), options_.shape.begin(), options_.shape.end());
  return values.reshape(shape);
}

BucketizedColumn::BucketizedColumn(std::shared_ptr<const NumericColumn> source,
                                   std::vector<double> boundaries)
    : source_(std::move(source)), boundaries_(std::move(boundaries)) {
  if (!source_) throw InvalidArgumentError("bucketized_column: source_column is null");
  if (boundaries_.empty())
    throw InvalidArgumentError("bucketized_column '" + source_->name() +
                               "': boundaries must not be empty");
  for (size_t i = 1; i < boundaries_.size(); ++i)
    if (!(boundaries_[i - 1] < boundaries_[i]))
      throw InvalidArgumentError("bucketized_column '" + source_->name() +
                                 "': boundaries must be a sorted list (strictly increasing)");
}

Shape BucketizedColumn::variable_shape() const {
  Shape shape = source_->variable_shape();
  shape.push_back(static_cast<int64_t>(boundaries_.size()) + 1);
  return shape;
}

int64_t BucketizedColumn::num_buckets() const {
  return (static_cast<int64_t>(boundaries_.size()) + 1) *
         ops::num_elements(source_->variable_shape());
}

Tensor BucketizedColumn::bucket_ids(const Features& features) const {
  // The number of boundaries <= x (std::upper_bound's index; NaN counts past every boundary),
  // as n - count(x < boundary) in float64 so that float32 values compare with the boundaries
  // exactly as given. Written with ops so that an export can trace it.
  const Tensor values = source_->dense_tensor(features, nullptr);
  const int64_t batch = values.dim(0);
  const int64_t per_example = values.numel() / std::max<int64_t>(batch, 1);
  const int64_t count = static_cast<int64_t>(boundaries_.size());  // >= 1
  const Tensor x = ops::cast(values, DType::kF64).reshape({batch, per_example, 1});
  const Tensor boundaries = Tensor::from_vector(boundaries_).to(values.device());
  const Tensor below = ops::cast(ops::less(x, boundaries), DType::kI64);  // [batch, k, n]
  return ops::sub(Tensor::full({}, static_cast<double>(count), DType::kI64, values.device()),
                  ops::sum(below, {2}));
}

Tensor BucketizedColumn::dense_tensor(const Features& features, nn::ModelContext*) const {
  const Tensor ids = bucket_ids(features);
  Shape shape{ids.dim(0)};
  const Shape per_example = variable_shape();
  shape.insert(shape.end(), per_example.begin(), per_example.end());
  return ops::one_hot(ids, static_cast<int64_t>(boundaries_.size()) + 1).reshape(shape);
}

IdWeightPair BucketizedColumn::sparse_tensors(const Features& features) const {
  const Tensor ids = bucket_ids(features).to(ops::Device::cpu());
  const int64_t batch = ids.dim(0), elements = ids.dim(1);
  const int64_t buckets = static_cast<int64_t>(boundaries_.size()) + 1;
  Tensor indices = Tensor::empty({batch * elements, 2}, DType::kI64);
  Tensor values = Tensor::empty({batch * elements}, DType::kI64);
  int64_t* index = indices.data<int64_t>();
  int64_t* value = values.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < elements; ++j) {
      const int64_t e = b * elements + j;
      index[2 * e] = b;
      index[2 * e + 1] = j;
      value[e] = ids.data<int64_t>()[e] + j * buckets;
    }
  return {Tensor::sparse(indices, values, {batch, elements}), {}};
}

std::shared_ptr<const NumericColumn> numeric_column(std::string key, NumericColumnOptions options) {
  return std::make_shared<const NumericColumn>(std::move(key), std::move(options));
}

std::shared_ptr<const BucketizedColumn> bucketized_column(
    std::shared_ptr<const NumericColumn> source, std::vector<double> boundaries) {
  return std::make_shared<const BucketizedColumn>(std::move(source), std::move(boundaries));
}

}  // namespace est::feature_column
