// numeric, bucketized and categorical (identity, vocabulary list and file, hash bucket)
// columns, against the expected values of tensorflow/python/feature_column/
// feature_column_v2_test.py and feature_column_test.py.
#include <doctest/doctest.h>

#include <fstream>

#include "feature_column/categorical.h"
#include "feature_column/numeric.h"
#include "ops/array_ops.h"
#include "tests/data/test_util.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;
using est::testing::sparse_numbers;
using est::testing::sparse_strings;

namespace {
std::vector<int64_t> ids_of(const CategoricalColumn& column, const Features& features) {
  return column.sparse_tensors(features).ids.values().to_vector<int64_t>();
}
}  // namespace

TEST_CASE("numeric_column: parse spec, float32 output, normalizer, shape checks") {
  auto price = numeric_column(
      "price", {.shape = {2},
                .default_value = std::vector<double>{0.5},
                .normalizer_fn = [](const Tensor& x) { return ops::cast(x, DType::kF64); }});
  FeatureSpecs specs = make_parse_example_spec({price});
  const auto& spec = std::get<data::FixedLenFeature>(specs.at("price"));
  CHECK(spec.shape == Shape{2});
  CHECK(spec.default_value == std::vector<double>{0.5});
  Features features{{"price", Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2})}};
  Tensor dense = price->dense_tensor(features, nullptr);
  CHECK(dense.dtype() == DType::kF32);
  CHECK(dense.shape() == Shape{2, 2});
  CHECK(dense.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   numeric_column("price", {.shape = {3}})->dense_tensor(features, nullptr);
                 }),
                 "needs 3 values per example"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   numeric_column("price")->dense_tensor(
                       {{"price", sparse_numbers<float>({0, 0}, {1}, {1, 1})}}, nullptr);
                 }),
                 "sparse"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { numeric_column("cost")->dense_tensor(features, nullptr); }),
                 "'cost'"));
}

TEST_CASE("bucketized_column: TF's bucket ids, one-hot dense and categorical ids") {
  // feature_column_test: price [[-1], [5]] with boundaries [0, 2, 4, 6] -> [[0], [3]].
  auto price = bucketized_column(numeric_column("price"), {0, 2, 4, 6});
  CHECK(price->name() == "price_bucketized");
  Features features{{"price", Tensor::from_vector<float>({-1, 5}, {2, 1})}};
  CHECK(price->dense_tensor(features, nullptr).to_vector<float>() ==
        std::vector<float>{1, 0, 0, 0, 0, 0, 0, 0, 1, 0});
  // Shape (2,): ((-1, 1), (5, 6)) -> buckets ((0, 1), (3, 4)); a boundary goes up; ids add
  // element * (boundaries + 1).
  auto pair = bucketized_column(numeric_column("aaa", {.shape = {2}}), {0, 2, 4, 6});
  Features two{{"aaa", Tensor::from_vector<float>({-1, 1, 5, 6}, {2, 2})}};
  CHECK(pair->variable_shape() == Shape{2, 5});
  CHECK(pair->num_buckets() == 10);
  IdWeightPair ids = pair->sparse_tensors(two);
  CHECK(ids.ids.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 1, 0, 1, 1});
  CHECK(ids.ids.values().to_vector<int64_t>() == std::vector<int64_t>{0, 6, 3, 9});
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   bucketized_column(numeric_column("x"), {1, 1});
                 }),
                 "sorted"));
}

