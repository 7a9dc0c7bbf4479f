// Shared helpers of the columns: raw features with a batch dimension, dense-to-sparse with
// TF's ignore values, parse-spec merging, and make_parse_example_spec.
#include <cstring>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

namespace {

// Field-by-field equality of two parse specs (TF compares the spec tuples with !=).
bool same_fields(const data::FixedLenFeature& a, const data::FixedLenFeature& b) {
  return std::tie(a.shape, a.dtype, a.default_value, a.default_bytes, a.default_int64,
                  a.default_strings) == std::tie(b.shape, b.dtype, b.default_value, b.default_bytes,
                                                 b.default_int64, b.default_strings);
}
bool same_fields(const data::VarLenFeature& a, const data::VarLenFeature& b) {
  return std::tie(a.dtype, a.mode, a.padding_value) == std::tie(b.dtype, b.mode, b.padding_value);
}
bool same_fields(const data::SparseFeature& a, const data::SparseFeature& b) {
  return std::tie(a.index_key, a.value_key, a.dtype, a.size, a.already_sorted) ==
         std::tie(b.index_key, b.value_key, b.dtype, b.size, b.already_sorted);
}
bool same_fields(const data::FixedLenSequenceFeature& a, const data::FixedLenSequenceFeature& b) {
  return std::tie(a.shape, a.dtype, a.allow_missing, a.default_value, a.default_int64,
                  a.default_string) == std::tie(b.shape, b.dtype, b.allow_missing, b.default_value,
                                                b.default_int64, b.default_string);
}

template <class T>
std::string optional_str(const std::optional<T>& value) {
  if (!value) return "None";
  if constexpr (std::is_same_v<T, std::string>)
    return "'" + *value + "'";
  else
    return fmt::format("{}", *value);
}

// The spec as TF prints its tuple, for messages.
std::string describe(const data::FeatureSpec& spec) {
  return std::visit(
      [](const auto& s) -> std::string {
        using T = std::decay_t<decltype(s)>;
        const std::string dtype(ops::dtype_name(s.dtype));
        if constexpr (std::is_same_v<T, data::FixedLenFeature>) {
          std::string defaults = s.default_int64     ? optional_str(s.default_int64)
                                 : s.default_strings ? optional_str(s.default_strings)
                                 : s.default_bytes   ? optional_str(s.default_bytes)
                                                     : optional_str(s.default_value);
          return fmt::format("FixedLenFeature(shape={}, dtype={}, default_value={})",
                             ops::shape_str(s.shape), dtype, defaults);
        } else if constexpr (std::is_same_v<T, data::VarLenFeature>) {
          return fmt::format("VarLenFeature(dtype={})", dtype);
        } else if constexpr (std::is_same_v<T, data::SparseFeature>) {
          return fmt::format("SparseFeature(index_key=[{}], value_key='{}', dtype={}, size={})",
                             fmt::join(s.index_key, ", "), s.value_key, dtype,
                             ops::shape_str(s.size));
        } else {
          return fmt::format(
              "FixedLenSequenceFeature(shape={}, dtype={}, allow_missing={}, default_value={})",
              ops::shape_str(s.shape), dtype, s.allow_missing,
              s.default_int64    ? optional_str(s.default_int64)
              : s.default_string ? optional_str(s.default_string)
                                 : optional_str(s.default_value));
        }
      },
      spec);
}

}  // namespace

// feature_column_v2.make_parse_example_spec: a key asked for twice must be asked for with equal
// specs (shape, dtype and default included), else "different parse_spec for key".
void add_spec(FeatureSpecs& specs, const std::string& key, const data::FeatureSpec& spec) {
  auto [it, inserted] = specs.emplace(key, spec);
  if (inserted) return;
  const bool same = it->second.index() == spec.index() &&
                    std::visit(
                        [&spec](const auto& held) {
                          return same_fields(held, std::get<std::decay_t<decltype(held)>>(spec));
                        },
                        it->second);
  if (!same)
    throw InvalidArgumentError(fmt::format(
        "make_parse_example_spec: feature columns contain different parse_spec for key '{}': {} "
        "and {}; columns reading one feature must agree on its shape, dtype and default",
        key, describe(spec), describe(it->second)));
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
