// Reading TensorFlow's own V2 checkpoints: SavedModel variables that TensorFlow wrote (TF
// Serving's test models, testdata/tf/README.md), with every value checked; the ways a
// checkpoint is named (prefix, .index, directory with a state file, SavedModel directory);
// string tensors; partitioned variables assembled from slices; OrderedCode slice keys.
#include <doctest/doctest.h>

#include <cstring>

#include "checkpoint/state_file.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_slice_key.h"
#include "ops/error.h"
#include "tf_bundle_helpers.h"
#include "tf_tensor_bundle.pb.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;

namespace {

std::vector<std::string> names_of(const std::vector<TfTensorInfo>& infos) {
  std::vector<std::string> names;
  for (const auto& info : infos) names.push_back(info.name);
  return names;
}

float scalar(const TfBundleReader& reader, std::string_view name) {
  ops::Tensor tensor = reader.load_variable(name);
  REQUIRE(tensor.dtype() == ops::DType::kF32);
  REQUIRE(tensor.shape() == ops::Shape{});
  return tensor.data<float>()[0];
}

}  // namespace

TEST_CASE("TF Serving's half_plus_three: a = 0.5, b = 3.0, c = 3.0, read as TF wrote them") {
  TfBundleReader reader(fixture("half_plus_three"));  // a SavedModel directory
  CHECK(reader.prefix() == fixture("half_plus_three") + "/variables/variables");
  CHECK(reader.num_shards() == 1);
  std::vector<TfTensorInfo> infos = reader.list_variables();
  CHECK(names_of(infos) == std::vector<std::string>{"a", "b", "c"});
  for (const auto& info : infos) {
    CHECK(info.dtype_name == "float32");
    CHECK(info.tf_dtype == 1);
    CHECK(info.shape.empty());
    CHECK_FALSE(info.partitioned);
  }
  CHECK(scalar(reader, "a") == 0.5f);
  CHECK(scalar(reader, "b") == 3.0f);
  CHECK(scalar(reader, "c") == 3.0f);
}

TEST_CASE("a TF checkpoint is named by its prefix, its .index, a state file or a SavedModel") {
  const std::string prefix = fixture("half_plus_three") + "/variables/variables";
  CHECK(resolve_tf_checkpoint_prefix(prefix) == prefix);
  CHECK(resolve_tf_checkpoint_prefix(prefix + ".index") == prefix);
  CHECK(tf_load_variable(prefix, "a").data<float>()[0] == 0.5f);
  CHECK(names_of(tf_list_variables(prefix + ".index")) == std::vector<std::string>{"a", "b", "c"});

  ScratchCopy copy("half_plus_three");
  CheckpointState state;
  state.model_checkpoint_path = "variables";  // relative to the directory, as TF stores it
  write_checkpoint_state((copy.dir / "variables").string(), state);
  CHECK(resolve_tf_checkpoint_prefix((copy.dir / "variables").string()) == copy.prefix());
  CHECK(TfBundleReader((copy.dir / "variables").string()).load_variable("b").data<float>()[0] ==
        3.0f);

  state.model_checkpoint_path = "model.ckpt-7";  // named but absent
  write_checkpoint_state((copy.dir / "variables").string(), state);
  CHECK_THROWS_AS(resolve_tf_checkpoint_prefix((copy.dir / "variables").string()), NotFoundError);
  CHECK_THROWS_AS(resolve_tf_checkpoint_prefix((copy.dir / "nothing").string()), NotFoundError);
  CHECK_FALSE(is_tf_checkpoint((copy.dir / "nothing").string()));
  CHECK(is_tf_checkpoint(copy.dir.string()));
  CHECK(tf_data_shard_path("/m/model.ckpt-5", 1, 12) == "/m/model.ckpt-5.data-00001-of-00012");
}

