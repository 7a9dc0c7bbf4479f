// open_checkpoint: est's HDF5 reader or TensorFlow's bundle reader behind CheckpointSource.
#include "checkpoint/source.h"

#include <algorithm>

#include "checkpoint/reader.h"
#include "checkpoint/tf_bundle_reader.h"

namespace est::checkpoint {
namespace {

// est's HDF5 checkpoint: metadata read once, each tensor read (and its CRC checked) on demand.
class Hdf5Source final : public CheckpointSource {
 public:
  explicit Hdf5Source(const std::string& path_or_dir) : info_(read_info(path_or_dir)) {
    for (const TensorInfo& tensor : info_.tensors) names_.push_back(tensor.name);
    std::sort(names_.begin(), names_.end());
  }
  const std::string& path() const override { return info_.path; }
  std::vector<std::string> names() const override { return names_; }
  bool contains(std::string_view name) const override {
    return std::binary_search(names_.begin(), names_.end(), name);
  }
  ops::Tensor read(std::string_view name) const override { return load_variable(info_.path, name); }

 private:
  CheckpointInfo info_;
  std::vector<std::string> names_;
};

class TfSource final : public CheckpointSource {
 public:
  explicit TfSource(const std::string& path_or_dir) : reader_(path_or_dir) {}
  const std::string& path() const override { return reader_.prefix(); }
  std::vector<std::string> names() const override {
    std::vector<std::string> names;
    for (const TfTensorInfo& tensor : reader_.list_variables()) names.push_back(tensor.name);
    return names;
  }
  bool contains(std::string_view name) const override { return reader_.contains(name); }
  ops::Tensor read(std::string_view name) const override { return reader_.load_variable(name); }

 private:
  TfBundleReader reader_;
};

}  // namespace

std::unique_ptr<CheckpointSource> open_checkpoint(const std::string& path_or_dir) {
  if (is_tf_checkpoint(path_or_dir)) return std::make_unique<TfSource>(path_or_dir);
  return std::make_unique<Hdf5Source>(path_or_dir);
}

}  // namespace est::checkpoint
