// TensorFlow V2 checkpoint (tensor bundle) writing; see tf_bundle_writer.h. Follows
// tensorflow/core/util/tensor_bundle/tensor_bundle.cc (BundleWriter, WriteStringTensor).
#include "checkpoint/tf_bundle_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "checkpoint/file_util.h"
#include "checkpoint/tf_bundle_reader.h"
#include "data/crc32c.h"
#include "nn/variable_store.h"
#include "ops/error.h"
#include "tf_tensor_bundle.pb.h"

namespace est::checkpoint {
namespace {

namespace fs = std::filesystem;

// tensor_bundle.cc: kTensorBundleVersion is what a writer records as its producer version;
// kTensorBundleMinConsumer is 0.
constexpr int kBundleProducer = 1;

}  // namespace

int tf_dtype_of(ops::DType dtype) {
  switch (dtype) {
    case ops::DType::kF32:
      return tfproto::DT_FLOAT;
    case ops::DType::kF64:
      return tfproto::DT_DOUBLE;
    case ops::DType::kI32:
      return tfproto::DT_INT32;
    case ops::DType::kI64:
      return tfproto::DT_INT64;
    case ops::DType::kU8:
      return tfproto::DT_UINT8;
    case ops::DType::kBool:
      return tfproto::DT_BOOL;
    case ops::DType::kBF16:
      return tfproto::DT_BFLOAT16;
    case ops::DType::kString:
      return tfproto::DT_STRING;
  }
  throw InternalError(fmt::format("tf_dtype_of: unknown dtype {}", static_cast<int>(dtype)));
}

// The data shard's temporary file, written through stdio's buffer.
struct TfBundleWriter::File {
  fs::path temporary;
  fs::path final_path;
  std::FILE* stream = nullptr;

