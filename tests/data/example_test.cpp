// tf.train.Example: wire compatibility against hand-encoded protobuf bytes, feature specs,
// defaults, batched parsing (ragged and padded), malformed input, and the dataset forms.
#include <doctest/doctest.h>

#include "data/example.h"
#include "data/tfrecord.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// Example{features{feature{"a": int64_list{value: [1]}}}}, encoded by hand:
//   Int64List  = 0a 01 01                    (field 1, packed, one varint)
//   Feature    = 1a 03 <Int64List>           (field 3: int64_list)
//   map entry  = 0a 01 'a' 12 05 <Feature>   (key = 1, value = 2)
//   Features   = 0a 0a <entry>;  Example = 0a 0c <Features>
const std::string kInt64Example =
    bytes({0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'a', 0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x01});
// "f": float_list [1.5, -2.0] packed fixed32 little-endian (3fc00000, c0000000).
const std::string kFloatExample =
    bytes({0x0a, 0x13, 0x0a, 0x11, 0x0a, 0x01, 'f',  0x12, 0x0c, 0x12, 0x0a,
           0x0a, 0x08, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0});
// "b": int64_list [5, 7] in the unpacked encoding (08 05 08 07), which parsers must accept.
const std::string kUnpackedExample = bytes(
    {0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'b', 0x12, 0x06, 0x1a, 0x04, 0x08, 0x05, 0x08, 0x07});
// "s": bytes_list ["hi"].
const std::string kBytesExample =
    bytes({0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 's', 0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 'h', 'i'});

}  // namespace

TEST_CASE("Examples parse from hand-encoded TensorFlow wire bytes, and serialise to them") {
  auto a = parse_single_example(kInt64Example, {{"a", FixedLenFeature{{}, DType::kI64}}});
  CHECK(a.at("a").dtype() == DType::kI64);
  CHECK(a.at("a").shape() == Shape{});
  CHECK(a.at("a").item() == 1);
  int64_t one = 1;
  CHECK(ExampleBuilder().add_int64s("a", std::span(&one, 1)).serialize() == kInt64Example);

  auto f = parse_single_example(kFloatExample, {{"f", FixedLenFeature{{2}, DType::kF32}}});
  CHECK(f.at("f").to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  std::vector<float> floats{1.5f, -2.0f};
  CHECK(ExampleBuilder().add_floats("f", floats).serialize() == kFloatExample);

  auto b = parse_single_example(kUnpackedExample,
                                {{"b", VarLenFeature{DType::kI64, VarLenMode::kRagged}}});
  CHECK(b.at("b").to_vector<int64_t>() == std::vector<int64_t>{5, 7});

  auto s = parse_single_example(kBytesExample, {{"s", FixedLenFeature{{}, DType::kU8}}});
  CHECK(tensor_bytes(s.at("s")) == "hi");
  CHECK(ExampleBuilder().add_bytes("s", {"hi"}).serialize() == kBytesExample);
}

TEST_CASE("feature specs: shapes, defaults, missing features, type and count errors") {
  std::vector<float> pixels{0, 1, 2, 3, 4, 5};
  std::vector<int64_t> label{3};
  std::string record = ExampleBuilder()
                           .add_floats("image", pixels)
                           .add_int64s("label", label)
                           .add_bytes("pair", {"ab", "cd"})
                           .serialize();
  FeatureSpecs specs{{"image", FixedLenFeature{{2, 3, 1}, DType::kF32}},
                     {"label", FixedLenFeature{{}, DType::kI64}},
                     {"pair", FixedLenFeature{{2}, DType::kU8}},
                     {"weight", FixedLenFeature{{}, DType::kF32, std::vector<double>{0.5}}},
                     {"box", FixedLenFeature{{2}, DType::kI64, std::vector<double>{1, 2}}},
                     {"name", FixedLenFeature{{}, DType::kU8, std::nullopt, "none"}},
                     {"tokens", VarLenFeature{DType::kI64, VarLenMode::kRagged}}};
  auto parsed = parse_single_example(record, specs);
  CHECK(parsed.at("image").shape() == Shape{2, 3, 1});
  CHECK(parsed.at("image").to_vector<float>() == pixels);
  CHECK(parsed.at("label").item() == 3);
  CHECK(parsed.at("pair").shape() == Shape{2, 2});
  CHECK(tensor_bytes(parsed.at("pair")) == "abcd");
  CHECK(parsed.at("weight").item() == 0.5);
  CHECK(parsed.at("box").to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(tensor_bytes(parsed.at("name")) == "none");
  CHECK(parsed.at("tokens").shape() == Shape{0});

  std::string where = "'f.tfrecord' record 4";
  std::string message = error_message<InvalidArgumentError>([&] {
    parse_single_example(record, {{"score", FixedLenFeature{{}, DType::kF32}}}, where);
  });
  CHECK(contains(message, where));
  CHECK(contains(message, "'score' is missing"));
  message = error_message<InvalidArgumentError>([&] {
    parse_single_example(record, {{"label", FixedLenFeature{{}, DType::kF32}}}, where);
  });
  CHECK(contains(message, "'label' is a int64_list but the spec asks for float32"));
  message = error_message<InvalidArgumentError>([&] {
    parse_single_example(record, {{"image", FixedLenFeature{{7}, DType::kF32}}}, where);
  });
  CHECK(contains(message, "'image' has 6 values; the spec's shape [7] needs 7"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(
                       record,
                       {{"x", FixedLenFeature{{3}, DType::kF32, std::vector<double>{1, 2}}}});
                 }),
                 "default_value has 2 values"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(record, {{"x", FixedLenFeature{{}, DType::kF64}}});
                 }),
                 "float64 is not supported"));
}