TEST_CASE("categorical_column_with_identity: range, default_value, dense input") {
  auto column = categorical_column_with_identity("aaa", 3);
  CHECK(std::get<data::VarLenFeature>(make_parse_example_spec({column}).at("aaa")).dtype ==
        DType::kI64);
  Features features{{"aaa", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1}, {0, 1, 0}, {2, 2})}};
  CHECK(ids_of(*column, features) == std::vector<int64_t>{0, 1, 0});
  Features bad{{"aaa", sparse_numbers<int64_t>({0, 0}, {3}, {1, 1})}};
  CHECK(contains(error_message<InvalidArgumentError>([&] { ids_of(*column, bad); }),
                 "id 3 is not in [0, 3)"));
  CHECK(ids_of(*categorical_column_with_identity("aaa", 3, 1), bad) == std::vector<int64_t>{1});
  // Dense input: -1 is dropped.
  Features dense{{"aaa", Tensor::from_vector<int64_t>({2, -1, 0, 1}, {2, 2})}};
  IdWeightPair pair = column->sparse_tensors(dense);
  CHECK(pair.ids.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 1, 1});
  CHECK(pair.ids.values().to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1});
}

TEST_CASE("categorical_column_with_vocabulary_list: TF's ids, defaults and OOV buckets") {
  auto column = categorical_column_with_vocabulary_list(
      "aaa", std::vector<std::string>{"omar", "stringer", "marlo"});
  Features features{
      {"aaa", sparse_strings({0, 0, 1, 0, 1, 1}, {"marlo", "skywalker", "omar"}, {2, 2})}};
  CHECK(ids_of(*column, features) == std::vector<int64_t>{2, -1, 0});
  CHECK(ids_of(
            *categorical_column_with_vocabulary_list(
                "aaa", std::vector<std::string>{"omar", "stringer", "marlo"}, {.default_value = 2}),
            features) == std::vector<int64_t>{2, 2, 0});
  Features four{{"aaa", sparse_strings({0, 0, 1, 0, 1, 1, 1, 2},
                                       {"marlo", "skywalker", "omar", "heisenberg"}, {2, 3})}};
  CHECK(ids_of(*categorical_column_with_vocabulary_list(
                   "aaa", std::vector<std::string>{"omar", "stringer", "marlo"},
                   {.num_oov_buckets = 100}),
               four) == std::vector<int64_t>{2, 33, 0, 62});
  // Dense input drops "".
  Features dense{{"aaa", data::string_tensor({"marlo", "", "skywalker", "omar"}, {2, 2})}};
  IdWeightPair pair = column->sparse_tensors(dense);
  CHECK(pair.ids.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 1, 1});
  CHECK(pair.ids.values().to_vector<int64_t>() == std::vector<int64_t>{2, -1, 0});
  // Integer vocabularies; OOV integers hash through their decimal string.
  Features ints{
      {"aaa", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1, 2, 2}, {11, 100, 30, 22}, {3, 3})}};
  std::vector<int64_t> vocabulary{30, 35, 11, 23, 22};
  CHECK(ids_of(*categorical_column_with_vocabulary_list("aaa", vocabulary), ints) ==
        std::vector<int64_t>{2, -1, 0, 4});
  CHECK(
      ids_of(*categorical_column_with_vocabulary_list("aaa", vocabulary, {.num_oov_buckets = 100}),
             ints) == std::vector<int64_t>{2, 60, 0, 4});
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   categorical_column_with_vocabulary_list("a", std::vector<int64_t>{12, 24, 12});
                 }),
                 "duplicate"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   categorical_column_with_vocabulary_list(
                       "a", std::vector<int64_t>{1}, {.default_value = 2, .num_oov_buckets = 1});
                 }),
                 "both"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { ids_of(*column, ints); }),
                 "expects strings"));
}