  void append(const void* bytes, size_t size) {
    if (size > 0 && std::fwrite(bytes, 1, size, stream) != size)
      throw_errno(errno,
                  fmt::format("Writing TensorFlow checkpoint data shard {}", final_path.string()));
  }
  void close() {
    std::FILE* closing = std::exchange(stream, nullptr);
    if (closing && std::fclose(closing) != 0)
      throw_errno(errno, fmt::format("Closing TensorFlow checkpoint data shard {} (data not "
                                     "flushed); check free disk space",
                                     final_path.string()));
  }
  ~File() {
    if (stream) std::fclose(stream);
    std::error_code ignored;
    if (!temporary.empty()) fs::remove(temporary, ignored);
  }
};

TfBundleWriter::TfBundleWriter(std::string prefix, TfBundleWriterOptions options)
    : prefix_(std::move(prefix)), options_(options), data_(std::make_unique<File>()) {
  if (prefix_.empty() || prefix_.ends_with('/'))
    throw InvalidArgumentError(
        fmt::format("TensorFlow checkpoint prefix \"{}\" names no file; pass a prefix such as "
                    "model_dir/model.ckpt-1000",
                    prefix_));
  data_->final_path = tf_data_shard_path(prefix_, 0, 1);
  ensure_directory(data_->final_path.parent_path().empty() ? fs::path(".")
                                                           : data_->final_path.parent_path());
  data_->temporary = temporary_path_for(data_->final_path);
  data_->stream = std::fopen(data_->temporary.c_str(), "wbx");
  if (!data_->stream) {
    const int error = errno;
    data_->temporary.clear();  // not ours to remove
    throw_errno(error, fmt::format("Creating TensorFlow checkpoint data shard {}",
                                   data_->final_path.string()));
  }
}

TfBundleWriter::~TfBundleWriter() = default;

void TfBundleWriter::add(const std::string& name, const ops::Tensor& value) {
  if (finished_ || !data_)
    throw FailedPreconditionError(fmt::format(
        "TensorFlow checkpoint {}: add(\"{}\") after finish(); make a new writer", prefix_, name));
  if (name.empty())
    throw InvalidArgumentError(fmt::format(
        "TensorFlow checkpoint {}: a tensor has an empty name, which is the header's key; name "
        "every tensor",
        prefix_));
  if (entries_.contains(name))
    throw InvalidArgumentError(
        fmt::format("TensorFlow checkpoint {}: tensor \"{}\" is added twice; names must be unique",
                    prefix_, name));
  if (!value.defined() || value.is_sparse())
    throw InvalidArgumentError(fmt::format(
        "TensorFlow checkpoint {}: tensor \"{}\" is {}; a checkpoint holds dense tensors, "
        "densify it first",
        prefix_, name, value.defined() ? "sparse" : "undefined"));
  const ops::Tensor host = value.to(ops::Device::cpu());
  tfproto::BundleEntryProto entry;
  entry.set_dtype(static_cast<tfproto::DataType>(tf_dtype_of(host.dtype())));
  auto* shape = entry.mutable_shape();
  for (int64_t dim : host.shape()) shape->add_dim()->set_size(dim);
  entry.set_shard_id(0);
  entry.set_offset(size_);
  uint32_t crc = 0;
  int64_t written = 0;
  if (ops::is_string(host.dtype())) {
    // WriteStringTensor: varint64 lengths, each checksummed as a uint32 (a uint64 above
    // 2^32-1), the masked checksum of the lengths, then the bytes; the CRC covers all three.
    const std::string* strings = host.data<std::string>();
    std::string lengths;
    for (int64_t i = 0; i < host.numel(); ++i) {
      const uint64_t length = strings[i].size();
      tf_table::put_varint64(lengths, length);
      if (length <= UINT32_MAX) {
        const auto narrow = static_cast<uint32_t>(length);
        crc = data::crc32c_extend(crc, &narrow, sizeof(narrow));
      } else {
        crc = data::crc32c_extend(crc, &length, sizeof(length));
      }
    }
    tf_table::put_fixed32(lengths, data::mask_crc(crc));
    crc = data::crc32c_extend(crc, lengths.data() + lengths.size() - 4, 4);
    data_->append(lengths.data(), lengths.size());
    written = static_cast<int64_t>(lengths.size());
    for (int64_t i = 0; i < host.numel(); ++i) {
      data_->append(strings[i].data(), strings[i].size());
      crc = data::crc32c_extend(crc, strings[i].data(), strings[i].size());
      written += static_cast<int64_t>(strings[i].size());
    }
  } else {
    crc = data::crc32c(host.numel() > 0 ? host.raw_data() : nullptr, host.nbytes());
    if (host.numel() > 0) data_->append(host.raw_data(), host.nbytes());
    written = static_cast<int64_t>(host.nbytes());
  }
  entry.set_size(written);
  entry.set_crc32c(data::mask_crc(crc));
  size_ += written;
  entries_.emplace(name, entry.SerializeAsString());
}

void TfBundleWriter::finish() {
  if (finished_) return;
  data_->close();
  fsync_file(data_->temporary);
  rename_durably(data_->temporary, data_->final_path);
  data_->temporary.clear();

  tfproto::BundleHeaderProto header;
  header.set_num_shards(1);
  header.set_endianness(tfproto::BundleHeaderProto::LITTLE);
  header.mutable_version()->set_producer(kBundleProducer);
  std::vector<tf_table::Entry> table;
  table.emplace_back(std::string(), header.SerializeAsString());
  for (auto& [name, entry] : entries_) table.emplace_back(name, std::move(entry));
  write_file_durably(prefix_ + ".index", tf_table::build_table(table, options_.index_block_size));
  finished_ = true;
}

size_t write_tf_checkpoint(const std::string& prefix, const TensorBundle& bundle,
                           const TfBundleWriterOptions& options) {
  TfBundleWriter writer(prefix, options);
  bool has_step = false;
  for (const TensorEntry& entry : bundle.tensors) {
    writer.add(entry.name, entry.value);
    has_step = has_step || entry.name == nn::kGlobalStepName;
  }
  // TensorFlow's global_step is an int64 scalar variable; a bundle made without one still
  // records its step.
  if (!has_step) {
    ops::Tensor step = ops::Tensor::empty({}, ops::DType::kI64);
    step.data<int64_t>()[0] = bundle.global_step;
    writer.add(std::string(nn::kGlobalStepName), step);
  }
  writer.finish();
  return bundle.tensors.size() + (has_step ? 0 : 1);
}

std::vector<std::string> tf_checkpoint_files(const std::string& prefix) {
  std::vector<std::string> files;
  const fs::path path(prefix);
  const fs::path directory = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const std::string index = path.filename().string() + ".index";
  const std::string data = path.filename().string() + ".data-";
  std::error_code error;
  for (const auto& file : fs::directory_iterator(directory, error)) {
    const std::string name = file.path().filename().string();
    if (name == index || (name.starts_with(data) && !is_temporary_name(name)))
      files.push_back(file.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace est::checkpoint
