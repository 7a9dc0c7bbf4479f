// HDF5 files as Keras's h5py writes them, in memory: groups, datasets, and string attributes
// stored as h5py 3 stores Python strings (variable length; UTF-8 for str, ASCII for bytes).
// Internal to keras/ (saving); built on checkpoint/hdf5_util.h.
//
// A file is created or opened in memory (HDF5's core driver) so that a `.keras` archive's
// model.weights.h5 needs no temporary file; bytes() is the finished file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/hdf5_util.h"
#include "ops/tensor.h"

namespace est::keras {

class H5File {
 public:
  // An empty file to write.
  static H5File create();
  // The file whose bytes are `image`; `where` names it in errors (DataLossError when the bytes
  // are not an HDF5 file).
  static H5File open(const std::string& image, const std::string& where);
  // NotFoundError when there is no file at `path`.
  static H5File read(const std::string& path);

  // The file's bytes, everything written so far.
  std::string bytes() const;
  // Writes bytes() to `path` (its directory is created).
  void save_as(const std::string& path) const;
  const std::string& where() const { return where_; }

  // Groups are made as needed along a path ("layers/dense/vars").
  void create_group(const std::string& path);
  void write_dataset(const std::string& path, const ops::Tensor& value);
  // On the group or dataset at `object` ("/" is the root).
  void write_string(const std::string& object, const std::string& name, const std::string& value,
                    bool utf8 = false);
  void write_strings(const std::string& object, const std::string& name,
                     const std::vector<std::string>& values);

  bool exists(const std::string& path) const;
  // The names in a group (HDF5's name order); DataLossError when it is not a group.
  std::vector<std::string> children(const std::string& group) const;
  // DataLossError naming the file and the path when it is missing or unreadable.
  ops::Tensor read_dataset(const std::string& path) const;
  std::optional<std::string> read_string(const std::string& object, const std::string& name) const;
  std::vector<std::string> read_strings(const std::string& object, const std::string& name) const;

 private:
  H5File(checkpoint::detail::Hid file, std::string where);
  checkpoint::detail::Hid open_object(const std::string& path) const;

  checkpoint::detail::Hid file_;
  std::string where_;
};

}  // namespace est::keras