TEST_CASE("TF Serving's half_plus_two_cpu: snappy-compressed index block, every value") {
  // The index as TensorFlow wrote it has its data block compressed: type byte 1 in its trailer.
  const std::string index = read_bytes(fixture("half_plus_two_cpu") + "/variables/variables.index");
  std::string_view handles(index.data() + index.size() - tf_table::kFooterSize, 40);
  uint64_t offset = 0, size = 0;
  REQUIRE((tf_table::read_varint64(handles, &offset) && tf_table::read_varint64(handles, &size)));
  REQUIRE((tf_table::read_varint64(handles, &offset) && tf_table::read_varint64(handles, &size)));
  std::vector<tf_table::Entry> index_block = tf_table::decode_block(
      tf_table::read_block(index, {offset, size}, "index", "index"), "index");
  REQUIRE(index_block.size() == 1);
  std::string_view data_handle = index_block[0].second;
  REQUIRE((tf_table::read_varint64(data_handle, &offset) &&
           tf_table::read_varint64(data_handle, &size)));
  CHECK(index[offset + size] == tf_table::kSnappyBlock);

  TfBundleReader reader(fixture("half_plus_two_cpu"));
  CHECK(names_of(reader.list_variables()) == std::vector<std::string>{"a", "a2", "b", "c", "c2"});
  CHECK(scalar(reader, "a") == 0.5f);
  CHECK(scalar(reader, "a2") == 0.5f);
  CHECK(scalar(reader, "b") == 2.0f);
  CHECK(scalar(reader, "c") == 3.0f);
  CHECK(scalar(reader, "c2") == 3.0f);
}

TEST_CASE("TF Serving's half_plus_two_tf2_cpu: object-based keys and the object graph string") {
  TfBundleReader reader(fixture("half_plus_two_tf2_cpu"));
  std::vector<TfTensorInfo> infos = reader.list_variables();
  // Sorted bytewise, as Python's sorted() lists them: '_' (0x5f) before 'a'.
  CHECK(names_of(infos) ==
        std::vector<std::string>{"_CHECKPOINTABLE_OBJECT_GRAPH", "a/.ATTRIBUTES/VARIABLE_VALUE",
                                 "b/.ATTRIBUTES/VARIABLE_VALUE", "c/.ATTRIBUTES/VARIABLE_VALUE"});
  CHECK(infos[0].dtype_name == "string");
  CHECK(scalar(reader, "a/.ATTRIBUTES/VARIABLE_VALUE") == 0.5f);
  CHECK(scalar(reader, "b/.ATTRIBUTES/VARIABLE_VALUE") == 2.0f);
  CHECK(scalar(reader, "c/.ATTRIBUTES/VARIABLE_VALUE") == 3.0f);
  // The serialized TrackableObjectGraph: one string, its lengths' and bytes' CRCs checked; it
  // names each variable's checkpoint key.
  ops::Tensor graph = reader.load_variable("_CHECKPOINTABLE_OBJECT_GRAPH");
  REQUIRE(graph.dtype() == ops::DType::kString);
  REQUIRE(graph.shape() == ops::Shape{});
  const std::string& bytes = graph.data<std::string>()[0];
  CHECK(bytes.size() == 613);
  for (const char* key : {"a/.ATTRIBUTES/VARIABLE_VALUE", "b/.ATTRIBUTES/VARIABLE_VALUE",
                          "c/.ATTRIBUTES/VARIABLE_VALUE"})
    CHECK(bytes.find(key) != std::string::npos);
}

TEST_CASE("OrderedCode numbers match the examples in TensorFlow's ordered_code.cc") {
  std::string out;
  tf_table::append_ordered_signed_number(out, 0x424242);
  CHECK(out == std::string("\xf0\x42\x42\x42", 4));
  out.clear();
  tf_table::append_ordered_signed_number(out, -0x800);
  CHECK(out == std::string("\x38\x00", 2));
  out.clear();
  tf_table::append_ordered_signed_number(out, -1);  // a whole dimension's length
  tf_table::append_ordered_signed_number(out, 0);
  tf_table::append_ordered_signed_number(out, 63);
  tf_table::append_ordered_signed_number(out, 64);
  CHECK(out == std::string("\x7f\x80\xbf\xc0\x40", 5));
  out.clear();
  tf_table::append_ordered_signed_number(out, INT64_MAX);  // ten bytes: header ff c0
  CHECK(out == std::string("\xff\xc0\x7f\xff\xff\xff\xff\xff\xff\xff", 10));
  out.clear();
  tf_table::append_ordered_number(out, 0);
  tf_table::append_ordered_number(out, 0x1234);
  CHECK(out == std::string("\x00\x02\x12\x34", 4));
  out.clear();
  tf_table::append_ordered_string(out, std::string("a\0b\xff", 4));
  CHECK(out == std::string("a\x00\xff"
                           "b\xff\x00\x00\x01",
                           8));
  CHECK(tf_table::encode_tensor_name_slice("w", {{2, 2}, {0, -1}}) ==
        std::string("\x00w\x00\x01\x01\x02\x82\x82\x80\x7f", 10));
}

