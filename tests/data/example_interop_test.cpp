// Example and SequenceExample TFRecord files written by an independent writer, Google's Python
// protobuf runtime (python3-protobuf) with classes that protoc generates from
// data/proto/example.proto at test time and TFRecord framing (masked CRC-32C) written in Python,
// parsed with every feature kind this framework supports (FixedLenFeature, VarLenFeature,
// SparseFeature and FixedLenSequenceFeature, each with the outputs tf.io.parse_example documents;
// context and sequence features as tf.io.parse_sequence_example documents). Skipped, with the
// reason, where /usr/bin/python3 lacks protobuf or protoc is missing.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include "data/example.h"
#include "data/sequence_example.h"
#include "data/tfrecord.h"
#include "ops/sparse.h"
#include "tests/data/test_util.h"
#include "tests/skip.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_dir;

namespace {

constexpr const char* kWriter = R"(
import atexit, os, shutil, struct, subprocess, sys, tempfile
proto_dir, out_path = sys.argv[1], sys.argv[2]
gen = tempfile.mkdtemp()
atexit.register(shutil.rmtree, gen, True)  # the generated module goes with the script
subprocess.check_call(['protoc', '--proto_path=' + proto_dir, '--python_out=' + gen,
                       os.path.join(proto_dir, 'example.proto')])
sys.path.insert(0, gen)
import example_pb2

def crc32c(data):
    crc = 0xffffffff
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff

def masked(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff

def example(i):
    ex = example_pb2.Example()
    f = ex.features.feature
    f['weight'].float_list.value.extend([0.5 * i, -1.25])
    f['id'].int64_list.value.append((1 << 62) + 3 - i)
    f['city'].bytes_list.value.append(('city%d' % i).encode())
    f['image'].bytes_list.value.append(bytes([i, 255, 0]))
    f['floats'].float_list.value.extend([float(j) for j in range(i)])
    f['ints'].int64_list.value.extend([-j for j in range(i)])
    f['words'].bytes_list.value.extend([b'w%d' % j for j in range(i)])
    # SparseFeature: values with their indices, out of order; FixedLenSequenceFeature of
    # shape [2]: i elements (none in example 0).
    f['sp_val'].float_list.value.extend([10.0 + i, 20.0 + i])
    f['sp_ix'].int64_list.value.extend([7 - i, i])
    f['pairs'].int64_list.value.extend([100 * i + j for j in range(2 * i)])
    if i == 1:
        f['note'].CopyFrom(example_pb2.Feature())  # present, no list set
    elif i == 2:
        f['note'].bytes_list.value.append(b'hello')
    return ex.SerializeToString()

def sequence_example(i):
    ex = example_pb2.SequenceExample()
    c = ex.context.feature
    c['user'].int64_list.value.append((1 << 60) + i)
    c['country'].bytes_list.value.append(b'c%d' % i)
    lists = ex.feature_lists.feature_list
    clicks = lists['clicks']
    for t in range(i + 1):
        step = clicks.feature.add()
        if i == 1 and t == 0:
            continue  # a step with no list set: no values
        step.int64_list.value.extend([10 * i + t] * (t + 1))
    if i != 2:  # sequence 2 has no 'dwell' list
        for t in range(i + 1):
            lists['dwell'].feature.add().float_list.value.extend([0.5 * t, float(i)])
    return ex.SerializeToString()

def write(path, records):
    with open(path, 'wb') as out:
        for data in records:
            length = struct.pack('<Q', len(data))
            out.write(length + struct.pack('<I', masked(length)) + data + struct.pack('<I', masked(data)))

write(out_path, [example(i) for i in range(3)])
write(sys.argv[3], [sequence_example(i) for i in range(3)])
print('wrote 3 examples and 3 sequence examples')
)";

struct Result {
  int status;
  std::string output;
};

Result run(const std::string& command) {
  Result result{-1, ""};
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[512];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  result.status = ::pclose(pipe);
  return result;
}

}  // namespace

namespace {

std::vector<std::string> read_records(const std::string& path) {
  std::vector<std::string> records;
  TFRecordReader reader(path);
  for (std::string record; reader.read(record);) records.push_back(record);
  return records;
}

// The SequenceExamples the writer made: sequence i has context user = 2^60 + i and country
// "c<i>", i + 1 steps of clicks (step t: t + 1 copies of 10 i + t; sequence 1's step 0 has no
// list set) and of dwell ([0.5 t, i] each; sequence 2 has no dwell list).
void check_sequence_examples(const std::vector<std::string>& records) {
  REQUIRE(records.size() == 3);
  const FeatureSpecs context{{"user", FixedLenFeature{{}, DType::kI64}},
                             {"country", FixedLenFeature{{}, DType::kString}}};
  const FeatureSpecs sequence{
      {"clicks", VarLenFeature{DType::kI64}},
      {"dwell",
       FixedLenSequenceFeature{.shape = {2}, .dtype = DType::kF32, .allow_missing = true}}};
  ParsedSequenceExample one = parse_single_sequence_example(records[1], context, sequence);
  CHECK(one.context.at("user").to_vector<int64_t>() ==
        std::vector<int64_t>{(int64_t{1} << 60) + 1});
  CHECK(one.sequence.at("clicks").shape() == Shape{2, 2});
  CHECK(one.sequence.at("clicks").indices().to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0, 1, 1});
  CHECK(one.sequence.at("clicks").values().to_vector<int64_t>() == std::vector<int64_t>{11, 11});
  CHECK(one.sequence.at("dwell").to_vector<float>() == std::vector<float>{0, 1, 0.5f, 1});

