// HDF5 datasets as a Dataset: rows of named HDF5 datasets (all sharing their first dimension),
// read a chunk of rows at a time with hyperslab selections, so a file larger than memory
// streams through. Feature names are the dataset paths without a leading '/'.
// (Named hdf5_reader.h so that it never shadows the library's own hdf5.h.)
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace est::data {

struct Hdf5Options {
  std::vector<std::string> features;  // dataset paths in the file: "images", "/group/x"
  std::string labels;                 // dataset path of the labels; empty: none
  int64_t chunk_rows = 1024;          // rows per read
};

// Types: float32/float64 stay; signed integers up to 32 bits read as int32, 64-bit as int64;
// uint8 stays uint8 (other unsigned widths widen to int32/int64). A missing file or dataset is
// NotFoundError; datasets with different row counts, InvalidArgumentError.
Dataset hdf5_dataset(std::string path, Hdf5Options options);

}  // namespace est::data
