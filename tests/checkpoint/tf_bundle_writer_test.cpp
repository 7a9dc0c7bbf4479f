// Writing TensorFlow V2 checkpoints (tf_bundle_writer.h): every dtype est has, scalars, empty
// tensors and strings read back by the bundle reader with the same bytes; many keys so that
// the index has several data blocks and restart points; the same bytes TensorFlow wrote for TF
// Serving's half_plus_three; the files placed atomically; bad input refused by name.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "checkpoint/bundle.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_bundle_writer.h"
#include "ops/error.h"
#include "tf_bundle_helpers.h"
#include "tf_tensor_bundle.pb.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;

namespace {

void check_same(const ops::Tensor& read, const ops::Tensor& written, const std::string& name) {
  INFO("tensor " << name);
  REQUIRE(read.dtype() == written.dtype());
  REQUIRE(read.shape() == written.shape());
  if (ops::is_string(written.dtype())) {
    for (int64_t i = 0; i < written.numel(); ++i)
      CHECK(read.data<std::string>()[i] == written.data<std::string>()[i]);
  } else if (written.numel() > 0) {
    CHECK(std::memcmp(read.raw_data(), written.raw_data(), written.nbytes()) == 0);
  }
}

}  // namespace

TEST_CASE("a TF bundle written by est reads back, every dtype, scalar, empty and string") {
  BundleDir dir;
  const auto tensors = every_dtype();
  {
    TfBundleWriter writer(dir.prefix());
    for (const auto& [name, value] : tensors) writer.add(name, value);
    writer.finish();
  }
  TfBundleReader reader(dir.prefix());
  CHECK(reader.num_shards() == 1);
  CHECK(reader.list_variables().size() == tensors.size());
  for (const auto& [name, value] : tensors) check_same(reader.load_variable(name), value, name);
  for (const TfTensorInfo& info : reader.list_variables())
    if (info.name == "bf16") CHECK(info.dtype_enum == "DT_BFLOAT16");

  // The header is TensorFlow's: one shard, little-endian, producer version 1.
  const auto table = tf_table::read_table_file(dir.prefix() + ".index");
  REQUIRE(table.front().first.empty());
  tfproto::BundleHeaderProto header;
  REQUIRE(header.ParseFromString(table.front().second));
  CHECK(header.num_shards() == 1);
  CHECK(header.endianness() == tfproto::BundleHeaderProto::LITTLE);
  CHECK(header.version().producer() == 1);
  CHECK(header.version().min_consumer() == 0);
  // Only the two final files are left: no temporary.
  std::vector<std::string> files;
  for (const auto& file : fs::directory_iterator(dir.path))
    files.push_back(file.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files ==
        std::vector<std::string>{"model.ckpt-7.data-00000-of-00001", "model.ckpt-7.index"});
  CHECK(tf_checkpoint_files(dir.prefix()).size() == 2);
}

TEST_CASE("many keys: several index data blocks, restart points every 16 keys, read back") {
  BundleDir dir;
  std::vector<std::pair<std::string, ops::Tensor>> tensors;
  for (int i = 0; i < 300; ++i)  // shared prefixes, as layer names have
    tensors.emplace_back(fmt::format("dnn/hiddenlayer_{}/kernel{}", i % 7, i),
                         ops::Tensor::from_vector<float>({static_cast<float>(i), 0.5f}, {2}));
  {
    TfBundleWriter writer(dir.prefix(), {.index_block_size = 1024});
    for (const auto& [name, value] : tensors) writer.add(name, value);
    writer.finish();
  }
  const std::string index = read_bytes(dir.prefix() + ".index");
  // The footer's index handle leads to one entry per data block.
  std::string_view handles(index.data() + index.size() - tf_table::kFooterSize, 40);
  tf_table::BlockHandle metaindex, index_handle;
  REQUIRE(tf_table::read_varint64(handles, &metaindex.offset));
  REQUIRE(tf_table::read_varint64(handles, &metaindex.size));
  REQUIRE(tf_table::read_varint64(handles, &index_handle.offset));
  REQUIRE(tf_table::read_varint64(handles, &index_handle.size));
  const auto blocks =
      tf_table::decode_block(tf_table::read_block(index, index_handle, "test", "index"), "test");
  CHECK(blocks.size() > 5);
  std::string_view first_handle = blocks.front().second;
  tf_table::BlockHandle first;
  REQUIRE(tf_table::read_varint64(first_handle, &first.offset));
  REQUIRE(tf_table::read_varint64(first_handle, &first.size));
  const std::string first_block = tf_table::read_block(index, first, "test", "data");
  const uint32_t restarts = tf_table::decode_fixed32(first_block.data() + first_block.size() - 4);
  const size_t entries_in_first = tf_table::decode_block(first_block, "test").size();
  CHECK(entries_in_first > 16);
  CHECK(restarts == (entries_in_first + 15) / 16);
  // Prefix compression: the block is smaller than its keys written out whole.
  size_t whole_keys = 0;
  for (const auto& [key, value] : tf_table::decode_block(first_block, "test"))
    whole_keys += key.size() + value.size();
  CHECK(first_block.size() < whole_keys);

  TfBundleReader reader(dir.prefix());
  CHECK(reader.list_variables().size() == tensors.size());
  for (const auto& [name, value] : tensors) check_same(reader.load_variable(name), value, name);
}

