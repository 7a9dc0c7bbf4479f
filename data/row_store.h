// RowStore: rows kept column-wise, the layout behind the pipeline's memcpy-speed paths.
//
// One column per component of the element structure (features by name, then labels, then
// value); each column is a list of chunk tensors [chunk_rows, ...row shape]. Tensor slices are
// a store of one chunk (the user's tensors, shared); a memory cache records into chunks as
// elements arrive, so a cached epoch costs one copy of the data and no per-element objects.
// shuffle() permutes row numbers of a store and batch() copies rows straight from the columns
// into the batch (see IteratorBase::row_store in node.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/element.h"

namespace est::data {

struct RowStore {
  enum class Role { kFeature, kLabels, kValue };
  struct Column {
    std::string name;  // the feature's name; kLabelsName / kValueName for the other roles
    Role role = Role::kFeature;
    DType dtype = DType::kF32;
    Shape row_shape;
    size_t row_bytes = 0;
    std::vector<Tensor> chunks;     // [chunk_rows, ...row_shape] each
    std::vector<const char*> data;  // chunks[i].raw_data()
  };

  std::vector<Column> columns;
  int64_t chunk_rows = 1;
  int64_t rows = 0;

  // Tensors [rows, ...] as a store of one chunk; they are shared, not copied.
  static RowStore from_columns(const Element& columns, int64_t rows);
  // An empty store whose rows look like `element`; nullopt if it has a tensor off the CPU.
  static std::optional<RowStore> shaped_like(const Element& element, size_t chunk_bytes);

  bool matches(const Element& element) const;  // same structure, dtypes and shapes
  void append(const Element& element);         // copies one row; requires matches()
  // Cuts a partly filled last chunk to the rows it holds (one copy of that chunk); no more
  // rows may be appended after it.
  void shrink_to_fit();
  Element row(int64_t index) const;  // a new element holding copies
  const char* row_data(const Column& column, int64_t index) const {
    return column.data[static_cast<size_t>(index / chunk_rows)] +
           static_cast<size_t>(index % chunk_rows) * column.row_bytes;
  }
};

}  // namespace est::data
