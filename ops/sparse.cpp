// Host-side sparse ops: to_dense, from_dense, reshape, fill_empty_rows (see ops/sparse.h).
#include "ops/sparse.h"

#include <cstring>

#include <fmt/format.h>

namespace est::ops::sparse {
namespace {

Tensor on_host(const Tensor& t) { return t.device().is_cpu() ? t : t.to(Device::cpu()); }

void require_sparse(const Tensor& t, std::string_view op) {
  if (!t.defined() || !t.is_sparse())
    throw InvalidArgumentError(std::string(op) +
                               ": expected a sparse tensor (Tensor::sparse), got " +
                               (t.defined() ? "a dense tensor of shape " + shape_str(t.shape())
                                            : std::string("an undefined tensor")));
}

// Copies element `from` of `source` into element `to` of `target`: same dtype, host memory.
void copy_element(const Tensor& source, int64_t from, Tensor& target, int64_t to) {
  if (source.dtype() == DType::kString) {
    target.data<std::string>()[to] = source.data<std::string>()[from];
    return;
  }
  const size_t size = dtype_size(source.dtype());
  std::memcpy(static_cast<char*>(target.raw_data()) + static_cast<size_t>(to) * size,
              static_cast<const char*>(source.raw_data()) + static_cast<size_t>(from) * size, size);
}

// A host tensor of `shape` filled with the default (numeric or string).
Tensor filled(const Shape& shape, DType dtype, double value, const std::string& text) {
  if (dtype != DType::kString) return Tensor::full(shape, value, dtype);
  Tensor out = Tensor::empty(shape, DType::kString);
  std::string* data = out.data<std::string>();
  for (int64_t i = 0; i < out.numel(); ++i) data[i] = text;
  return out;
}

}  // namespace

Tensor to_dense(const Tensor& sparse_tensor, const ToDenseOptions& options) {
  require_sparse(sparse_tensor, "sparse::to_dense");
  const Shape& shape = sparse_tensor.shape();
  const Tensor indices = on_host(sparse_tensor.indices());
  const Tensor values = on_host(sparse_tensor.values());
  Tensor out = filled(shape, values.dtype(), options.default_value, options.default_string);
  const int64_t n = indices.dim(0), rank = indices.dim(1);
  const int64_t* index = indices.data<int64_t>();
  int64_t previous = -1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (int64_t a = 0; a < rank; ++a)
      flat = flat * shape[static_cast<size_t>(a)] + index[i * rank + a];
    if (options.validate_indices && flat <= previous)
      throw InvalidArgumentError(fmt::format(
          "sparse::to_dense: entry {} is {} the entry before it; indices must be in row-major "
          "order without repeats (reorder them, or set validate_indices = false)",
          i, flat == previous ? "a repeat of" : "out of order after"));
    previous = flat;
    copy_element(values, i, out, flat);
  }
  return out;
}

Tensor from_dense(const Tensor& dense) {
  if (!dense.defined() || dense.is_sparse())
    throw InvalidArgumentError("sparse::from_dense: expected a defined dense tensor");
  const Tensor host = on_host(dense);
  std::vector<int64_t> positions;
  if (host.dtype() == DType::kString) {
    const std::string* in = host.data<std::string>();
    for (int64_t i = 0; i < host.numel(); ++i)
      if (!in[i].empty()) positions.push_back(i);
  } else {
    dispatch_dtype(host.dtype(), [&](auto tag) {
      const auto* in = static_cast<const decltype(tag)*>(host.raw_data());
      for (int64_t i = 0; i < host.numel(); ++i)
        if (static_cast<double>(in[i]) != 0.0) positions.push_back(i);
    });
  }
  const Shape& shape = host.shape();
  const int64_t n = static_cast<int64_t>(positions.size()), rank = host.rank();
  Tensor indices = Tensor::empty({n, rank}, DType::kI64);
  Tensor values = Tensor::empty({n}, host.dtype());
  int64_t* index = indices.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = positions[static_cast<size_t>(i)];
    for (int64_t a = rank - 1; a >= 0; --a) {
      index[i * rank + a] = flat % shape[static_cast<size_t>(a)];
      flat /= shape[static_cast<size_t>(a)];
    }
    copy_element(host, positions[static_cast<size_t>(i)], values, i);
  }
  return Tensor::sparse(indices, values, shape);
}

