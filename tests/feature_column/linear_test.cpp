// weighted_categorical_column and linear_model against the expected values of
// tensorflow/python/feature_column/feature_column_v2_test.py (LinearModel tests: sparse
// bias with sum and mean combiners, dense columns, weighted ids) and TF's variable names.
#include <doctest/doctest.h>

#include "feature_column/feature_column.h"
#include "feature_column/linear.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;
using est::testing::sparse_numbers;
using est::testing::sparse_strings;

namespace {

void assign(nn::VariableStore& store, const std::string& name, std::vector<float> values) {
  Tensor variable = store.get(name).value;
  variable.copy_from(Tensor::from_vector(values, variable.shape()));
}

}  // namespace

TEST_CASE("linear_model: hashed ids with sum and mean combiners, as TF's test_sparse_bias") {
  auto wire_cast = categorical_column_with_hash_bucket("wire_cast", 4);
  // 'omar', 'stringer', 'marlo' hash to 2, 0, 3.
  Features features{
      {"wire_cast", sparse_strings({0, 0, 1, 0, 1, 1}, {"omar", "stringer", "marlo"}, {2, 2})}};
  for (Combiner combiner : {Combiner::kSum, Combiner::kMean}) {
    nn::VariableStore store;
    nn::ModelContext context(store);
    Tensor zero = linear_model(features, {wire_cast}, context, {.sparse_combiner = combiner});
    CHECK(zero.shape() == Shape{2, 1});
    CHECK(zero.to_vector<float>() == std::vector<float>{0, 0});
    CHECK(store.contains("linear_model/wire_cast/weights"));
    CHECK(store.contains("linear_model/bias_weights"));
    assign(store, "linear_model/wire_cast/weights", {10, 100, 1000, 10000});
    assign(store, "linear_model/bias_weights", {5});
    context.begin_call();
    Tensor out = linear_model(features, {wire_cast}, context, {.sparse_combiner = combiner});
    CHECK(out.to_vector<float>() == (combiner == Combiner::kSum ? std::vector<float>{1005, 10015}
                                                                : std::vector<float>{1005, 5010}));
  }
}

TEST_CASE("linear_model: dense columns and weighted ids") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto price = numeric_column("price");
  Features prices{{"price", Tensor::from_vector<float>({1, 5}, {2, 1})}};
  linear_model(prices, {price}, context);
  assign(store, "linear_model/price/weights", {10});
  assign(store, "linear_model/bias_weights", {5});
  context.begin_call();
  CHECK(linear_model(prices, {price}, context).to_vector<float>() == std::vector<float>{15, 55});

  auto weighted = weighted_categorical_column(categorical_column_with_identity("ids", 3), "values");
  CHECK(weighted->name() == "ids_weighted_by_values");
  FeatureSpecs specs = make_parse_example_spec({weighted});
  CHECK(std::get<data::VarLenFeature>(specs.at("values")).dtype == DType::kF32);
  Features features{{"ids", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1}, {0, 2, 1}, {2, 2})},
                    {"values", sparse_numbers<float>({0, 0, 1, 0, 1, 1}, {.5f, 1, .1f}, {2, 2})}};
  nn::VariableStore weighted_store;
  nn::ModelContext weighted_context(weighted_store);
  linear_model(features, {weighted}, weighted_context);
  assign(weighted_store, "linear_model/ids_weighted_by_values/weights", {1, 2, 3});
  weighted_context.begin_call();
  std::vector<float> out = linear_model(features, {weighted}, weighted_context).to_vector<float>();
  CHECK(out[0] == doctest::Approx(0.5));
  CHECK(out[1] == doctest::Approx(3.2));
  // The indicator of a weighted column sums the weights per id.
  CHECK(indicator_column(weighted)->dense_tensor(features, nullptr).to_vector<float>() ==
        std::vector<float>{0.5f, 0, 0, 0, 0.1f, 1});
  Features misaligned = features;
  misaligned["values"] = sparse_numbers<float>({0, 0}, {1}, {2, 2});
  CHECK(contains(error_message<InvalidArgumentError>([&] { weighted->sparse_tensors(misaligned); }),
                 "same indices"));
}
