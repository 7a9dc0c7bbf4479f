// open_checkpoint: est's HDF5 reader or TensorFlow's bundle reader behind CheckpointSource.
#include "checkpoint/source.h"

#include <algorithm>
#include <map>
#include <set>

#include "checkpoint/reader.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_object_graph.h"

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

// TensorFlow's bundle. An object-based (TF2) one is also read by its variables' names
// (tf_object_graph.h): names() lists those instead of the keys they map to (and leaves the
// object graph itself out), contains() and read() take either.
class TfSource final : public CheckpointSource {
 public:
  explicit TfSource(const std::string& path_or_dir)
      : reader_(path_or_dir), keys_(tf_object_graph_names(reader_)) {}
  const std::string& path() const override { return reader_.prefix(); }
  std::vector<std::string> names() const override {
    std::set<std::string_view> mapped;
    for (const auto& [name, key] : keys_) mapped.insert(key);
    std::vector<std::string> names;
    for (const TfTensorInfo& tensor : reader_.list_variables())
      if (!mapped.count(tensor.name) && tensor.name != kTfObjectGraphKey)
        names.push_back(tensor.name);
    for (const auto& [name, key] : keys_) names.push_back(name);
    std::sort(names.begin(), names.end());
    return names;
  }
  bool contains(std::string_view name) const override {
    return reader_.contains(name) || keys_.count(name);
  }
  ops::Tensor read(std::string_view name) const override {
    auto mapped = keys_.find(name);
    return reader_.load_variable(mapped == keys_.end() ? name : std::string_view(mapped->second));
  }

 private:
  TfBundleReader reader_;
  std::map<std::string, std::string, std::less<>> keys_;  // variable name -> key (TF2)
};

}  // namespace

std::unique_ptr<CheckpointSource> open_checkpoint(const std::string& path_or_dir) {
  if (is_tf_checkpoint(path_or_dir)) return std::make_unique<TfSource>(path_or_dir);
  return std::make_unique<Hdf5Source>(path_or_dir);
}

}  // namespace est::checkpoint
