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

inline void put_varint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

inline void put_fixed32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

inline std::string block_of(const std::vector<tf_table::Entry>& entries) {
  std::string block;
  std::vector<uint32_t> restarts;
  for (const auto& [key, value] : entries) {
    restarts.push_back(static_cast<uint32_t>(block.size()));
    put_varint(block, 0);
    put_varint(block, key.size());
    put_varint(block, value.size());
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
  put_varint(handle, file.size());
  put_varint(handle, stored.size());
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
      put_varint(bytes, value.size());
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

}  // namespace est::checkpoint::tf_test
