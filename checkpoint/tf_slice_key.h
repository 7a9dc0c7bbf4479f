// The index key of one slice of a partitioned tensor in a TensorFlow checkpoint, as TensorFlow's
// checkpoint::EncodeTensorNameSlice (tensorflow/core/util/saved_tensor_slice_util.cc) builds it
// with strings::OrderedCode (tensorflow/core/lib/strings/ordered_code.cc):
//
//   NumIncreasing(0) String(name) NumIncreasing(rank) { SignedNumIncreasing(start)
//                                                       SignedNumIncreasing(length) } per dim
//
// where a dimension taken whole has start 0 and length -1. The leading 0 byte sorts every slice
// key before the tensor names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace est::checkpoint::tf_table {

struct SliceExtent {
  int64_t start = 0;
  int64_t length = -1;  // -1: the whole dimension
};

// OrderedCode's encodings, appended to `out`.
void append_ordered_number(std::string& out, uint64_t value);          // WriteNumIncreasing
void append_ordered_signed_number(std::string& out, int64_t value);    // WriteSignedNumIncreasing
void append_ordered_string(std::string& out, std::string_view value);  // WriteString

std::string encode_tensor_name_slice(std::string_view name, const std::vector<SliceExtent>& slice);

}  // namespace est::checkpoint::tf_table
