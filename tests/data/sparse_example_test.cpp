// VarLenFeature as tf.io.parse_example parses it (SparseTensor values), sparse components
// through batch, shuffle, caches and saved positions, and the parsing details TF has: a feature
// present with no list set is missing (its default applies), int64 values and defaults exact.
// Expected outputs follow the docstring of tf.io.parse_example
// (tensorflow/python/ops/parsing_ops.py) and example_proto_fast_parsing.cc.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "data/example.h"
#include "data/tfrecord.h"
#include "ops/sparse.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::check_resume;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

// The three Examples of parse_example's docstring: ft = [1, 2], (no features), [3].
std::vector<std::string> docstring_records() {
  std::vector<float> first{1.0f, 2.0f}, third{3.0f};
  return {ExampleBuilder().add_floats("ft", first).serialize(), ExampleBuilder().serialize(),
          ExampleBuilder().add_floats("ft", third).serialize()};
}

void check_docstring_output(const Tensor& ft) {
  REQUIRE(ft.is_sparse());
  CHECK(ft.shape() == Shape{3, 2});
  CHECK(ft.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 2, 0});
  CHECK(ft.values().to_vector<float>() == std::vector<float>{1, 2, 3});
}

}  // namespace

TEST_CASE("VarLenFeature parses to a SparseTensor as tf.io.parse_example's docstring shows") {
  auto records = docstring_records();
  FeatureSpecs specs{{"ft", VarLenFeature{DType::kF32}}};
  check_docstring_output(parse_example(records, specs).at("ft"));

  auto single = parse_single_example(records[0], specs).at("ft");
  REQUIRE(single.is_sparse());
  CHECK(single.shape() == Shape{2});
  CHECK(single.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  auto empty = parse_single_example(records[1], specs).at("ft");
  CHECK(empty.shape() == Shape{0});
  CHECK(empty.indices().shape() == Shape{0, 1});

  // Parsing records one by one and batching gives the same SparseTensor.
  std::string path = scratch_file("docstring.tfrecord");
  {
    TFRecordWriter writer(path);
    for (const auto& r : records) writer.write(r);
  }
  auto batches = drain(example_dataset({path}, specs).batch(3));
  REQUIRE(batches.size() == 1);
  check_docstring_output(batches[0].features.at("ft"));
  CHECK(sparse::to_dense(batches[0].features.at("ft")).to_vector<float>() ==
        std::vector<float>{1, 2, 0, 0, 3, 0});
}

TEST_CASE("string and int64 VarLenFeatures, batched with fixed features") {
  std::vector<std::string> records;
  for (int64_t i = 0; i < 4; ++i) {
    std::vector<std::string> tags;
    for (int64_t j = 0; j < i; ++j) tags.push_back(fmt::format("t{}", 10 * i + j));
    std::vector<int64_t> ids{INT64_MAX - i};
    ExampleBuilder builder;
    builder.add_bytes("tags", tags).add_int64s("id", ids);
    records.push_back(builder.serialize());
  }
  FeatureSpecs specs{{"tags", VarLenFeature{DType::kString}},
                     {"id", VarLenFeature{DType::kI64}},
                     {"first", FixedLenFeature{{},
                                               DType::kI64,
                                               std::nullopt,
                                               std::nullopt,
                                               std::vector<int64_t>{(int64_t{1} << 62) + 1}}}};
  auto parsed = parse_example(records, specs);
  const Tensor& tags = parsed.at("tags");
  CHECK(tags.shape() == Shape{4, 3});
  CHECK(tags.indices().to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0, 2, 0, 2, 1, 3, 0, 3, 1, 3, 2});
  CHECK(tags.values().to_vector<std::string>() ==
        std::vector<std::string>{"t10", "t20", "t21", "t30", "t31", "t32"});
  CHECK(parsed.at("id").values().to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MAX, INT64_MAX - 1, INT64_MAX - 2, INT64_MAX - 3});
  // The int64 default is exact (2^62 + 1 is not a double).
  CHECK(parsed.at("first").to_vector<int64_t>() == std::vector<int64_t>(4, (int64_t{1} << 62) + 1));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(
                       records[0],
                       {{"x", FixedLenFeature{{}, DType::kI64, std::vector<double>{0.5}}}});
                 }),
                 "default_int64"));
  // Padded strings pad with "".
  auto padded =
      parse_example(records, {{"tags", VarLenFeature{DType::kString, VarLenMode::kPadded}}});
  CHECK(padded.at("tags").shape() == Shape{4, 3});
  CHECK(padded.at("tags").to_vector<std::string>()[3] == "t10");
  CHECK(padded.at("tags").to_vector<std::string>()[4].empty());
}

TEST_CASE("a feature present with no list set counts as missing") {
  std::string record = ExampleBuilder().add_empty("score").add_empty("tags").serialize();
  CHECK(contains(record, "score"));  // the key is on the wire
  FeatureSpecs specs{{"score", FixedLenFeature{{}, DType::kF32, std::vector<double>{0.25}}},
                     {"tags", VarLenFeature{DType::kString}}};
  auto parsed = parse_single_example(record, specs);
  CHECK(parsed.at("score").item() == 0.25);
  CHECK(parsed.at("tags").shape() == Shape{0});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(record, {{"score", FixedLenFeature{{}, DType::kF32}}});
                 }),
                 "'score' is missing"));
}

TEST_CASE("sparse components through shuffle, caches and saved positions") {
  std::string path = scratch_file("sparse_resume.tfrecord");
  {
    TFRecordWriter writer(path);
    for (int64_t i = 0; i < 12; ++i) {
      std::vector<std::string> tags(static_cast<size_t>(i % 4), fmt::format("w{}", i));
      std::vector<int64_t> label{i};
      writer.write(ExampleBuilder().add_bytes("tags", tags).add_int64s("label", label).serialize());
    }
  }
  FeatureSpecs specs{{"tags", VarLenFeature{DType::kString}},
                     {"label", FixedLenFeature{{}, DType::kI64}}};
  Dataset ds = example_dataset({path}, specs, {.label_key = "label"});
  check_resume(ds.shuffle(5, 11).batch(3).repeat(2), {1, 3, 5});
  check_resume(ds.cache().shuffle(5, 11).batch(3).repeat(2), {2, 4, 6});
  check_resume(ds.cache(scratch_file("sparse.cache")).batch(5).repeat(2), {1, 4});
  // A batch of sparse tensors has the batch's largest length as its second dimension.
  auto batches = drain(ds.batch(4));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].features.at("tags").shape() == Shape{4, 3});
  CHECK(sparse::to_dense(batches[0].features.at("tags")).to_vector<std::string>() ==
        std::vector<std::string>{"", "", "", "w1", "", "", "w2", "w2", "", "w3", "w3", "w3"});
  CHECK(contains(error_message<InvalidArgumentError>([&] { drain(ds.padded_batch(2)); }),
                 "only batch()"));
}
