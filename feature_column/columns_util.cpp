// Shared helpers of the columns: raw features with a batch dimension, dense-to-sparse with
// TF's ignore values, parse-spec merging, and make_parse_example_spec.
#include <cstring>

#include <fmt/format.h>

#include "feature_column/column.h"
#include "ops/sparse.h"

namespace est::feature_column {
namespace detail {

Tensor raw_feature(const Features& features, const std::string& key, const std::string& column) {
  auto found = features.find(key);
  if (found == features.end() || !found->second.defined()) {
    std::string have;
    for (const auto& [name, tensor] : features) have += (have.empty() ? "" : ", ") + name;
    throw InvalidArgumentError(fmt::format(
        "feature column '{}' reads feature '{}', which the features do not hold (they hold: {}); "
        "add it to the input_fn's features",
        column, key, have));
  }
  const Tensor& raw = found->second;
  if (raw.rank() == 0)
    throw InvalidArgumentError(fmt::format(
        "feature column '{}': feature '{}' is a scalar; features need a batch dimension (batch "
        "the dataset)",
        column, key));
  if (raw.rank() != 1) return raw;
  if (raw.is_sparse()) return ops::sparse::reshape(raw, {raw.dim(0), 1});
  return raw.reshape({raw.dim(0), 1});
}

Tensor to_sparse_dropping_ignored(const Tensor& input) {
  if (input.is_sparse()) return input;
  const Tensor host = input.to(ops::Device::cpu());
  if (host.rank() != 2)
    throw InvalidArgumentError("categorical feature of shape " + ops::shape_str(host.shape()) +
                               ": expected [batch, k]");
  std::vector<int64_t> kept;
  if (host.dtype() == DType::kString) {
    const std::string* in = host.data<std::string>();
    for (int64_t i = 0; i < host.numel(); ++i)
      if (!in[i].empty()) kept.push_back(i);
  } else if (host.dtype() == DType::kI64 || host.dtype() == DType::kI32) {
    const std::vector<int64_t> in = host.to_vector<int64_t>();
    for (int64_t i = 0; i < host.numel(); ++i)
      if (in[static_cast<size_t>(i)] != -1) kept.push_back(i);
  } else {
    throw InvalidArgumentError("categorical feature of dtype " +
                               std::string(ops::dtype_name(host.dtype())) +
                               ": expected strings or integers");
  }
  const int64_t n = static_cast<int64_t>(kept.size()), k = host.dim(1);
  Tensor indices = Tensor::empty({n, 2}, DType::kI64);
  Tensor values = Tensor::empty({n}, host.dtype());
  int64_t* index = indices.data<int64_t>();
  for (int64_t e = 0; e < n; ++e) {
    const int64_t flat = kept[static_cast<size_t>(e)];
    index[2 * e] = flat / k;
    index[2 * e + 1] = flat % k;
    if (host.dtype() == DType::kString)
      values.data<std::string>()[e] = host.data<std::string>()[flat];
    else
      std::memcpy(static_cast<char*>(values.raw_data()) + e * ops::dtype_size(host.dtype()),
                  static_cast<const char*>(host.raw_data()) + flat * ops::dtype_size(host.dtype()),
                  ops::dtype_size(host.dtype()));
  }
  return Tensor::sparse(indices, values, host.shape());
}

void add_spec(FeatureSpecs& specs, const std::string& key, const data::FeatureSpec& spec) {
  auto [it, inserted] = specs.emplace(key, spec);
  if (inserted) return;
  auto dtype_of = [](const data::FeatureSpec& s) {
    return std::visit([](const auto& v) { return v.dtype; }, s);
  };
  if (it->second.index() != spec.index() || dtype_of(it->second) != dtype_of(spec))
    throw InvalidArgumentError("make_parse_example_spec: feature '" + key +
                               "' is read by columns that need different parse specs "
                               "(fixed vs variable length, or different dtypes)");
}

Tensor with_values(const Tensor& sparse_tensor, const Tensor& values) {
  return Tensor::sparse(sparse_tensor.indices(), values, sparse_tensor.shape());
}

}  // namespace detail

FeatureSpecs make_parse_example_spec(const std::vector<ColumnPtr>& columns) {
  FeatureSpecs specs;
  for (const ColumnPtr& column : columns) {
    if (!column) throw InvalidArgumentError("make_parse_example_spec: a column is null");
    column->add_parse_spec(specs);
  }
  return specs;
}

}  // namespace est::feature_column