Tensor reshape(const Tensor& sparse_tensor, const Shape& new_shape) {
  require_sparse(sparse_tensor, "sparse::reshape");
  const Shape& shape = sparse_tensor.shape();
  const int64_t total = num_elements(shape);
  Shape resolved = new_shape;
  int64_t known = 1;
  int inferred = -1;
  for (size_t a = 0; a < resolved.size(); ++a) {
    if (resolved[a] == -1 && inferred < 0) {
      inferred = static_cast<int>(a);
    } else if (resolved[a] < 0) {
      throw InvalidArgumentError("sparse::reshape: " + shape_str(new_shape) +
                                 " may hold one -1 and otherwise sizes >= 0");
    } else {
      known *= resolved[a];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      throw InvalidArgumentError(
          fmt::format("sparse::reshape: cannot infer the -1 of {} for dense shape {} ({} elements)",
                      shape_str(new_shape), shape_str(shape), total));
    resolved[static_cast<size_t>(inferred)] = total / known;
  }
  if (num_elements(resolved) != total)
    throw InvalidArgumentError(
        fmt::format("sparse::reshape: dense shape {} has {} elements but {} has {}",
                    shape_str(shape), total, shape_str(resolved), num_elements(resolved)));
  const Tensor indices = on_host(sparse_tensor.indices());
  const int64_t n = indices.dim(0), rank = indices.dim(1);
  const int64_t new_rank = static_cast<int64_t>(resolved.size());
  Tensor out = Tensor::empty({n, new_rank}, DType::kI64);
  const int64_t* in = indices.data<int64_t>();
  int64_t* index = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (int64_t a = 0; a < rank; ++a)
      flat = flat * shape[static_cast<size_t>(a)] + in[i * rank + a];
    for (int64_t a = new_rank - 1; a >= 0; --a) {
      index[i * new_rank + a] = flat % resolved[static_cast<size_t>(a)];
      flat /= resolved[static_cast<size_t>(a)];
    }
  }
  return Tensor::sparse(out, on_host(sparse_tensor.values()), resolved);
}

FilledRows fill_empty_rows(const Tensor& sparse_tensor, const FillOptions& options) {
  require_sparse(sparse_tensor, "sparse::fill_empty_rows");
  const Shape& shape = sparse_tensor.shape();
  if (shape.empty())
    throw InvalidArgumentError(
        "sparse::fill_empty_rows: the sparse tensor is a scalar; rows "
        "need rank >= 1");
  const Tensor indices = on_host(sparse_tensor.indices());
  const Tensor values = on_host(sparse_tensor.values());
  const int64_t n = indices.dim(0), rank = indices.dim(1), rows = shape[0];
  const int64_t* in = indices.data<int64_t>();
  std::vector<int64_t> offset(static_cast<size_t>(rows) + 1, 0);  // first output slot per row
  for (int64_t i = 0; i < n; ++i) ++offset[static_cast<size_t>(in[i * rank]) + 1];
  Tensor indicator = Tensor::empty({rows}, DType::kBool);
  bool* empty = indicator.data<bool>();
  for (int64_t r = 0; r < rows; ++r) {
    empty[r] = offset[static_cast<size_t>(r) + 1] == 0;
    offset[static_cast<size_t>(r) + 1] += offset[static_cast<size_t>(r)] + (empty[r] ? 1 : 0);
  }
  const int64_t out_n = offset[static_cast<size_t>(rows)];
  Tensor out_indices = Tensor::zeros({out_n, rank}, DType::kI64);
  Tensor out_values = Tensor::empty({out_n}, values.dtype());
  Tensor reverse = Tensor::empty({n}, DType::kI64);
  int64_t* index = out_indices.data<int64_t>();
  int64_t* reverse_map = reverse.data<int64_t>();
  const Tensor fill = filled({1}, values.dtype(), options.default_value, options.default_string);
  for (int64_t r = 0; r < rows; ++r)
    if (empty[r]) {
      const int64_t slot = offset[static_cast<size_t>(r)];
      index[slot * rank] = r;
      copy_element(fill, 0, out_values, slot);
    }
  std::vector<int64_t> next(offset.begin(), offset.end() - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = next[static_cast<size_t>(in[i * rank])]++;
    for (int64_t a = 0; a < rank; ++a) index[slot * rank + a] = in[i * rank + a];
    copy_element(values, i, out_values, slot);
    reverse_map[i] = slot;
  }
  return {Tensor::sparse(out_indices, out_values, shape), indicator, reverse};
}

}  // namespace est::ops::sparse
