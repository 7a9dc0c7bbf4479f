// RowStore construction, appending rows, and reading one row back as an element.
#include "data/row_store.h"

#include <algorithm>
#include <cstring>

namespace est::data {

namespace {

template <class Fn>
void for_each_role(const Element& element, Fn&& fn) {
  for (const auto& [name, tensor] : element.features) fn(RowStore::Role::kFeature, name, tensor);
  if (element.labels.defined())
    fn(RowStore::Role::kLabels, std::string(kLabelsName), element.labels);
  if (element.value.defined()) fn(RowStore::Role::kValue, std::string(kValueName), element.value);
}

}  // namespace

RowStore RowStore::from_columns(const Element& columns, int64_t rows) {
  RowStore store;
  store.rows = rows;
  store.chunk_rows = std::max<int64_t>(rows, 1);
  for_each_role(columns, [&](Role role, const std::string& name, const Tensor& tensor) {
    Column column{.name = name, .role = role, .dtype = tensor.dtype()};
    column.row_shape.assign(tensor.shape().begin() + 1, tensor.shape().end());
    column.row_bytes =
        static_cast<size_t>(ops::num_elements(column.row_shape)) * ops::dtype_size(column.dtype);
    column.chunks.push_back(tensor);
    column.data.push_back(element_pointer(tensor));
    store.columns.push_back(std::move(column));
  });
  return store;
}

std::optional<RowStore> RowStore::shaped_like(const Element& element, size_t chunk_bytes) {
  RowStore store;
  size_t bytes_per_row = 0;
  bool on_cpu = true;
  for_each_role(element, [&](Role role, const std::string& name, const Tensor& tensor) {
    if (!tensor.defined() || tensor.is_sparse() || !tensor.device().is_cpu()) {
      on_cpu = false;
      return;
    }
    Column column{.name = name, .role = role, .dtype = tensor.dtype(), .row_shape = tensor.shape()};
    column.row_bytes = tensor.nbytes();
    bytes_per_row += column.row_bytes;
    store.columns.push_back(std::move(column));
  });
  if (!on_cpu) return std::nullopt;
  store.chunk_rows = std::clamp<int64_t>(
      static_cast<int64_t>(chunk_bytes / std::max<size_t>(bytes_per_row, 1)), 1, 1 << 16);
  return store;
}

bool RowStore::matches(const Element& element) const {
  size_t expected = element.features.size() + (element.labels.defined() ? 1 : 0) +
                    (element.value.defined() ? 1 : 0);
  if (expected != columns.size()) return false;
  size_t index = 0;
  bool same = true;
  for_each_role(element, [&](Role role, const std::string& name, const Tensor& tensor) {
    const Column& column = columns[index++];
    same = same && tensor.defined() && !tensor.is_sparse() && column.role == role &&
           column.name == name && column.dtype == tensor.dtype() &&
           column.row_shape == tensor.shape() && tensor.device().is_cpu();
  });
  return same;
}

void RowStore::append(const Element& element) {
  int64_t offset = rows % chunk_rows;
  size_t index = 0;
  for_each_role(element, [&](Role, const std::string&, const Tensor& tensor) {
    Column& column = columns[index++];
    if (offset == 0) {
      Shape shape{chunk_rows};
      shape.insert(shape.end(), column.row_shape.begin(), column.row_shape.end());
      column.chunks.push_back(Tensor::empty(shape, column.dtype));
      column.data.push_back(element_pointer(column.chunks.back()));
    }
    copy_elements(
        const_cast<char*>(column.data.back()) + static_cast<size_t>(offset) * column.row_bytes,
        element_pointer(tensor), column.row_bytes, column.dtype);
  });
  ++rows;
}

void RowStore::shrink_to_fit() {
  const int64_t used = rows % chunk_rows;
  if (used == 0) return;
  for (Column& column : columns) {
    Shape shape{used};
    shape.insert(shape.end(), column.row_shape.begin(), column.row_shape.end());
    Tensor exact = Tensor::empty(shape, column.dtype);
    copy_elements(element_pointer(exact), column.data.back(),
                  static_cast<size_t>(used) * column.row_bytes, column.dtype);
    column.chunks.back() = exact;
    column.data.back() = element_pointer(exact);
  }
}

Element RowStore::row(int64_t index) const {
  Element out;
  for (const Column& column : columns) {
    Tensor tensor = Tensor::empty(column.row_shape, column.dtype);
    copy_elements(element_pointer(tensor), row_data(column, index), column.row_bytes, column.dtype);
    switch (column.role) {
      case Role::kFeature:
        out.features.emplace(column.name, std::move(tensor));
        break;
      case Role::kLabels:
        out.labels = std::move(tensor);
        break;
      case Role::kValue:
        out.value = std::move(tensor);
        break;
    }
  }
  return out;
}

}  // namespace est::data
