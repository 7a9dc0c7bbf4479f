// SparseFeature and FixedLenSequenceFeature in tf.train.Example parsing, following
// tensorflow/python/ops/parsing_config.py (SparseFeature: index and value features merged as
// sparse_ops.sparse_merge merges them, sorted unless already_sorted; FixedLenSequenceFeature:
// allow_missing required, [None] + shape per example, padded to the batch's longest with the
// scalar default) and the value-count rule of example_proto_fast_parsing.cc (a variable-length
// dense feature holds a whole number of elements). Also the batching helpers the Example and
// SequenceExample parsers share.
#include <algorithm>
#include <numeric>

#include "data/example_parsing.h"

namespace est::data::detail {
namespace {

std::string spec_error(const std::string& name, const std::string& what) {
  return "feature spec '" + name + "': " + what;
}

bool value_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kI64 || dtype == DType::kString;
}

}  // namespace

void check_sparse_spec(const std::string& name, const SparseFeature& spec) {
  if (spec.index_key.empty())
    throw InvalidArgumentError(spec_error(name,
                                          "SparseFeature has no index_key; give one "
                                          "index feature per dimension"));
  if (spec.value_key.empty())
    throw InvalidArgumentError(spec_error(name, "SparseFeature has no value_key"));
  if (!value_dtype(spec.dtype))
    throw InvalidArgumentError(
        spec_error(name, "SparseFeature dtype " + std::string(ops::dtype_name(spec.dtype)) +
                             " is not supported; use float32, int64 or string"));
  if (spec.size.size() != spec.index_key.size())
    throw InvalidArgumentError(spec_error(
        name, "SparseFeature size " + ops::shape_str(spec.size) + " has " +
                  std::to_string(spec.size.size()) + " entries but there are " +
                  std::to_string(spec.index_key.size()) + " index keys; give one size per key"));
  for (int64_t d : spec.size)
    if (d < 0)
      throw InvalidArgumentError(
          spec_error(name, "SparseFeature size " + ops::shape_str(spec.size) + " is negative"));
}

void check_sequence_spec(const std::string& name, const FixedLenSequenceFeature& spec) {
  if (!value_dtype(spec.dtype))
    throw InvalidArgumentError(spec_error(
        name, "FixedLenSequenceFeature dtype " + std::string(ops::dtype_name(spec.dtype)) +
                  " is not supported; use float32, int64 or string"));
  for (int64_t d : spec.shape)
    if (d < 1)
      throw InvalidArgumentError(spec_error(
          name, "FixedLenSequenceFeature shape " + ops::shape_str(spec.shape) +
                    " must have positive dimensions (it is one element's shape; the number of "
                    "elements varies)"));
  const bool numeric_default = spec.default_value.has_value();
  if ((spec.dtype == DType::kString && (numeric_default || spec.default_int64)) ||
      (spec.dtype != DType::kString && spec.default_string) ||
      (spec.dtype == DType::kF32 && spec.default_int64))
    throw InvalidArgumentError(
        spec_error(name, "FixedLenSequenceFeature default does not match dtype " +
                             std::string(ops::dtype_name(spec.dtype)) +
                             " (default_value: float32/int64, default_int64: int64, "
                             "default_string: string)"));
}

Tensor parse_sparse_feature(const pb::Features& features, const std::string& name,
                            const SparseFeature& spec, const Where& where) {
  const size_t rank = spec.index_key.size();
  auto read = [&](const std::string& key, DType dtype) {
    const pb::Feature* found = find_feature(features, key);
    if (!found) return Tensor::empty({0}, dtype);
    if (!kind_matches(*found, dtype))
      throw wrong_kind(where, "feature '" + key + "' (of SparseFeature '" + name + "')", *found,
                       dtype);
    return list_values(*found, dtype, {value_count(*found, dtype)});
  };
  const Tensor values = read(spec.value_key, spec.dtype);
  const int64_t n = values.dim(0);
  // indices [n, rank], row-major, from the index features.
  std::vector<int64_t> indices(static_cast<size_t>(n) * rank);
  for (size_t d = 0; d < rank; ++d) {
    const Tensor index = read(spec.index_key[d], DType::kI64);
    if (index.dim(0) != n)
      throw InvalidArgumentError(where.str() + ": SparseFeature '" + name + "': index feature '" +
                                 spec.index_key[d] + "' has " + std::to_string(index.dim(0)) +
                                 " values but value feature '" + spec.value_key + "' has " +
                                 std::to_string(n) + "; they must have equal lengths");
    const int64_t* in = index.data<int64_t>();
    for (int64_t e = 0; e < n; ++e) {
      if (in[e] < 0 || in[e] >= spec.size[d])
        throw InvalidArgumentError(where.str() + ": SparseFeature '" + name + "': index " +
                                   std::to_string(in[e]) + " in feature '" + spec.index_key[d] +
                                   "' is outside [0, " + std::to_string(spec.size[d]) +
                                   "), the spec's size in dimension " + std::to_string(d));
      indices[static_cast<size_t>(e) * rank + d] = in[e];
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!spec.already_sorted)
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return std::lexicographical_compare(indices.begin() + a * static_cast<int64_t>(rank),
                                          indices.begin() + (a + 1) * static_cast<int64_t>(rank),
                                          indices.begin() + b * static_cast<int64_t>(rank),
                                          indices.begin() + (b + 1) * static_cast<int64_t>(rank));
    });
  Tensor out_indices = Tensor::empty({n, static_cast<int64_t>(rank)}, DType::kI64);
  Tensor out_values = Tensor::empty({n}, spec.dtype);
  int64_t* dst = out_indices.data<int64_t>();
  const size_t element = ops::dtype_size(spec.dtype);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t from = order[static_cast<size_t>(e)];
    std::copy_n(indices.begin() + from * static_cast<int64_t>(rank), rank, dst + e * rank);
    copy_elements(element_pointer(out_values) + static_cast<size_t>(e) * element,
                  element_pointer(values) + static_cast<size_t>(from) * element, element,
                  spec.dtype);
  }
  return Tensor::sparse(out_indices, out_values, spec.size);
}

