// A partitioned variable of a TensorFlow checkpoint read back whole: its entry holds the full
// dtype and shape and the list of slices (TensorSliceProto); each slice is stored under the
// key tf_slice_key.h encodes. Follows BundleReader::GetSliceValue in TensorFlow's
// tensorflow/core/util/tensor_bundle/tensor_bundle.cc for a full-tensor read: the slices must
// lie inside the shape, not overlap, and cover it.
#include <cstring>

#include <fmt/format.h>

#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_slice_key.h"
#include "ops/error.h"
#include "tf_tensor_bundle.pb.h"

namespace est::checkpoint {
namespace {

struct StoredSlice {
  std::vector<int64_t> start;
  ops::Shape shape;
  ops::Tensor values;
};

bool overlap(const StoredSlice& a, const StoredSlice& b) {
  for (size_t d = 0; d < a.start.size(); ++d)
    if (a.start[d] >= b.start[d] + b.shape[d] || b.start[d] >= a.start[d] + a.shape[d])
      return false;
  return true;
}

// Copies `slice` into `full` (row-major), one run of the innermost dimension at a time.
void copy_into(ops::Tensor& full, const StoredSlice& slice) {
  const ops::Shape& full_shape = full.shape();
  const size_t rank = full_shape.size();
  const int64_t slice_numel = ops::num_elements(slice.shape);
  if (slice_numel == 0) return;
  const int64_t run = rank == 0 ? 1 : slice.shape[rank - 1];
  std::vector<int64_t> index(rank, 0);  // within the slice, innermost dimension left at 0
  const bool strings = full.dtype() == ops::DType::kString;
  const size_t element = ops::dtype_size(full.dtype());
  for (int64_t copied = 0; copied < slice_numel; copied += run) {
    int64_t source = 0, target = 0;
    for (size_t d = 0; d < rank; ++d) {
      source = source * slice.shape[d] + index[d];
      target = target * full_shape[d] + slice.start[d] + index[d];
    }
    if (strings) {
      for (int64_t i = 0; i < run; ++i)
        full.data<std::string>()[target + i] = slice.values.data<std::string>()[source + i];
    } else {
      std::memcpy(static_cast<char*>(full.raw_data()) + target * element,
                  static_cast<const char*>(slice.values.raw_data()) + source * element,
                  static_cast<size_t>(run) * element);
    }
    for (size_t d = rank - 1; d-- > 0;) {  // advance the outer dimensions like an odometer
      if (++index[d] < slice.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

ops::Tensor TfBundleReader::read_partitioned(std::string_view name,
                                             const tfproto::BundleEntryProto& full) const {
  const std::string where =
      fmt::format("TensorFlow checkpoint {}, partitioned tensor \"{}\"", prefix_, name);
  const ops::Shape full_shape = checked_shape(full, where);
  std::vector<StoredSlice> slices;
  int64_t covered = 0;
  for (const auto& proto : full.slices()) {
    if (proto.extent_size() != static_cast<int>(full_shape.size()))
      throw DataLossError(fmt::format("{}: a slice has {} dimensions, the tensor {}", where,
                                      proto.extent_size(), full_shape.size()));
    StoredSlice slice;
    std::vector<tf_table::SliceExtent> extents;
    for (size_t d = 0; d < full_shape.size(); ++d) {
      const auto& extent = proto.extent(static_cast<int>(d));
      const int64_t length = extent.has_length() ? extent.length() : full_shape[d];
      if (extent.start() < 0 || length < 0 || extent.start() > full_shape[d] ||
          length > full_shape[d] - extent.start())
        throw DataLossError(fmt::format("{}: slice dimension {} [{}, +{}) lies outside shape {}",
                                        where, d, extent.start(), length,
                                        ops::shape_str(full_shape)));
      extents.push_back({extent.start(), extent.has_length() ? extent.length() : -1});
      slice.start.push_back(extent.start());
      slice.shape.push_back(length);
    }
    const std::string key = tf_table::encode_tensor_name_slice(name, extents);
    if (!contains(key))
      throw DataLossError(
          fmt::format("{}: the entry of its slice starting at {} is missing from "
                      "the index; the checkpoint is damaged",
                      where, ops::shape_str(slice.start)));
    const tfproto::BundleEntryProto& stored = entry(key, "Slice");
    if (stored.dtype() != full.dtype())
      throw DataLossError(fmt::format("{}: a slice's dtype differs from the tensor's", where));
    slice.values = read_stored(name, stored);
    if (slice.values.shape() != slice.shape)
      throw DataLossError(fmt::format("{}: a slice is stored with shape {}, its extents say {}",
                                      where, ops::shape_str(slice.values.shape()),
                                      ops::shape_str(slice.shape)));
    for (const StoredSlice& other : slices)
      if (ops::num_elements(slice.shape) > 0 && overlap(slice, other))
        throw DataLossError(fmt::format("{}: two slices overlap", where));
    covered += ops::num_elements(slice.shape);
    slices.push_back(std::move(slice));
  }
  if (covered != ops::num_elements(full_shape))
    throw DataLossError(
        fmt::format("{}: its slices cover {} of its {} elements (shape {}); a "
                    "part of the variable is missing",
                    where, covered, ops::num_elements(full_shape), ops::shape_str(full_shape)));
  ops::Tensor tensor = ops::Tensor::empty(
      full_shape, slices.empty() ? ops::DType::kF32 : slices.front().values.dtype());
  for (const StoredSlice& slice : slices) copy_into(tensor, slice);
  return tensor;
}

std::vector<TfTensorInfo> tf_list_variables(const std::string& path_or_dir) {
  return TfBundleReader(path_or_dir).list_variables();
}

ops::Tensor tf_load_variable(const std::string& path_or_dir, std::string_view name) {
  return TfBundleReader(path_or_dir).load_variable(name);
}

}  // namespace est::checkpoint