TEST_CASE("malformed protobuf is a DataLossError") {
  std::string truncated = kFloatExample.substr(0, kFloatExample.size() - 3);
  std::string message = error_message<DataLossError>([&] {
    parse_single_example(truncated, {{"f", VarLenFeature{}}}, "'x.tfrecord' record 9");
  });
  CHECK(contains(message, "'x.tfrecord' record 9"));
  CHECK(contains(message, "malformed protobuf"));
  CHECK(error_message<DataLossError>([&] { parse_single_example("\xff\xff\xff", {}); }) !=
        "<no error>");
}

TEST_CASE("parse_example batches fixed features and makes variable ones ragged or padded") {
  std::vector<std::string> records;
  for (int64_t n = 0; n < 3; ++n) {
    std::vector<int64_t> tokens(static_cast<size_t>(n), n);
    std::vector<float> x{static_cast<float>(n), static_cast<float>(-n)};
    records.push_back(ExampleBuilder().add_int64s("tokens", tokens).add_floats("x", x).serialize());
  }
  auto ragged = parse_example(records, {{"tokens", VarLenFeature{DType::kI64, VarLenMode::kRagged}},
                                        {"x", FixedLenFeature{{2}, DType::kF32}}});
  CHECK(ragged.at("x").shape() == Shape{3, 2});
  CHECK(ragged.at("x").to_vector<float>() == std::vector<float>{0, 0, 1, -1, 2, -2});
  CHECK(ragged.at("tokens").to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
  CHECK(ragged.at("tokens/row_splits").to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 3});
  auto padded =
      parse_example(records, {{"tokens", VarLenFeature{DType::kI64, VarLenMode::kPadded, -1}}});
  CHECK(padded.at("tokens").shape() == Shape{3, 2});
  CHECK(padded.at("tokens").to_vector<int64_t>() == std::vector<int64_t>{-1, -1, 1, -1, 2, 2});
  CHECK_FALSE(padded.count("tokens/row_splits"));
}

TEST_CASE("example_parser and example_dataset read Examples from TFRecord files") {
  std::string path = scratch_file("examples.tfrecord");
  {
    TFRecordWriter writer(path);
    for (int64_t i = 0; i < 10; ++i) {
      Features features{{"x", Tensor::full({2, 2}, static_cast<double>(i))},
                        {"label", Tensor::scalar(static_cast<double>(i % 3), DType::kI64)}};
      writer.write(serialize_example(features));
    }
  }
  FeatureSpecs specs{{"x", FixedLenFeature{{2, 2}, DType::kF32}},
                     {"label", FixedLenFeature{{}, DType::kI64}}};
  auto via_map = est::testing::drain(tfrecord_dataset({path}).map(example_parser(specs, "label")));
  auto fused = est::testing::drain(example_dataset({path}, specs, {.label_key = "label"}));
  REQUIRE(via_map.size() == 10);
  CHECK(est::testing::serialized(via_map) == est::testing::serialized(fused));
  CHECK(fused[7].features.at("x").to_vector<float>() == std::vector<float>{7, 7, 7, 7});
  CHECK(fused[7].labels.item() == 1);
  CHECK_FALSE(fused[7].features.count("label"));
  est::testing::check_resume(example_dataset({path}, specs, {.label_key = "label"}).batch(3),
                             {0, 2});

  // A record that is not an Example: the fused reader names the file and the record.
  std::string bad = scratch_file("bad_examples.tfrecord");
  {
    TFRecordWriter writer(bad);
    writer.write(serialize_example(
        {{"x", Tensor::zeros({2, 2})}, {"label", Tensor::scalar(0, DType::kI64)}}));
    writer.write("\x0a\x05garbage");
  }
  std::string message = error_message<DataLossError>(
      [&] { est::testing::drain(example_dataset({bad}, specs, {.label_key = "label"})); });
  CHECK(contains(message, bad));
  CHECK(contains(message, "record 1"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { example_parser(specs, "nope"); }),
                 "'nope'"));
}
