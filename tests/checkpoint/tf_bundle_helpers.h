// Test helpers for TensorFlow checkpoints: the fixtures' paths, a scratch copy of a fixture,
// and a minimal writer of LevelDB-style tables (one data block, every entry a restart point,
// raw or snappy) to re-encode a real index with edited entries. Written from
// tsl/lib/io/table_format.txt; only the tests write tables.
#pragma once

#include <snappy.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/tf_bundle_table.h"
#include "checkpoint/tf_slice_key.h"
#include "data/crc32c.h"
#include "ops/array_ops.h"
#include "ops/tensor.h"
#include "tf_tensor_bundle.pb.h"

namespace est::checkpoint::tf_test {

namespace fs = std::filesystem;

inline std::string fixture(const std::string& name) {
  return std::string(EST_TF_TESTDATA) + "/" + name;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

// A fresh directory holding a copy of a fixture's variables/ files; removed on destruction.
struct ScratchCopy {
  fs::path dir;
  explicit ScratchCopy(const std::string& fixture_name) {
    dir = fs::temp_directory_path() /
          ("est_tf_bundle_" + fixture_name + "_" + std::to_string(::getpid()) + "_" +
           std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(dir);
    fs::create_directories(dir / "variables");
    for (const auto& file : fs::directory_iterator(fixture(fixture_name) + "/variables"))
      fs::copy_file(file.path(), dir / "variables" / file.path().filename());
  }
  ~ScratchCopy() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string prefix() const { return (dir / "variables" / "variables").string(); }
  std::string index() const { return prefix() + ".index"; }
  std::string shard() const { return prefix() + ".data-00000-of-00001"; }
};

// An empty scratch directory, removed with its contents on destruction.
struct BundleDir {
  fs::path path;
  BundleDir() {
    path = fs::temp_directory_path() / ("est_tf_writer_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~BundleDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string prefix(const std::string& name = "model.ckpt-7") const {
    return (path / name).string();
  }
};

using tf_table::put_fixed32;
using tf_table::put_varint64;

inline std::string block_of(const std::vector<tf_table::Entry>& entries) {
  std::string block;
  std::vector<uint32_t> restarts;
  for (const auto& [key, value] : entries) {
    restarts.push_back(static_cast<uint32_t>(block.size()));
    put_varint64(block, 0);
    put_varint64(block, key.size());
    put_varint64(block, value.size());
    block += key;
    block += value;
  }
  if (restarts.empty()) restarts.push_back(0);
  for (uint32_t restart : restarts) put_fixed32(block, restart);
  put_fixed32(block, static_cast<uint32_t>(restarts.size()));
  return block;
}

// Appends a block with its trailer; returns its handle's encoding.
inline std::string append_block(std::string& file, const std::string& contents, bool snappy) {
  std::string stored = contents;
  if (snappy) snappy::Compress(contents.data(), contents.size(), &stored);
  std::string handle;
  put_varint64(handle, file.size());
  put_varint64(handle, stored.size());
  stored.push_back(static_cast<char>(snappy ? tf_table::kSnappyBlock : tf_table::kRawBlock));
  const uint32_t crc = data::mask_crc(data::crc32c(stored.data(), stored.size()));
  file += stored;
  put_fixed32(file, crc);
  return handle;
}

inline std::string build_table(const std::vector<tf_table::Entry>& entries, bool snappy = false) {
  std::string file;
  const std::string data_handle = append_block(file, block_of(entries), snappy);
  const std::string metaindex_handle = append_block(file, block_of({}), false);
  const std::string last_key = entries.empty() ? std::string() : entries.back().first;
  const std::string index_handle = append_block(file, block_of({{last_key, data_handle}}), false);
  std::string footer = metaindex_handle + index_handle;
  footer.resize(tf_table::kFooterSize - 8, '\0');
  put_fixed32(footer, static_cast<uint32_t>(tf_table::kTableMagicNumber & 0xffffffffu));
  put_fixed32(footer, static_cast<uint32_t>(tf_table::kTableMagicNumber >> 32));
  return file + footer;
}

// A bundle written the way TensorFlow's BundleWriter lays one out (tensor_bundle.cc), for the
// cases no TF-written fixture here has: string tensors of several elements, partitioned
// variables, and edited headers and entries.
struct BundleBuilder {
  tfproto::BundleHeaderProto header;
  std::vector<tf_table::Entry> entries;  // the non-header entries, any order
  std::string shard;                     // the bytes of data shard 0

  BundleBuilder() {
    header.set_num_shards(1);
    header.mutable_version()->set_producer(1);
  }

  tfproto::BundleEntryProto entry_for(int dtype, const std::vector<int64_t>& shape) {
    tfproto::BundleEntryProto entry;
    entry.set_dtype(static_cast<tfproto::DataType>(dtype));
    for (int64_t d : shape) entry.mutable_shape()->add_dim()->set_size(d);
    return entry;
  }

  void add(const std::string& key, tfproto::BundleEntryProto entry) {
    entries.emplace_back(key, entry.SerializeAsString());
  }

  void add_bytes(const std::string& key, int dtype, const std::vector<int64_t>& shape,
                 const std::string& bytes, uint32_t crc) {
    tfproto::BundleEntryProto entry = entry_for(dtype, shape);
    entry.set_offset(static_cast<int64_t>(shard.size()));
    entry.set_size(static_cast<int64_t>(bytes.size()));
    entry.set_crc32c(data::mask_crc(crc));
    shard += bytes;
    add(key, entry);
  }

  void add_f32(const std::string& key, const std::vector<int64_t>& shape,
               const std::vector<float>& values) {
    std::string bytes(values.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), values.data(), bytes.size());
    add_bytes(key, tfproto::DT_FLOAT, shape, bytes, data::crc32c(bytes.data(), bytes.size()));
  }

  // A float32, float64, int32 or int64 tensor, its bytes as they are (little-endian hosts).
  void add_tensor(const std::string& key, const ops::Tensor& value) {
    const ops::DType dtype = value.dtype();
    const int tf_dtype = dtype == ops::DType::kF32   ? tfproto::DT_FLOAT
                         : dtype == ops::DType::kF64 ? tfproto::DT_DOUBLE
                         : dtype == ops::DType::kI32 ? tfproto::DT_INT32
                         : dtype == ops::DType::kI64 ? tfproto::DT_INT64
                                                     : tfproto::DT_INVALID;
    if (tf_dtype == tfproto::DT_INVALID)
      throw std::invalid_argument(key + ": a dtype this helper does not write");
    std::string bytes(static_cast<const char*>(value.raw_data()), value.nbytes());
    std::vector<int64_t> shape(value.shape().begin(), value.shape().end());
    add_bytes(key, tf_dtype, shape, bytes, data::crc32c(bytes.data(), bytes.size()));
  }

  void add_strings(const std::string& key, const std::vector<int64_t>& shape,
                   const std::vector<std::string>& values) {
    std::string bytes;
    uint32_t crc = 0;
    for (const std::string& value : values) {
      put_varint64(bytes, value.size());
      const auto length = static_cast<uint32_t>(value.size());
      crc = data::crc32c_extend(crc, &length, sizeof(length));
    }
    std::string length_crc;
    put_fixed32(length_crc, data::mask_crc(crc));
    crc = data::crc32c_extend(crc, length_crc.data(), 4);
    bytes += length_crc;
    for (const std::string& value : values) {
      bytes += value;
      crc = data::crc32c_extend(crc, value.data(), value.size());
    }
    if (values.empty()) bytes.clear(), crc = 0;  // TF writes nothing for no elements
    add_bytes(key, tfproto::DT_STRING, shape, bytes, crc);
  }

  // A row-major 2-D float tensor saved as the given slices, as BundleWriter::AddSlice does.
  void add_partitioned_f32(const std::string& key, const std::vector<int64_t>& shape,
                           const std::vector<float>& values,
                           const std::vector<std::vector<tf_table::SliceExtent>>& slices) {
    tfproto::BundleEntryProto full = entry_for(tfproto::DT_FLOAT, shape);
    for (const auto& slice : slices) {
      auto* proto = full.add_slices();
      std::vector<int64_t> start, extent;
      for (size_t d = 0; d < slice.size(); ++d) {
        auto* e = proto->add_extent();
        e->set_start(slice[d].start);
        if (slice[d].length >= 0) e->set_length(slice[d].length);
        start.push_back(slice[d].start);
        extent.push_back(slice[d].length >= 0 ? slice[d].length : shape[d]);
      }
      std::vector<float> part;
      for (int64_t i = 0; i < extent[0]; ++i)
        for (int64_t j = 0; j < extent[1]; ++j)
          part.push_back(values[(start[0] + i) * shape[1] + start[1] + j]);
      add_f32(tf_table::encode_tensor_name_slice(key, slice), extent, part);
    }
    add(key, full);
  }

  void write(const std::string& prefix, bool snappy = false) {
    std::vector<tf_table::Entry> sorted = entries;
    std::sort(sorted.begin(), sorted.end());
    sorted.insert(sorted.begin(), {std::string(), header.SerializeAsString()});
    write_bytes(prefix + ".index", build_table(sorted, snappy));
    write_bytes(prefix + ".data-00000-of-00001", shard);
  }
};

inline ops::Tensor strings(const std::vector<std::string>& values, const ops::Shape& shape) {
  ops::Tensor tensor = ops::Tensor::empty(shape, ops::DType::kString);
  for (size_t i = 0; i < values.size(); ++i) tensor.data<std::string>()[i] = values[i];
  return tensor;
}

// Every dtype est has, in shapes from scalar to empty to 3-D, with edge values: what the
// writer's tests write and read back (est's reader, and the independent Python reader).
inline std::vector<std::pair<std::string, ops::Tensor>> every_dtype() {
  std::vector<std::pair<std::string, ops::Tensor>> tensors;
  tensors.emplace_back(
      "dnn/hiddenlayer_0/kernel",
      ops::Tensor::from_vector<float>({1.5f, -2.25f, 3e-38f, 1e38f, 0.1f, -0.0f}, {2, 3}));
  tensors.emplace_back(
      "dnn/hiddenlayer_0/kernel/Adagrad",
      ops::Tensor::from_vector<float>({0.1f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, {2, 3}));
  tensors.emplace_back("f64", ops::Tensor::from_vector<double>({0.1, -1e300, 5e-324}, {3}));
  tensors.emplace_back("i32", ops::Tensor::from_vector<int32_t>({INT32_MIN, 0, INT32_MAX}, {3, 1}));
  tensors.emplace_back("i64", ops::Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}, {1, 2}));
  tensors.emplace_back("u8", ops::Tensor::from_vector<uint8_t>({0, 127, 255}, {3}));
  tensors.emplace_back("bool", ops::Tensor::from_vector<bool>({true, false, true, true}, {2, 2}));
  tensors.emplace_back(
      "bf16", ops::cast(ops::Tensor::from_vector<float>({1.0f, -0.5f, 3.0f}), ops::DType::kBF16));
  ops::Tensor step = ops::Tensor::empty({}, ops::DType::kI64);
  step.data<int64_t>()[0] = (int64_t{1} << 53) + 1;  // beyond a double's integers
  tensors.emplace_back("global_step", step);
  tensors.emplace_back("scalar_f32", ops::Tensor::scalar(0.5));
  tensors.emplace_back("empty_f32", ops::Tensor::empty({0}, ops::DType::kF32));
  tensors.emplace_back("empty_2d_i64", ops::Tensor::empty({2, 0, 3}, ops::DType::kI64));
  tensors.emplace_back("vocab",
                       strings({"", "a", std::string(300, 'x'), std::string("\0b", 2)}, {2, 2}));
  tensors.emplace_back("scalar_string", strings({"hello"}, {}));
  tensors.emplace_back("empty_strings", ops::Tensor::empty({0}, ops::DType::kString));
  return tensors;
}

}  // namespace est::checkpoint::tf_test
