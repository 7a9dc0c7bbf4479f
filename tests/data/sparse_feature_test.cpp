// SparseFeature and FixedLenSequenceFeature in tf.io.parse_example / parse_single_example.
// Expected outputs follow the docstring of tf.io.parse_example and the field documentation in
// tensorflow/python/ops/parsing_config.py (SparseFeature's [3, 1] / [20, 0] example) and
// parsing_ops.py (_prepend_none_dimension: allow_missing is required).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "data/example.h"
#include "data/tfrecord.h"
#include "ops/sparse.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

std::string record(std::vector<float> val, std::vector<int64_t> ix) {
  return ExampleBuilder().add_floats("val", val).add_int64s("ix", ix).serialize();
}

}  // namespace

TEST_CASE("SparseFeature parses as tf.io.parse_example's docstring shows") {
  // val [0.5, -1.0] at ix [3, 20]; val [0.0] at ix [42]; size 100.
  std::vector<std::string> records{record({0.5f, -1.0f}, {3, 20}), record({0.0f}, {42})};
  FeatureSpecs specs{{"sparse", SparseFeature{{"ix"}, "val", DType::kF32, {100}}}};
  Features parsed = parse_example(records, specs);
  CHECK(parsed.size() == 1);  // the index and value features are not outputs
  const Tensor& sparse = parsed.at("sparse");
  REQUIRE(sparse.is_sparse());
  CHECK(sparse.shape() == Shape{2, 100});
  CHECK(sparse.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 3, 0, 20, 1, 42});
  CHECK(sparse.values().to_vector<float>() == std::vector<float>{0.5f, -1.0f, 0.0f});

  Tensor single = parse_single_example(records[1], specs).at("sparse");
  CHECK(single.shape() == Shape{100});
  CHECK(single.indices().shape() == Shape{1, 1});
  CHECK(single.indices().to_vector<int64_t>() == std::vector<int64_t>{42});

  // Parsed one by one and batched gives the same tensor.
  std::string path = scratch_file("sparse_feature.tfrecord");
  {
    TFRecordWriter writer(path);
    for (const auto& r : records) writer.write(r);
  }
  auto batches = drain(example_dataset({path}, specs).batch(2));
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].features.at("sparse").shape() == Shape{2, 100});
  CHECK(batches[0].features.at("sparse").indices().to_vector<int64_t>() ==
        sparse.indices().to_vector<int64_t>());
}

TEST_CASE("SparseFeature with two index keys, sorted unless already_sorted") {
  // parsing_config.py's example: SparseTensor(indices=[[3, 1], [20, 0]], values=[0.5, -1.0],
  // dense_shape=[100, 3]); here the wire order is reversed, which sorting undoes.
  std::vector<float> val{-1.0f, 0.5f};
  std::vector<int64_t> ix0{20, 3}, ix1{0, 1};
  std::string serialized = ExampleBuilder()
                               .add_floats("val", val)
                               .add_int64s("ix0", ix0)
                               .add_int64s("ix1", ix1)
                               .serialize();
  SparseFeature spec{{"ix0", "ix1"}, "val", DType::kF32, {100, 3}};
  Tensor sorted = parse_single_example(serialized, {{"st", spec}}).at("st");
  CHECK(sorted.shape() == Shape{100, 3});
  CHECK(sorted.indices().to_vector<int64_t>() == std::vector<int64_t>{3, 1, 20, 0});
  CHECK(sorted.values().to_vector<float>() == std::vector<float>{0.5f, -1.0f});
  CHECK(ops::sparse::to_dense(sorted).to_vector<float>()[3 * 3 + 1] == 0.5f);

  spec.already_sorted = true;  // the wire order is kept
  Tensor kept = parse_single_example(serialized, {{"st", spec}}).at("st");
  CHECK(kept.indices().to_vector<int64_t>() == std::vector<int64_t>{20, 0, 3, 1});
  CHECK(kept.values().to_vector<float>() == std::vector<float>{-1.0f, 0.5f});

  Features batch =
      parse_example(std::vector<std::string>{serialized, serialized},
                    {{"st", SparseFeature{{"ix0", "ix1"}, "val", DType::kF32, {100, 3}}}});
  CHECK(batch.at("st").shape() == Shape{2, 100, 3});
  CHECK(batch.at("st").indices().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 3, 1, 0, 20, 0, 1, 3, 1, 1, 20, 0});

  // Missing features give no entries; string values work as well.
  std::vector<int64_t> at{1};
  std::string words = ExampleBuilder().add_bytes("w", {"b"}).add_int64s("i", at).serialize();
  Tensor strings =
      parse_single_example(words, {{"s", SparseFeature{{"i"}, "w", DType::kString, {4}}},
                                   {"none", SparseFeature{{"x"}, "y", DType::kI64, {4}}}})
          .at("s");
  CHECK(strings.values().to_vector<std::string>() == std::vector<std::string>{"b"});
  Tensor none = parse_single_example(words, {{"none", SparseFeature{{"x"}, "y", DType::kI64, {4}}}})
                    .at("none");
  CHECK(none.values().numel() == 0);
  CHECK(none.shape() == Shape{4});
}

