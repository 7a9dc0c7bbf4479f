// Damaged and unusual TensorFlow checkpoints, each a clear error naming the file (and the
// tensor) and never a crash: copies of TF-written fixtures truncated, with a byte flipped, a
// bad magic number, a shard removed; and re-encoded indexes with an edited header or entry (a
// dtype est lacks, a 1 TB size, a block handle out of range, big-endian, a newer version).
#include <doctest/doctest.h>

#include "checkpoint/tf_bundle_reader.h"
#include "ops/error.h"
#include "tests/ops/expect_error.h"
#include "tf_bundle_helpers.h"
#include "tf_tensor_bundle.pb.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;
using est::testing::error_message;

namespace {

bool has(const std::string& message, const std::string& part) {
  return est::testing::contains(message, part);
}

// The fixture's index with entry `key` edited by `edit`, written back in place.
template <class Edit>
void edit_entry(const ScratchCopy& copy, const std::string& key, Edit&& edit) {
  std::vector<tf_table::Entry> entries = tf_table::read_table_file(copy.index());
  for (auto& [name, value] : entries)
    if (name == key) {
      tfproto::BundleEntryProto entry;
      REQUIRE(entry.ParseFromString(value));
      edit(entry);
      value = entry.SerializeAsString();
    }
  write_bytes(copy.index(), build_table(entries));
}

template <class Edit>
void edit_header(const ScratchCopy& copy, Edit&& edit) {
  std::vector<tf_table::Entry> entries = tf_table::read_table_file(copy.index());
  tfproto::BundleHeaderProto header;
  REQUIRE(header.ParseFromString(entries.front().second));
  edit(header);
  entries.front().second = header.SerializeAsString();
  write_bytes(copy.index(), build_table(entries));
}

}  // namespace

TEST_CASE("the re-encoding helper alone changes nothing a reader sees") {
  ScratchCopy copy("half_plus_two_cpu");
  edit_entry(copy, "b", [](tfproto::BundleEntryProto&) {});
  TfBundleReader reader(copy.prefix());
  CHECK(reader.list_variables().size() == 5);
  CHECK(reader.load_variable("b").data<float>()[0] == 2.0f);
}

TEST_CASE("a truncated index, a bad magic number, a flipped index byte: DataLossError") {
  for (const char* name : {"half_plus_three", "half_plus_two_cpu"}) {
    CAPTURE(name);
    ScratchCopy copy(name);
    const std::string index = read_bytes(copy.index());

    write_bytes(copy.index(), index.substr(0, index.size() - 10));
    std::string error = error_message<DataLossError>([&] { TfBundleReader reader(copy.prefix()); });
    CHECK(has(error, copy.index()));
    CHECK(has(error, "magic number"));

    write_bytes(copy.index(), index.substr(0, 20));
    error = error_message<DataLossError>([&] { TfBundleReader reader(copy.prefix()); });
    CHECK(has(error, "fewer than the 48-byte table footer"));

    std::string bad_magic = index;
    bad_magic[bad_magic.size() - 1] ^= 0x01;
    write_bytes(copy.index(), bad_magic);
    CHECK(has(error_message<DataLossError>([&] { TfBundleReader reader(copy.prefix()); }),
              "not the table magic number 0xdb4775248b80fb57"));

    // Every byte of the first data block (raw in one, snappy in the other) is under its CRC.
    for (size_t at = 0; at < 16; ++at) {
      std::string flipped = index;
      flipped[at] ^= 0x20;
      write_bytes(copy.index(), flipped);
      error = error_message<DataLossError>([&] { TfBundleReader reader(copy.prefix()); });
      CHECK(has(error, "fails its CRC32C check"));
      CHECK(has(error, copy.index()));
    }
  }
}

TEST_CASE("a missing index or data shard is NotFoundError naming the file") {
  ScratchCopy copy("half_plus_three");
  std::filesystem::remove(copy.shard());
  TfBundleReader reader(copy.prefix());  // the index alone is read when opening
  CHECK(reader.list_variables().size() == 3);
  std::string error = error_message<NotFoundError>([&] { (void)reader.load_variable("a"); });
  CHECK(has(error, copy.shard()));
  CHECK(has(error, "\"a\""));
  std::filesystem::remove(copy.index());
  CHECK(has(error_message<NotFoundError>([&] { TfBundleReader again(copy.prefix()); }),
            copy.prefix()));
  CHECK(has(error_message<NotFoundError>([&] { (void)reader.load_variable("nope"); }), "\"nope\""));
}