  ParsedSequenceExamples all = parse_sequence_example(records, context, sequence);
  CHECK(all.context.at("country").to_vector<std::string>() ==
        std::vector<std::string>{"c0", "c1", "c2"});
  CHECK(all.sequence.at("clicks").shape() == Shape{3, 3, 3});
  CHECK(all.sequence.at("clicks").values().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 11, 11, 20, 21, 21, 22, 22, 22});
  CHECK(all.sequence.at("dwell").shape() == Shape{3, 2, 2});
  CHECK(all.sequence.at("dwell").to_vector<float>() ==
        std::vector<float>{0, 0, 0, 0, 0, 1, 0.5f, 1, 0, 0, 0, 0});
  CHECK(all.lengths.at("dwell").to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
  // Without allow_missing, sequence 2's missing list is an error naming it.
  CHECK(contains(
      error_message<InvalidArgumentError>([&] {
        parse_sequence_example(records, {}, {{"dwell", FixedLenSequenceFeature{{2}, DType::kF32}}});
      }),
      "serialized sequence example 2: feature list 'dwell' is required"));
}

}  // namespace

TEST_CASE("Examples written by Python protobuf parse with every feature kind") {
  if (run("/usr/bin/python3 -c 'import google.protobuf'").status != 0)
    return est::testing::skip(
        "/usr/bin/python3 cannot import google.protobuf (Debian: "
        "python3-protobuf)");
  if (run("protoc --version").status != 0)
    return est::testing::skip("protoc is missing (Debian: protobuf-compiler)");
  const std::string script = (scratch_dir() / "write_examples.py").string();
  const std::string path = (scratch_dir() / "python.tfrecord").string();
  const std::string sequence_path = (scratch_dir() / "python_sequences.tfrecord").string();
  std::ofstream(script) << kWriter;
  Result written = run("/usr/bin/python3 " + script + " " EST_SOURCE_ROOT "/data/proto " + path +
                       " " + sequence_path);
  INFO(written.output);
  REQUIRE(written.status == 0);

  FeatureSpecs specs{{"weight", FixedLenFeature{{2}, DType::kF32}},
                     {"id", FixedLenFeature{{}, DType::kI64}},
                     {"city", FixedLenFeature{{}, DType::kString}},
                     {"image", FixedLenFeature{{}, DType::kU8}},
                     {"note", FixedLenFeature{.shape = {},
                                              .dtype = DType::kString,
                                              .default_strings = std::vector<std::string>{"none"}}},
                     {"floats", VarLenFeature{DType::kF32}},
                     {"ints", VarLenFeature{DType::kI64}},
                     {"words", VarLenFeature{DType::kString}},
                     {"ragged_ints", VarLenFeature{DType::kI64, VarLenMode::kRagged}}};
  auto batches = drain(example_dataset({path}, specs).batch(3));
  REQUIRE(batches.size() == 1);
  const Features& f = batches[0].features;
  CHECK(f.at("weight").to_vector<float>() ==
        std::vector<float>{0, -1.25f, 0.5f, -1.25f, 1, -1.25f});
  const int64_t big = (int64_t{1} << 62) + 3;
  CHECK(f.at("id").to_vector<int64_t>() == std::vector<int64_t>{big, big - 1, big - 2});
  CHECK(f.at("city").to_vector<std::string>() ==
        std::vector<std::string>{"city0", "city1", "city2"});
  CHECK(f.at("image").shape() == Shape{3, 3});
  CHECK(f.at("image").to_vector<int>() == std::vector<int>{0, 255, 0, 1, 255, 0, 2, 255, 0});
  CHECK(f.at("note").to_vector<std::string>() == std::vector<std::string>{"none", "none", "hello"});
  CHECK(f.at("floats").shape() == Shape{3, 2});
  CHECK(f.at("floats").indices().to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2, 0, 2, 1});
  CHECK(f.at("floats").values().to_vector<float>() == std::vector<float>{0, 0, 1});
  CHECK(sparse::to_dense(f.at("ints")).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, 0, 0, -1});
  CHECK(f.at("words").values().to_vector<std::string>() ==
        std::vector<std::string>{"w0", "w0", "w1"});
  CHECK(f.at("ragged_ints").shape() == Shape{3, 0});  // missing everywhere: empty rows

  // SparseFeature and FixedLenSequenceFeature through parse_example on the file's records.
  std::vector<std::string> records = read_records(path);
  REQUIRE(records.size() == 3);
  FeatureSpecs more{
      {"sp", SparseFeature{{"sp_ix"}, "sp_val", DType::kF32, {8}}},
      {"pairs",
       FixedLenSequenceFeature{
           .shape = {2}, .dtype = DType::kI64, .allow_missing = true, .default_int64 = -1}}};
  Features g = parse_example(records, more);
  CHECK(g.at("sp").shape() == Shape{3, 8});
  // Example i holds 10+i at index 7-i and 20+i at index i, sorted by index.
  CHECK(g.at("sp").indices().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, 7, 1, 1, 1, 6, 2, 2, 2, 5});
  CHECK(g.at("sp").values().to_vector<float>() == std::vector<float>{20, 10, 21, 11, 22, 12});
  CHECK(g.at("pairs").shape() == Shape{3, 2, 2});
  CHECK(g.at("pairs").to_vector<int64_t>() ==
        std::vector<int64_t>{-1, -1, -1, -1, 100, 101, -1, -1, 200, 201, 202, 203});

  check_sequence_examples(read_records(sequence_path));
}