TEST_CASE("est's writer gives the bytes TensorFlow wrote for TF Serving's half_plus_three") {
  BundleDir dir;
  {
    TfBundleWriter writer(dir.prefix());
    writer.add("a", ops::Tensor::scalar(0.5));
    writer.add("b", ops::Tensor::scalar(3.0));
    writer.add("c", ops::Tensor::scalar(3.0));
    writer.finish();
  }
  const std::string theirs = fixture("half_plus_three") + "/variables/variables";
  CHECK(read_bytes(dir.prefix() + ".data-00000-of-00001") ==
        read_bytes(theirs + ".data-00000-of-00001"));
  CHECK(read_bytes(dir.prefix() + ".index") == read_bytes(theirs + ".index"));
}

TEST_CASE("write_tf_checkpoint: a bundle's tensors and its step as an int64 global_step") {
  BundleDir dir;
  TensorBundle bundle;
  bundle.global_step = 42;
  bundle.add_variable("linear/linear_model/age/weights", ops::Tensor::from_vector<float>({1, 2}));
  bundle.add_slot("linear/linear_model/age/weights/Ftrl", ops::Tensor::from_vector<float>({3, 4}));
  bundle.add_blob("iterator", "position");
  write_tf_checkpoint(dir.prefix(), bundle);
  TfBundleReader reader(dir.prefix());
  const ops::Tensor step = reader.load_variable("global_step");
  CHECK(step.dtype() == ops::DType::kI64);
  CHECK(step.data<int64_t>()[0] == 42);
  CHECK(reader.load_variable("linear/linear_model/age/weights/Ftrl").data<float>()[1] == 4.0f);
  CHECK(reader.list_variables().size() == 3);  // the blob is left out
}

TEST_CASE("the TF writer refuses bad input by name and leaves no files") {
  BundleDir dir;
  {
    TfBundleWriter writer(dir.prefix());
    writer.add("a", ops::Tensor::scalar(1.0));
    CHECK_THROWS_WITH_AS(writer.add("a", ops::Tensor::scalar(2.0)),
                         doctest::Contains("\"a\" is added twice"), InvalidArgumentError);
    CHECK_THROWS_WITH_AS(writer.add("", ops::Tensor::scalar(2.0)), doctest::Contains("empty name"),
                         InvalidArgumentError);
    CHECK_THROWS_WITH_AS(writer.add("undefined", ops::Tensor()),
                         doctest::Contains("\"undefined\" is undefined"), InvalidArgumentError);
  }  // never finished: nothing stays
  CHECK(fs::is_empty(dir.path));
  CHECK_THROWS_AS(tf_table::build_table({{"b", ""}, {"a", ""}}), InvalidArgumentError);
  CHECK_THROWS_WITH_AS(TfBundleWriter(dir.prefix("missing_parent_is_made/x/")),
                       doctest::Contains("names no file"), InvalidArgumentError);
}