TEST_CASE("categorical_column_with_vocabulary_file: lines are ids, vocabulary_size, OOV") {
  const std::string path = est::testing::scratch_file("warriors.txt");
  std::ofstream(path) << "30\n35\n11\n23\n22\n";
  Features ints{
      {"aaa", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1, 2, 2}, {11, 100, 30, 22}, {3, 3})}};
  CHECK(ids_of(*categorical_column_with_vocabulary_file("aaa", path, {.dtype = DType::kI64}),
               ints) == std::vector<int64_t>{2, -1, 0, 4});
  CHECK(ids_of(*categorical_column_with_vocabulary_file(
                   "aaa", path, {.num_oov_buckets = 100, .dtype = DType::kI64}),
               ints) == std::vector<int64_t>{2, 60, 0, 4});
  CHECK(ids_of(*categorical_column_with_vocabulary_file(
                   "aaa", path, {.default_value = -100, .dtype = DType::kI64}),
               ints) == std::vector<int64_t>{2, -100, 0, 4});
  // vocabulary_size takes the first lines only: 22 (line 5) becomes unknown.
  auto first_three = categorical_column_with_vocabulary_file(
      "aaa", path, {.vocabulary_size = 3, .dtype = DType::kI64});
  CHECK(first_three->num_buckets() == 3);
  CHECK(ids_of(*first_three, ints) == std::vector<int64_t>{2, -1, 0, -1});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   categorical_column_with_vocabulary_file(
                       "aaa", path, {.vocabulary_size = 6, .dtype = DType::kI64});
                 }),
                 "only 5 lines"));
  CHECK(error_message<NotFoundError>([] {
          categorical_column_with_vocabulary_file("aaa", "/nonexistent/vocab.txt");
        }) != "<no error>");
  const std::string words = est::testing::scratch_file("wire.txt");
  std::ofstream(words) << "omar\nstringer\nmarlo\n";
  Features strings{
      {"wire", sparse_strings({0, 0, 1, 0, 1, 1}, {"marlo", "skywalker", "omar"}, {2, 2})}};
  auto wire = categorical_column_with_vocabulary_file("wire", words, {.num_oov_buckets = 1});
  CHECK(wire->num_buckets() == 4);
  CHECK(ids_of(*wire, strings) == std::vector<int64_t>{2, 3, 0});
}

TEST_CASE("categorical_column_with_hash_bucket matches TF's expected hashes") {
  Features wire{
      {"wire", sparse_strings({0, 0, 1, 0, 1, 1}, {"omar", "stringer", "marlo"}, {2, 2})}};
  CHECK(ids_of(*categorical_column_with_hash_bucket("wire", 10), wire) ==
        std::vector<int64_t>{6, 4, 1});
  Features cast{{"wire_cast", wire.at("wire")}};
  CHECK(ids_of(*categorical_column_with_hash_bucket("wire_cast", 4), cast) ==
        std::vector<int64_t>{2, 0, 3});
  // Integers hash through their decimal string (int64 and int32 alike).
  Features ints{{"wire", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1}, {101, 201, 301}, {2, 2})}};
  auto hashed_ints = categorical_column_with_hash_bucket("wire", 10, DType::kI64);
  CHECK(ids_of(*hashed_ints, ints) == std::vector<int64_t>{3, 7, 5});
  Features int32s{{"wire", sparse_numbers<int32_t>({0, 0, 1, 0, 1, 1}, {101, 201, 301}, {2, 2})}};
  CHECK(ids_of(*hashed_ints, int32s) == std::vector<int64_t>{3, 7, 5});
  CHECK(contains(error_message<InvalidArgumentError>([&] { ids_of(*hashed_ints, wire); }),
                 "expects integers"));
}

TEST_CASE("categorical_column_with_hash_bucket takes any integer dtype, or string") {
  // feature_column_v2.py: `dtype != string and not dtype.is_integer` is the only refusal.
  Features int32s{{"wire", sparse_numbers<int32_t>({0, 0, 1, 0, 1, 1}, {101, 201, 301}, {2, 2})}};
  auto hashed_int32 = categorical_column_with_hash_bucket("wire", 10, DType::kI32);
  CHECK(ids_of(*hashed_int32, int32s) == std::vector<int64_t>{3, 7, 5});
  Features bytes{{"wire", sparse_numbers<uint8_t>({0, 0, 1, 0}, {101, 201}, {2, 1})}};
  CHECK(
      ids_of(*categorical_column_with_hash_bucket("wire", 10, DType::kU8), bytes) ==
      ids_of(*hashed_int32, {{"wire", sparse_numbers<int32_t>({0, 0, 1, 0}, {101, 201}, {2, 1})}}));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [] { categorical_column_with_hash_bucket("wire", 10, DType::kF32); }),
                 "dtype must be string or an integer type"));
}