Tensor parse_sequence_feature(const pb::Features& features, const std::string& name,
                              const FixedLenSequenceFeature& spec, const Where& where) {
  const int64_t stride = ops::num_elements(spec.shape);
  Shape shape{0};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  const pb::Feature* found = find_feature(features, name);
  if (!found) return Tensor::empty(shape, spec.dtype);  // allow_missing: no elements
  if (!kind_matches(*found, spec.dtype))
    throw wrong_kind(where, "feature '" + name + "'", *found, spec.dtype);
  const int64_t count = value_count(*found, spec.dtype);
  if (count % stride != 0)
    throw InvalidArgumentError(
        where.str() + ": feature '" + name + "' has " + std::to_string(count) +
        " values, not a multiple of the FixedLenSequenceFeature's "
        "element shape " +
        ops::shape_str(spec.shape) + " (" + std::to_string(stride) + " values each)");
  shape[0] = count / stride;
  return list_values(*found, spec.dtype, shape);
}

Tensor padding_tensor(const Shape& shape, const FixedLenSequenceFeature& spec) {
  if (spec.dtype == DType::kString) {
    Tensor out = Tensor::empty(shape, DType::kString);
    if (spec.default_string)
      std::fill_n(out.data<std::string>(), out.numel(), *spec.default_string);
    return out;
  }
  if (spec.dtype == DType::kI64 && spec.default_int64) {
    Tensor out = Tensor::empty(shape, DType::kI64);
    std::fill_n(out.data<int64_t>(), out.numel(), *spec.default_int64);
    return out;
  }
  return Tensor::full(shape, spec.default_value.value_or(0.0), spec.dtype);
}

void copy_rows_padded(const std::vector<const Tensor*>& parts, Tensor& padded) {
  const size_t slot = parts.empty() ? 0 : padded.nbytes() / parts.size();
  char* dst = element_pointer(padded);
  for (size_t i = 0; i < parts.size(); ++i)
    copy_elements(dst + i * slot, element_pointer(*parts[i]), parts[i]->nbytes(), padded.dtype());
}

Tensor batch_sparse(const std::vector<const Tensor*>& parts, DType dtype, size_t rank,
                    const Shape* dense_shape) {
  Shape dense{static_cast<int64_t>(parts.size())};
  if (dense_shape) {
    dense.insert(dense.end(), dense_shape->begin(), dense_shape->end());
  } else {
    dense.resize(rank + 1, 0);
    for (const Tensor* part : parts)
      for (size_t a = 0; a < rank; ++a) dense[a + 1] = std::max(dense[a + 1], part->shape()[a]);
  }
  int64_t total = 0;
  for (const Tensor* part : parts) total += part->values().dim(0);
  Tensor indices = Tensor::empty({total, static_cast<int64_t>(rank) + 1}, DType::kI64);
  Tensor values = Tensor::empty({total}, dtype);
  int64_t* index = indices.data<int64_t>();
  char* dst = element_pointer(values);
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& part_values = parts[i]->values();
    const int64_t* in = parts[i]->indices().data<int64_t>();
    for (int64_t e = 0; e < part_values.dim(0); ++e) {
      *index++ = static_cast<int64_t>(i);
      for (size_t a = 0; a < rank; ++a) *index++ = in[static_cast<size_t>(e) * rank + a];
    }
    copy_elements(dst, element_pointer(part_values), part_values.nbytes(), dtype);
    dst += part_values.nbytes();
  }
  return Tensor::sparse(indices, values, dense);
}

}  // namespace est::data::detail