TEST_CASE("a flipped data byte or a truncated shard is DataLossError naming the tensor") {
  ScratchCopy copy("half_plus_two_tf2_cpu");
  const std::string shard = read_bytes(copy.shard());
  std::string flipped = shard;
  flipped[100] ^= 0x01;  // inside the object graph string
  write_bytes(copy.shard(), flipped);
  TfBundleReader reader(copy.prefix());
  std::string error = error_message<DataLossError>(
      [&] { (void)reader.load_variable("_CHECKPOINTABLE_OBJECT_GRAPH"); });
  CHECK(has(error, "CRC32C check fails"));
  CHECK(has(error, "_CHECKPOINTABLE_OBJECT_GRAPH"));
  flipped = shard;
  flipped[12] ^= 0x01;  // the string's length (the tensor starts at offset 12)
  write_bytes(copy.shard(), flipped);
  CHECK(has(error_message<DataLossError>(
                [&] { (void)reader.load_variable("_CHECKPOINTABLE_OBJECT_GRAPH"); }),
            "_CHECKPOINTABLE_OBJECT_GRAPH"));

  ScratchCopy floats("half_plus_three");
  std::string data = read_bytes(floats.shard());
  data[5] ^= 0x40;  // inside b
  write_bytes(floats.shard(), data);
  TfBundleReader three(floats.prefix());
  CHECK(three.load_variable("a").data<float>()[0] == 0.5f);
  CHECK(has(error_message<DataLossError>([&] { (void)three.load_variable("b"); }), "\"b\""));
  write_bytes(floats.shard(), data.substr(0, 6));
  error = error_message<DataLossError>([&] { (void)three.load_variable("c"); });
  CHECK(has(error, "the shard has 6 bytes"));
  CHECK(has(error, floats.shard()));
}

TEST_CASE("a dtype est lacks is named; a 1 TB entry is refused before allocating") {
  ScratchCopy copy("half_plus_three");
  edit_entry(copy, "a", [](tfproto::BundleEntryProto& entry) {
    entry.set_dtype(tfproto::DT_INT8);
    entry.mutable_shape()->add_dim()->set_size(4);
  });
  edit_entry(copy, "b", [](tfproto::BundleEntryProto& entry) {
    entry.set_dtype(tfproto::DT_HALF);
    entry.mutable_shape()->add_dim()->set_size(2);
  });
  edit_entry(copy, "c", [](tfproto::BundleEntryProto& entry) {
    entry.mutable_shape()->add_dim()->set_size(int64_t{1} << 38);  // 2^38 floats: 1 TiB
    entry.set_size(int64_t{1} << 40);
  });
  TfBundleReader reader(copy.prefix());
  std::vector<TfTensorInfo> infos = reader.list_variables();  // listing still works
  CHECK(infos[0].dtype_name == "int8");
  CHECK(infos[1].dtype_name == "float16");
  std::string error = error_message<UnimplementedError>([&] { (void)reader.load_variable("a"); });
  CHECK(has(error, "int8 (DT_INT8)"));
  CHECK(has(error, "\"a\""));
  CHECK(has(error_message<UnimplementedError>([&] { (void)reader.load_variable("b"); }),
            "float16 (DT_HALF)"));
  error = error_message<DataLossError>([&] { (void)reader.load_variable("c"); });
  CHECK(has(error, "1099511627776"));
  CHECK(has(error, "the shard has 12 bytes"));

  edit_entry(copy, "c", [](tfproto::BundleEntryProto& entry) { entry.set_size(5); });
  edit_entry(copy, "a", [](tfproto::BundleEntryProto& entry) {
    entry.set_dtype(tfproto::DT_FLOAT);
    entry.mutable_shape()->mutable_dim(0)->set_size(-3);
  });
  TfBundleReader again(copy.prefix());
  CHECK(has(error_message<DataLossError>([&] { (void)again.load_variable("a"); }),
            "invalid stored dimension -3"));
  CHECK(has(error_message<DataLossError>([&] { (void)again.load_variable("c"); }), "needs"));
}

