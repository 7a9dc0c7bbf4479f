// crossed_column against tensorflow/python/feature_column/feature_column_test.py's exact
// hashed output for a cross of a bucketized column, a raw string feature and a nested cross.
#include <doctest/doctest.h>

#include "feature_column/categorical.h"
#include "feature_column/crossed.h"
#include "feature_column/numeric.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;
using est::testing::sparse_strings;

TEST_CASE("crossed_column reproduces TF's hashed ids for a nested cross") {
  auto a = numeric_column("a", {.shape = {2}});
  auto b = bucketized_column(a, {0, 1});
  auto crossed1 = crossed_column({"d1", "d2"}, 10);
  auto crossed2 = crossed_column({b, "c", crossed1}, 15, 5);
  Features features{{"a", Tensor::from_vector<float>({-1, 0.5f, 0.5f, 1}, {2, 2})},
                    {"c", sparse_strings({0, 0, 1, 0, 1, 1}, {"cA", "cB", "cC"}, {2, 2})},
                    {"d1", sparse_strings({0, 0, 1, 0, 1, 1}, {"d1A", "d1B", "d1C"}, {2, 2})},
                    {"d2", sparse_strings({0, 0, 1, 0, 1, 1}, {"d2A", "d2B", "d2C"}, {2, 2})}};
  IdWeightPair ids = crossed2->sparse_tensors(features);
  CHECK(ids.ids.shape() == Shape{2, 16});
  std::vector<int64_t> indices{0, 0, 0, 1};
  for (int64_t j = 0; j < 16; ++j) {
    indices.push_back(1);
    indices.push_back(j);
  }
  CHECK(ids.ids.indices().to_vector<int64_t>() == indices);
  CHECK(ids.ids.values().to_vector<int64_t>() ==
        std::vector<int64_t>{6, 14, 0, 13, 8, 8, 10, 12, 2, 0, 1, 9, 8, 12, 2, 0, 10, 11});
  CHECK(crossed2->num_buckets() == 15);
  CHECK(crossed2->name() == "a_bucketized_X_c_X_d1_X_d2");
  FeatureSpecs specs = make_parse_example_spec({crossed2});
  CHECK(specs.size() == 4);
  CHECK(std::get<data::VarLenFeature>(specs.at("c")).dtype == DType::kString);
  CHECK(std::holds_alternative<data::FixedLenFeature>(specs.at("a")));
}

TEST_CASE("crossed_column refuses hash-bucket keys and single keys") {
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   crossed_column({categorical_column_with_hash_bucket("x", 5), "y"}, 10);
                 }),
                 "not supported for crossing"));
  CHECK(contains(error_message<InvalidArgumentError>([] { crossed_column({"x"}, 10); }),
                 "at least two"));
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   crossed_column({"x", "y"}, 0);
                 }),
                 "hash_bucket_size"));
}
