// TensorFlow V2 checkpoint (tensor bundle) reading; see tf_bundle_reader.h. Follows
// tensorflow/core/util/tensor_bundle/tensor_bundle.cc (BundleReader's constructor, GetValue,
// ReadStringTensor, GetSliceValue) and naming.cc; checkpoint_reader.cc for what
// list_variables shows.
#include "checkpoint/tf_bundle_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "checkpoint/file_util.h"
#include "checkpoint/state_file.h"
#include "checkpoint/tf_bundle_table.h"
#include "checkpoint/tf_slice_key.h"
#include "data/crc32c.h"
#include "ops/error.h"
#include "tf_tensor_bundle.pb.h"

namespace est::checkpoint {
namespace {

namespace fs = std::filesystem;
using tfproto::BundleEntryProto;
using tfproto::BundleHeaderProto;

// tensor_bundle.cc: kTensorBundleVersion (the consumer version) and kTensorBundleMinProducer.
constexpr int kBundleVersion = 1;
constexpr int kBundleMinProducer = 0;

// TensorFlow's Python names of its DataType values (tf.dtypes.as_dtype(n).name), by value.
constexpr std::array<const char*, 31> kTfDtypeNames = {"invalid",
                                                       "float32",
                                                       "float64",
                                                       "int32",
                                                       "uint8",
                                                       "int16",
                                                       "int8",
                                                       "string",
                                                       "complex64",
                                                       "int64",
                                                       "bool",
                                                       "qint8",
                                                       "quint8",
                                                       "qint32",
                                                       "bfloat16",
                                                       "qint16",
                                                       "quint16",
                                                       "uint16",
                                                       "complex128",
                                                       "float16",
                                                       "resource",
                                                       "variant",
                                                       "uint32",
                                                       "uint64",
                                                       "float8_e5m2",
                                                       "float8_e4m3fn",
                                                       "float8_e4m3fnuz",
                                                       "float8_e4m3b11fnuz",
                                                       "float8_e5m2fnuz",
                                                       "int4",
                                                       "uint4"};

std::string tf_dtype_name(int dtype) {
  if (dtype >= 0 && dtype < static_cast<int>(kTfDtypeNames.size())) return kTfDtypeNames[dtype];
  return fmt::format("DataType {}", dtype);
}

std::optional<ops::DType> est_dtype(int dtype) {
  switch (dtype) {
    case tfproto::DT_FLOAT:
      return ops::DType::kF32;
    case tfproto::DT_DOUBLE:
      return ops::DType::kF64;
    case tfproto::DT_INT32:
      return ops::DType::kI32;
    case tfproto::DT_INT64:
      return ops::DType::kI64;
    case tfproto::DT_UINT8:
      return ops::DType::kU8;
    case tfproto::DT_BOOL:
      return ops::DType::kBool;
    case tfproto::DT_BFLOAT16:
      return ops::DType::kBF16;
    case tfproto::DT_STRING:
      return ops::DType::kString;
    default:
      return std::nullopt;
  }
}

bool file_exists(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// Refuses a range beyond the data shard open as `fd`, before anything is allocated for it.
void check_shard_range(int fd, const std::string& path, std::string_view key, int64_t offset,
                       int64_t size) {
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    throw UnavailableError(fmt::format("TensorFlow checkpoint data shard {}: fstat failed: {}",
                                       path, std::strerror(errno)));
  const auto file_size = static_cast<uintmax_t>(info.st_size);
  if (offset < 0 || size < 0 || static_cast<uintmax_t>(offset) > file_size ||
      static_cast<uintmax_t>(size) > file_size - static_cast<uintmax_t>(offset))
    throw DataLossError(fmt::format(
        "TensorFlow checkpoint data shard {}: the index puts \"{}\" at bytes [{}, {} + {}) but the "
        "shard has {} bytes; the shard is truncated or belongs to another checkpoint",
        path, key, offset, offset, size, file_size));
}

// Reads bytes [offset, offset + size) of the data shard open as `fd` into `out`
// (read_file_range); with `crc`, their CRC32C too, each piece while it is still in the cache.
void read_shard_range(int fd, const std::string& path, std::string_view key, int64_t offset,
                      int64_t size, char* out, uint32_t* crc = nullptr) {
  if (crc) *crc = 0;
  const int64_t done = read_file_range(fd, offset, size, out, [&](const char* piece, size_t bytes) {
    if (crc) *crc = data::crc32c_extend(*crc, piece, bytes);
  });
  if (done != size)
    throw DataLossError(
        fmt::format("TensorFlow checkpoint data shard {}: reading \"{}\" ({} bytes "
                    "at offset {}) came up short",
                    path, key, size, offset));
}

// ReadStringTensor's layout: numel varint64 lengths, the masked CRC32C of the lengths (each as
// a little-endian uint32, or uint64 above 2^32-1), then the bytes. The entry's CRC covers
// those lengths, the stored length checksum and the bytes.
uint32_t decode_strings(std::string_view bytes, std::string* out, int64_t numel,
                        const std::string& where) {
  if (bytes.empty()) return 0;  // no elements: TensorFlow writes nothing
  std::vector<uint64_t> lengths(static_cast<size_t>(numel));
  uint32_t crc = 0;
  uint64_t total = 0;
  for (auto& length : lengths) {
    if (!tf_table::read_varint64(bytes, &length))
      throw DataLossError(fmt::format("{}: the string lengths run past the entry's bytes", where));
    if (length <= UINT32_MAX) {
      const auto narrow = static_cast<uint32_t>(length);
      crc = data::crc32c_extend(crc, &narrow, sizeof(narrow));
    } else {
      crc = data::crc32c_extend(crc, &length, sizeof(length));
    }
    total += length;
  }
  if (bytes.size() < 4)
    throw DataLossError(fmt::format("{}: the string lengths' checksum is missing", where));
  const uint32_t stored = data::unmask_crc(tf_table::decode_fixed32(bytes.data()));
  if (stored != crc)
    throw DataLossError(
        fmt::format("{}: the string lengths fail their CRC32C check (stored "
                    "{:08x}, computed {:08x})",
                    where, stored, crc));
  crc = data::crc32c_extend(crc, bytes.data(), 4);
  bytes.remove_prefix(4);
  if (total != bytes.size())
    throw DataLossError(
        fmt::format("{}: the string lengths add up to {} bytes but the entry "
                    "holds {}",
                    where, total, bytes.size()));
  for (size_t i = 0; i < lengths.size(); ++i) {
    out[i].assign(bytes.substr(0, lengths[i]));
    crc = data::crc32c_extend(crc, bytes.data(), lengths[i]);
    bytes.remove_prefix(lengths[i]);
  }
  return crc;
}

}  // namespace

std::string tf_data_shard_path(const std::string& prefix, int shard, int num_shards) {
  return fmt::format("{}.data-{:05d}-of-{:05d}", prefix, shard, num_shards);
}

std::string resolve_tf_checkpoint_prefix(const std::string& path_or_dir) {
  if (file_exists(path_or_dir + ".index")) return path_or_dir;
  constexpr std::string_view kIndex = ".index";
  if (path_or_dir.ends_with(kIndex) && file_exists(path_or_dir))
    return path_or_dir.substr(0, path_or_dir.size() - kIndex.size());
  std::error_code error;
  if (fs::is_directory(path_or_dir, error)) {
    if (std::optional<CheckpointState> state = read_checkpoint_state(path_or_dir)) {
      const std::string prefix = resolve_in_directory(path_or_dir, state->model_checkpoint_path);
      if (file_exists(prefix + ".index")) return prefix;
      throw NotFoundError(fmt::format(
          "The \"checkpoint\" state file in {} names {}, but {}.index does not exist; copy the "
          "checkpoint's files there or pass an existing checkpoint prefix",
          path_or_dir, state->model_checkpoint_path, prefix));
    }
    const std::string saved_model = (fs::path(path_or_dir) / "variables" / "variables").string();
    if (file_exists(saved_model + ".index")) return saved_model;
  }
  throw NotFoundError(fmt::format(
      "No TensorFlow checkpoint at {}: looked for {}.index, a directory with a \"checkpoint\" "
      "state file, and a SavedModel's variables/variables.index; pass a checkpoint prefix such "
      "as model_dir/model.ckpt-1000",
      path_or_dir, path_or_dir));
}

bool is_tf_checkpoint(const std::string& path_or_dir) {
  try {
    (void)resolve_tf_checkpoint_prefix(path_or_dir);
    return true;
  } catch (const Error&) {
    return false;
  }
}

TfBundleReader::TfBundleReader(const std::string& path_or_dir)
    : prefix_(resolve_tf_checkpoint_prefix(path_or_dir)), index_path_(prefix_ + ".index") {
  std::vector<tf_table::Entry> table = tf_table::read_table_file(index_path_);
  if (table.empty() || !table.front().first.empty())
    throw DataLossError(
        fmt::format("TensorFlow checkpoint index {} has no header entry (the empty "
                    "key); it is damaged or not a tensor bundle",
                    index_path_));
  BundleHeaderProto header;
  if (!header.ParseFromString(table.front().second))
    throw DataLossError(
        fmt::format("TensorFlow checkpoint index {}: the header entry does not "
                    "parse as a BundleHeaderProto",
                    index_path_));
  if (header.endianness() == BundleHeaderProto::BIG)
    throw UnimplementedError(fmt::format(
        "TensorFlow checkpoint {} was written on a big-endian machine; est reads little-endian "
        "bundles only: re-save it with TensorFlow on a little-endian machine",
        prefix_));
  // CheckVersions (tensorflow/core/framework/versions.cc) with the bundle's versions.
  const auto& version = header.version();
  if (version.producer() < kBundleMinProducer)
    throw InvalidArgumentError(fmt::format(
        "TensorFlow checkpoint {}: producer version {} is below the minimum {}; regenerate the "
        "checkpoint",
        prefix_, version.producer(), kBundleMinProducer));
  if (version.min_consumer() > kBundleVersion)
    throw InvalidArgumentError(fmt::format(
        "TensorFlow checkpoint {}: it needs a reader of version {} or newer, this one is version "
        "{}; save it with an older TensorFlow",
        prefix_, version.min_consumer(), kBundleVersion));
  for (int bad : version.bad_consumers())
    if (bad == kBundleVersion)
      throw InvalidArgumentError(fmt::format(
          "TensorFlow checkpoint {}: it disallows reader version {}; save it with another "
          "TensorFlow",
          prefix_, kBundleVersion));
  num_shards_ = header.num_shards();
  for (size_t i = 1; i < table.size(); ++i) {
    auto entry = std::make_unique<BundleEntryProto>();
    if (!entry->ParseFromString(table[i].second))
      throw DataLossError(
          fmt::format("TensorFlow checkpoint index {}: the entry for \"{}\" does "
                      "not parse as a BundleEntryProto",
                      index_path_, table[i].first));
    entries_.emplace(std::move(table[i].first), std::move(entry));
  }
}

TfBundleReader::~TfBundleReader() {
  for (int fd : shard_fds_)
    if (fd >= 0) ::close(fd);
}

int TfBundleReader::shard_fd(int shard, std::string_view key) const {
  std::lock_guard<std::mutex> lock(shard_mutex_);
  if (shard_fds_.empty()) shard_fds_.assign(static_cast<size_t>(num_shards_), -1);
  int& fd = shard_fds_[static_cast<size_t>(shard)];
  if (fd < 0) {
    const std::string path = tf_data_shard_path(prefix_, shard, num_shards_);
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw NotFoundError(fmt::format(
          "TensorFlow checkpoint data shard {} (holding \"{}\") cannot be opened: {}; copy every "
          "`.data-NNNNN-of-NNNNN` file of the checkpoint next to its `.index`",
          path, key, std::strerror(errno)));
  }
  return fd;
}

std::vector<TfTensorInfo> TfBundleReader::list_variables() const {
  // checkpoint_reader.cc: the keys of slices are hidden behind their full tensor.
  std::set<std::string, std::less<>> slice_keys;
  for (const auto& [name, entry] : entries_)
    for (const auto& slice : entry->slices()) {
      std::vector<tf_table::SliceExtent> extents;
      for (const auto& extent : slice.extent())
        extents.push_back({extent.start(), extent.has_length() ? extent.length() : -1});
      slice_keys.insert(tf_table::encode_tensor_name_slice(name, extents));
    }
  std::vector<TfTensorInfo> infos;
  for (const auto& [name, entry] : entries_) {
    if (slice_keys.contains(name)) continue;
    TfTensorInfo info{.name = name,
                      .tf_dtype = entry->dtype(),
                      .dtype_name = tf_dtype_name(entry->dtype()),
                      .dtype_enum = tfproto::DataType_IsValid(entry->dtype())
                                        ? tfproto::DataType_Name(entry->dtype())
                                        : tf_dtype_name(entry->dtype()),
                      .partitioned = entry->slices_size() > 0};
    for (const auto& dim : entry->shape().dim()) info.shape.push_back(dim.size());
    infos.push_back(std::move(info));
  }
  return infos;  // std::map order: bytewise, as Python's sorted() orders the names
}

bool TfBundleReader::contains(std::string_view name) const { return entries_.contains(name); }

const BundleEntryProto& TfBundleReader::entry(std::string_view key, std::string_view what) const {
  auto found = entries_.find(key);
  if (found == entries_.end())
    throw NotFoundError(
        fmt::format("{} \"{}\" is not in TensorFlow checkpoint {}; list its "
                    "variables (est-ckpt list) for the names it has",
                    what, key, prefix_));
  return *found->second;
}

ops::Tensor TfBundleReader::load_variable(std::string_view name) const {
  const BundleEntryProto& found = entry(name, "Variable");
  return found.slices_size() > 0 ? read_partitioned(name, found) : read_stored(name, found);
}

ops::Shape TfBundleReader::checked_shape(const tfproto::BundleEntryProto& entry,
                                         const std::string& where) {
  // TensorShape::IsValid: a known rank, no negative dimension, no overflowing element count.
  if (entry.shape().unknown_rank())
    throw DataLossError(fmt::format("{}: the stored shape has unknown rank", where));
  ops::Shape shape;
  int64_t numel = 1;
  for (const auto& dim : entry.shape().dim()) {
    if (dim.size() < 0 || (dim.size() > 0 && numel > (int64_t{1} << 62) / dim.size()))
      throw DataLossError(fmt::format("{}: invalid stored dimension {}", where, dim.size()));
    shape.push_back(dim.size());
    numel *= dim.size();
  }
  return shape;
}

ops::Tensor TfBundleReader::read_stored(std::string_view name,
                                        const BundleEntryProto& entry) const {
  const std::string where = fmt::format("TensorFlow checkpoint {}, tensor \"{}\"", prefix_, name);
  const std::optional<ops::DType> dtype = est_dtype(entry.dtype());
  if (!dtype)
    throw UnimplementedError(fmt::format(
        "{} has dtype {} ({}), which est does not have; cast it to a supported type "
        "(float32, float64, int32, int64, uint8, bool, bfloat16, string) in TensorFlow and save "
        "again",
        where, tf_dtype_name(entry.dtype()), tfproto::DataType_Name(entry.dtype())));
  const ops::Shape shape = checked_shape(entry, where);
  const int64_t numel = ops::num_elements(shape);
  const bool strings = *dtype == ops::DType::kString;
  // GetValue's size checks: exact for fixed-size types, at least a byte per string otherwise.
  if (!strings && numel > (int64_t{1} << 62) / static_cast<int64_t>(ops::dtype_size(*dtype)))
    throw DataLossError(fmt::format("{}: shape {} is too large", where, ops::shape_str(shape)));
  if (!strings && entry.size() != numel * static_cast<int64_t>(ops::dtype_size(*dtype)))
    throw DataLossError(fmt::format("{}: the entry says {} bytes but shape {} of {} needs {}",
                                    where, entry.size(), ops::shape_str(shape),
                                    tf_dtype_name(entry.dtype()),
                                    numel * static_cast<int64_t>(ops::dtype_size(*dtype))));
  if (strings && entry.size() < numel)
    throw DataLossError(fmt::format("{}: the entry says {} bytes, too few for {} strings", where,
                                    entry.size(), numel));
  if (entry.shard_id() < 0 || entry.shard_id() >= num_shards_)
    throw DataLossError(fmt::format("{}: shard {} is outside the header's {} shards", where,
                                    entry.shard_id(), num_shards_));
  const std::string shard = tf_data_shard_path(prefix_, entry.shard_id(), num_shards_);
  const int fd = shard_fd(entry.shard_id(), name);
  check_shard_range(fd, shard, name, entry.offset(), entry.size());
  ops::Tensor tensor = ops::Tensor::empty(shape, *dtype);
  uint32_t actual = 0;
  if (strings) {
    std::string bytes(static_cast<size_t>(entry.size()), '\0');
    read_shard_range(fd, shard, name, entry.offset(), entry.size(), bytes.data());
    actual = decode_strings(bytes, tensor.data<std::string>(), numel, where);
  } else {
    // Fixed-size elements: read into the tensor itself, checksummed as the pieces arrive.
    read_shard_range(fd, shard, name, entry.offset(), entry.size(),
                     static_cast<char*>(tensor.raw_data()), &actual);
  }
  const uint32_t stored = data::unmask_crc(entry.crc32c());
  if (stored != actual)
    throw DataLossError(fmt::format(
        "{} (shard {}, {} bytes at offset {}): the CRC32C check fails (stored {:08x}, computed "
        "{:08x}); the data shard is damaged, copy the checkpoint again",
        where, shard, entry.size(), entry.offset(), stored, actual));
  return tensor;
}

}  // namespace est::checkpoint