TEST_CASE("a block handle out of range is DataLossError") {
  ScratchCopy copy("half_plus_three");
  std::vector<tf_table::Entry> entries = tf_table::read_table_file(copy.index());
  std::string file;
  (void)append_block(file, block_of(entries), false);
  const std::string metaindex = append_block(file, block_of({}), false);
  std::string far_handle;
  put_varint64(far_handle, 1'000'000);
  put_varint64(far_handle, 100);
  const std::string index = append_block(file, block_of({{"c", far_handle}}), false);
  std::string footer = metaindex + index;
  footer.resize(tf_table::kFooterSize - 8, '\0');
  put_fixed32(footer, static_cast<uint32_t>(tf_table::kTableMagicNumber & 0xffffffffu));
  put_fixed32(footer, static_cast<uint32_t>(tf_table::kTableMagicNumber >> 32));
  write_bytes(copy.index(), file + footer);
  const std::string error =
      error_message<DataLossError>([&] { TfBundleReader reader(copy.prefix()); });
  CHECK(has(error, "offset 1000000"));
  CHECK(has(error, "points past the end"));
}

TEST_CASE("big-endian bundles and unsupported versions are refused, saying why") {
  ScratchCopy copy("half_plus_three");
  edit_header(copy, [](tfproto::BundleHeaderProto& header) {
    header.set_endianness(tfproto::BundleHeaderProto::BIG);
  });
  CHECK(has(error_message<UnimplementedError>([&] { TfBundleReader reader(copy.prefix()); }),
            "big-endian"));
  edit_header(copy, [](tfproto::BundleHeaderProto& header) {
    header.set_endianness(tfproto::BundleHeaderProto::LITTLE);
    header.mutable_version()->set_min_consumer(2);
  });
  CHECK(has(error_message<InvalidArgumentError>([&] { TfBundleReader reader(copy.prefix()); }),
            "version 2 or newer"));
  edit_header(copy, [](tfproto::BundleHeaderProto& header) {
    header.mutable_version()->set_min_consumer(0);
    header.mutable_version()->add_bad_consumers(1);
  });
  CHECK(has(error_message<InvalidArgumentError>([&] { TfBundleReader reader(copy.prefix()); }),
            "disallows reader version 1"));
  edit_header(copy, [](tfproto::BundleHeaderProto& header) {
    header.mutable_version()->clear_bad_consumers();
  });
  CHECK(TfBundleReader(copy.prefix()).load_variable("a").data<float>()[0] == 0.5f);
}

TEST_CASE("a partitioned variable with a missing or overlapping slice is DataLossError") {
  ScratchCopy copy("half_plus_three");
  std::vector<float> values(12, 1.0f);
  {
    BundleBuilder bundle;
    bundle.add_partitioned_f32("w", {4, 3}, values, {{{0, 2}, {0, -1}}, {{1, 3}, {0, -1}}});
    bundle.write(copy.prefix());
    CHECK(has(error_message<DataLossError>(
                  [&] { (void)TfBundleReader(copy.prefix()).load_variable("w"); }),
              "two slices overlap"));
  }
  {
    BundleBuilder bundle;
    bundle.add_partitioned_f32("w", {4, 3}, values, {{{0, 2}, {0, -1}}});
    bundle.write(copy.prefix());
    CHECK(has(error_message<DataLossError>(
                  [&] { (void)TfBundleReader(copy.prefix()).load_variable("w"); }),
              "cover 6 of its 12 elements"));
  }
  {
    BundleBuilder bundle;
    bundle.add_partitioned_f32("w", {4, 3}, values, {{{0, 2}, {0, -1}}, {{2, 2}, {0, -1}}});
    const std::string second = tf_table::encode_tensor_name_slice("w", {{2, 2}, {0, -1}});
    REQUIRE(std::erase_if(bundle.entries,
                          [&](const auto& entry) { return entry.first == second; }) == 1);
    bundle.write(copy.prefix());
    CHECK(has(error_message<DataLossError>(
                  [&] { (void)TfBundleReader(copy.prefix()).load_variable("w"); }),
              "is missing from the index"));
  }
}