TEST_CASE("vocabulary files with Windows line ends read as TF's line reader reads them") {
  // InputBuffer::ReadLine drops every '\r': "omar\r\n" is the key "omar".
  const std::string words = est::testing::scratch_file("wire_crlf.txt");
  std::ofstream(words, std::ios::binary) << "omar\r\nstringer\r\nmarlo\r\n";
  Features strings{
      {"wire", sparse_strings({0, 0, 1, 0, 1, 1}, {"marlo", "skywalker", "omar"}, {2, 2})}};
  auto wire = categorical_column_with_vocabulary_file("wire", words);
  CHECK(wire->num_buckets() == 3);
  CHECK(ids_of(*wire, strings) == std::vector<int64_t>{2, -1, 0});
  const std::string numbers = est::testing::scratch_file("ids_crlf.txt");
  std::ofstream(numbers, std::ios::binary) << "30\r\n35\r\n";
  Features ints{{"aaa", sparse_numbers<int64_t>({0, 0, 1, 0}, {35, 30}, {2, 1})}};
  CHECK(ids_of(*categorical_column_with_vocabulary_file("aaa", numbers, {.dtype = DType::kI64}),
               ints) == std::vector<int64_t>{1, 0});
}

TEST_CASE("make_parse_example_spec: one key read with different specs is an error") {
  // feature_column_v2.make_parse_example_spec raises "different parse_spec for key".
  auto plain = numeric_column("price");
  CHECK(make_parse_example_spec({plain, numeric_column("price")}).size() == 1);  // equal specs
  CHECK(make_parse_example_spec({plain, bucketized_column(plain, {0, 1})}).size() == 1);
  const std::pair<const char*, ColumnPtr> kDiffering[] = {
      {"default", numeric_column("price", {.default_value = std::vector<double>{1}})},
      {"shape", numeric_column("price", {.shape = {2}})},
      {"dtype", numeric_column("price", {.dtype = DType::kI64})},
      {"kind", categorical_column_with_hash_bucket("price", 10)}};
  for (const auto& [what, other] : kDiffering) {
    CAPTURE(what);
    const std::string message = error_message<InvalidArgumentError>([&] {
      make_parse_example_spec({plain, other});
    });
    CHECK(contains(message, "different parse_spec for key 'price'"));
    CHECK(contains(message, "FixedLenFeature(shape=[1], dtype=float32, default_value=None)"));
  }
}

TEST_CASE("numeric_column(dtype=int64): a default above 2^53 is exact through default_int64") {
  constexpr int64_t kBig = (int64_t{1} << 53) + 1;  // a double rounds it to 2^53
  auto id = numeric_column("id", {.dtype = DType::kI64, .default_int64 = std::vector{kBig}});
  const FeatureSpecs specs = make_parse_example_spec({id});
  const auto& spec = std::get<data::FixedLenFeature>(specs.at("id"));
  CHECK(spec.default_int64 == std::vector<int64_t>{kBig});
  CHECK_FALSE(spec.default_value);
  // A serialized Example without the feature parses to the exact default.
  const std::string empty_example;  // an Example with no features: zero bytes
  Features parsed = data::parse_single_example(empty_example, {{"id", spec}});
  CHECK(parsed.at("id").data<int64_t>()[0] == kBig);
  CHECK(contains(error_message<InvalidArgumentError>(
                     [] { numeric_column("id", {.default_int64 = std::vector<int64_t>{1}}); }),
                 "default_int64 needs dtype int64"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   numeric_column("id", {.default_value = std::vector<double>{1},
                                         .dtype = DType::kI64,
                                         .default_int64 = std::vector<int64_t>{1}});
                 }),
                 "both default_value and default_int64"));
}