TEST_CASE("SparseFeature errors name the feature and what to do") {
  auto error = [](const std::string& serialized, const SparseFeature& spec) {
    return error_message<InvalidArgumentError>([&] {
      parse_single_example(serialized, {{"st", spec}});
    });
  };
  CHECK(contains(error(record({1, 2}, {3}), SparseFeature{{"ix"}, "val", DType::kF32, {10}}),
                 "index feature 'ix' has 1 values but value feature 'val' has 2"));
  CHECK(contains(error(record({1}, {10}), SparseFeature{{"ix"}, "val", DType::kF32, {10}}),
                 "outside [0, 10)"));
  CHECK(contains(error(record({1}, {1}), SparseFeature{{"ix"}, "val", DType::kI64, {10}}),
                 "feature 'val' (of SparseFeature 'st') is a float_list"));
  CHECK(contains(error(record({1}, {1}), SparseFeature{{"ix", "iy"}, "val", DType::kF32, {10}}),
                 "one size per key"));
}

TEST_CASE("FixedLenSequenceFeature pads a batch with its default (parse_example docstring)") {
  // ft = [1, 2], (no features), [3] with default_value -1 and shape []: every example is padded
  // to the longest (2); the docstring's output shows rows [1, 2] and [3, -1] (and the missing
  // example's [-1, -1]).
  std::vector<float> first{1.0f, 2.0f}, third{3.0f};
  std::vector<std::string> records{ExampleBuilder().add_floats("ft", first).serialize(),
                                   ExampleBuilder().serialize(),
                                   ExampleBuilder().add_floats("ft", third).serialize()};
  FixedLenSequenceFeature spec{
      .shape = {}, .dtype = DType::kF32, .allow_missing = true, .default_value = -1.0};
  Tensor ft = parse_example(records, {{"ft", spec}}).at("ft");
  CHECK(ft.shape() == Shape{3, 2});
  CHECK(ft.to_vector<float>() == std::vector<float>{1, 2, -1, -1, 3, -1});
  // One example: [n] + shape, a missing feature [0] + shape.
  CHECK(parse_single_example(records[0], {{"ft", spec}}).at("ft").shape() == Shape{2});
  CHECK(parse_single_example(records[1], {{"ft", spec}}).at("ft").shape() == Shape{0});

  // Elements of shape {2}: 4 values are two elements; padding defaults to 0 ("" for strings);
  // int64 defaults stay exact.
  std::vector<int64_t> four{1, 2, 3, 4}, two{5, 6};
  std::vector<std::string> pairs{
      ExampleBuilder().add_int64s("p", four).add_bytes("s", {"a"}).serialize(),
      ExampleBuilder().add_int64s("p", two).add_bytes("s", {"b", "c"}).serialize()};
  const int64_t big = (int64_t{1} << 62) + 1;
  Features parsed = parse_example(
      pairs,
      {{"p",
        FixedLenSequenceFeature{
            .shape = {2}, .dtype = DType::kI64, .allow_missing = true, .default_int64 = big}},
       {"q", FixedLenSequenceFeature{.shape = {2}, .dtype = DType::kI64, .allow_missing = true}},
       {"s",
        FixedLenSequenceFeature{.shape = {}, .dtype = DType::kString, .allow_missing = true}}});
  CHECK(parsed.at("p").shape() == Shape{2, 2, 2});
  CHECK(parsed.at("p").to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6, big, big});
  CHECK(parsed.at("q").shape() == Shape{2, 0, 2});  // missing everywhere
  CHECK(parsed.at("s").to_vector<std::string>() == std::vector<std::string>{"a", "", "b", "c"});
}

