// The position of a source that reads rows in order (from_tensor_slices, HDF5): skipping over
// rows, and its state, the stage's name and the next row, checked on restore against the rows
// the source has.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/state.h"
#include "ops/error.h"

namespace est::data {

// Moves `row` on by up to `count` of `rows` rows; returns how many it moved.
inline int64_t skip_rows(int64_t& row, int64_t rows, int64_t count) {
  const int64_t skipped = std::min(count, rows - row);
  row += skipped;
  return skipped;
}

inline void save_row(StateWriter& writer, std::string_view stage, int64_t row) {
  writer.begin_stage(stage);
  writer.write_i64(row);
}

// The row save_row wrote. One outside [0, rows] is an InvalidArgumentError, "iterator state
// does not match this pipeline: " followed by describe(row).
template <class Describe>
int64_t restore_row(StateReader& reader, std::string_view stage, int64_t rows,
                    Describe&& describe) {
  reader.expect_stage(stage);
  const int64_t row = reader.read_i64();
  if (row < 0 || row > rows)
    throw InvalidArgumentError("iterator state does not match this pipeline: " + describe(row));
  return row;
}

}  // namespace est::data