TEST_CASE("string tensors: varint lengths, their masked CRC, then the bytes (tensor_bundle.cc)") {
  ScratchCopy copy("half_plus_three");
  BundleBuilder bundle;
  const std::vector<std::string> words = {"", "ab", std::string(300, 'x'),
                                          std::string("\0\xff", 2)};
  bundle.add_strings("words", {2, 2}, words);
  bundle.add_strings("empty", {0}, {});
  bundle.write(copy.prefix());
  TfBundleReader reader(copy.prefix());
  ops::Tensor tensor = reader.load_variable("words");
  CHECK(tensor.dtype() == ops::DType::kString);
  CHECK(tensor.shape() == ops::Shape{2, 2});
  CHECK(tensor.to_vector<std::string>() == words);
  CHECK(reader.load_variable("empty").numel() == 0);
}

TEST_CASE("a partitioned variable is read back whole from its slices") {
  ScratchCopy copy("half_plus_three");
  BundleBuilder bundle;
  // [4, 3] saved in row slices [0:1), [1:4) and another [3, 4] in column slices [0:1), [1:4).
  std::vector<float> rows(12), columns(12);
  for (int i = 0; i < 12; ++i) rows[i] = static_cast<float>(i) + 0.25f;
  for (int i = 0; i < 12; ++i) columns[i] = 100.0f + static_cast<float>(i);
  bundle.add_partitioned_f32("dnn/kernel", {4, 3}, rows, {{{0, 1}, {0, -1}}, {{1, 3}, {0, -1}}});
  bundle.add_partitioned_f32("embedding", {3, 4}, columns, {{{0, -1}, {1, 3}}, {{0, -1}, {0, 1}}});
  bundle.write(copy.prefix());

  TfBundleReader reader(copy.prefix());
  std::vector<TfTensorInfo> infos = reader.list_variables();  // the slices' keys are hidden
  REQUIRE(names_of(infos) == std::vector<std::string>{"dnn/kernel", "embedding"});
  CHECK(infos[0].partitioned);
  CHECK(infos[0].shape == ops::Shape{4, 3});
  CHECK(infos[1].shape == ops::Shape{3, 4});
  CHECK(reader.load_variable("dnn/kernel").to_vector<float>() == rows);
  CHECK(reader.load_variable("embedding").to_vector<float>() == columns);
}

TEST_CASE(
    "a real index recompressed with snappy reads the same; shards are named as TF names them") {
  ScratchCopy copy("half_plus_three");
  const std::vector<tf_table::Entry> entries = tf_table::read_table_file(copy.index());
  write_bytes(copy.index(), build_table(entries, /*snappy=*/true));
  TfBundleReader reader(copy.prefix());
  CHECK(scalar(reader, "a") == 0.5f);
  CHECK(scalar(reader, "c") == 3.0f);

  // A tensor in shard 1 of 2 lives in <prefix>.data-00001-of-00002.
  BundleBuilder bundle;
  bundle.header.set_num_shards(2);
  bundle.add_f32("x", {3}, {1.5f, -2.0f, 7.0f});
  tfproto::BundleEntryProto entry;
  REQUIRE(entry.ParseFromString(bundle.entries[0].second));
  entry.set_shard_id(1);
  bundle.entries[0].second = entry.SerializeAsString();
  bundle.write(copy.prefix());
  std::filesystem::rename(copy.shard(), copy.prefix() + ".data-00001-of-00002");
  CHECK(TfBundleReader(copy.prefix()).load_variable("x").to_vector<float>() ==
        std::vector<float>{1.5f, -2.0f, 7.0f});
}