TEST_CASE("FixedLenSequenceFeature errors as TF's") {
  std::vector<float> three{1, 2, 3};
  std::string serialized = ExampleBuilder().add_floats("ft", three).serialize();
  // parse_example requires allow_missing (parsing_ops.py _prepend_none_dimension).
  CHECK(contains(
      error_message<InvalidArgumentError>([&] {
        parse_single_example(serialized, {{"ft", FixedLenSequenceFeature{{}, DType::kF32}}});
      }),
      "requires allow_missing = true"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(
                       serialized,
                       {{"ft", FixedLenSequenceFeature{.shape = {2}, .allow_missing = true}}});
                 }),
                 "3 values, not a multiple"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(serialized,
                                        {{"ft", FixedLenSequenceFeature{.dtype = DType::kString,
                                                                        .allow_missing = true}}});
                 }),
                 "is a float_list"));
}

TEST_CASE("parse_example's direct path gives what parsing one by one and batching gives") {
  std::vector<std::string> records;
  for (int64_t i = 0; i < 7; ++i) {
    ExampleBuilder builder;
    std::vector<float> pair{0.5f * i, -1.0f * i};
    std::vector<int64_t> ids(static_cast<size_t>(i % 3), (int64_t{1} << 60) + i);
    builder.add_floats("pair", pair).add_int64s("ids", ids);
    if (i % 2) builder.add_bytes("city", {fmt::format("c{}", i)});
    if (i != 4)
      builder.add_bytes("tags", std::vector<std::string>(static_cast<size_t>(i % 4), "t"));
    records.push_back(builder.serialize());
  }
  FeatureSpecs specs{{"pair", FixedLenFeature{{2}, DType::kF32}},
                     {"city", FixedLenFeature{.shape = {},
                                              .dtype = DType::kString,
                                              .default_strings = std::vector<std::string>{"?"}}},
                     {"ids", VarLenFeature{DType::kI64}},
                     {"tags", VarLenFeature{DType::kString}}};
  Features direct = parse_example(records, specs);
  auto batches = drain(Dataset::from_strings(records).map(example_parser(specs)).batch(7));
  REQUIRE(batches.size() == 1);
  const Features& expected = batches[0].features;
  CHECK(direct.at("pair").to_vector<float>() == expected.at("pair").to_vector<float>());
  CHECK(direct.at("city").to_vector<std::string>() == expected.at("city").to_vector<std::string>());
  CHECK(direct.at("city").to_vector<std::string>()[0] == "?");
  for (const char* name : {"ids", "tags"}) {
    CHECK(direct.at(name).shape() == expected.at(name).shape());
    CHECK(direct.at(name).indices().to_vector<int64_t>() ==
          expected.at(name).indices().to_vector<int64_t>());
  }
  CHECK(direct.at("ids").values().to_vector<int64_t>() ==
        expected.at("ids").values().to_vector<int64_t>());
  CHECK(direct.at("tags").values().to_vector<std::string>() ==
        expected.at("tags").values().to_vector<std::string>());
  // Errors name the example in the batch.
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_example(records, {{"city", FixedLenFeature{{}, DType::kString}}});
                 }),
                 "serialized example 0: feature 'city' is missing"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_example(records, {{"pair", FixedLenFeature{{3}, DType::kF32}}});
                 }),
                 "serialized example 0: feature 'pair' has 2 values"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_example(records, {{"ids", VarLenFeature{DType::kF32}}});
                 }),
                 "serialized example 0: feature 'ids' is a int64_list"));
}
