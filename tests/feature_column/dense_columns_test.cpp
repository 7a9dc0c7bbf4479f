// indicator_column, embedding_column and input_layer: the expected values of
// tensorflow/python/feature_column/feature_column_v2_test.py (multi-hot counts, the embedding
// lookup's mean over ids, column order), TF's variable names, the combiners, gradients, and a
// model input built from parsed Examples.
#include <doctest/doctest.h>

#include <cmath>

#include "data/example.h"
#include "feature_column/feature_column.h"
#include "ops/autograd.h"
#include "ops/math.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;
using est::testing::sparse_numbers;
using est::testing::sparse_strings;

namespace {

// The embedding test's ids: example 0 [2], example 1 [0, 1], example 2 [], example 3 [1].
Features embedding_features() {
  return {{"aaa", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 4, 3, 0}, {2, 0, 1, 1}, {4, 5})}};
}

// Embedding values ((1, 2), (3, 5), (7, 11)) for ids 0..2.
nn::Initializer embedding_values() {
  return [](const Shape& shape, DType, ops::Generator&) {
    return Tensor::from_vector<float>({1, 2, 3, 5, 7, 11}, shape);
  };
}

}  // namespace

TEST_CASE("indicator_column counts ids per example (multi-hot)") {
  auto animal = indicator_column(categorical_column_with_identity("animal", 4));
  CHECK(animal->name() == "animal_indicator");
  Features features{{"animal", sparse_numbers<int64_t>({0, 0, 0, 1}, {1, 1}, {1, 2})}};
  CHECK(animal->dense_tensor(features, nullptr).to_vector<float>() ==
        std::vector<float>{0, 2, 0, 0});
  // Unknown vocabulary values (-1) count for nothing.
  auto wire = indicator_column(categorical_column_with_vocabulary_list(
      "wire", std::vector<std::string>{"omar", "stringer", "marlo"}));
  Features strings{
      {"wire", sparse_strings({0, 0, 1, 0, 1, 1}, {"marlo", "skywalker", "omar"}, {2, 2})}};
  CHECK(wire->dense_tensor(strings, nullptr).to_vector<float>() ==
        std::vector<float>{0, 0, 1, 1, 0, 0});
}

TEST_CASE("embedding_column looks up and combines as TF's test expects") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto column = embedding_column(categorical_column_with_identity("aaa", 3), 2,
                                 {.initializer = embedding_values()});
  CHECK(column->name() == "aaa_embedding");
  Tensor lookups = column->dense_tensor(embedding_features(), &context);
  CHECK(lookups.shape() == Shape{4, 2});
  CHECK(lookups.to_vector<float>() == std::vector<float>{7, 11, 2, 3.5f, 0, 0, 3, 5});
  CHECK(store.contains("embedding_weights"));

  auto combined = [&](Combiner combiner) {
    nn::VariableStore other;
    nn::ModelContext ctx(other);
    return embedding_column(categorical_column_with_identity("aaa", 3), 2,
                            {.combiner = combiner, .initializer = embedding_values()})
        ->dense_tensor(embedding_features(), &ctx)
        .to_vector<float>();
  };
  CHECK(combined(Combiner::kSum) == std::vector<float>{7, 11, 4, 7, 0, 0, 3, 5});
  const float root2 = std::sqrt(2.0f);
  std::vector<float> sqrtn = combined(Combiner::kSqrtn);
  CHECK(sqrtn[2] == doctest::Approx(4 / root2));
  CHECK(sqrtn[3] == doctest::Approx(7 / root2));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { column->dense_tensor(embedding_features(), nullptr); }),
                 "ModelContext"));
}

TEST_CASE("embedding gradients reach exactly the rows looked up") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto column = embedding_column(categorical_column_with_identity("aaa", 3), 2,
                                 {.initializer = embedding_values()});
  Tensor out = column->dense_tensor(embedding_features(), &context);
  Tensor weights = store.get("embedding_weights").value;
  Tensor grad = ops::gradients(ops::sum(out), {weights})[0];
  // id 0 and 1 each get 1/2 from example 1; id 1 gets 1 more from example 3; id 2 gets 1.
  CHECK(grad.to_vector<float>() == std::vector<float>{0.5f, 0.5f, 1.5f, 1.5f, 1, 1});
}

TEST_CASE("input_layer sorts columns by name, concatenates, and names variables as TF") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  Features features{{"price_a", Tensor::from_vector<float>({1}, {1, 1})},
                    {"price_b", Tensor::from_vector<float>({3}, {1, 1})}};
  auto a = numeric_column("price_a"), b = numeric_column("price_b");
  CHECK(input_layer(features, {a, b}, context).to_vector<float>() == std::vector<float>{1, 3});
  CHECK(input_layer(features, {b, a}, context).to_vector<float>() == std::vector<float>{1, 3});

  context.begin_call();
  Features mixed = embedding_features();
  mixed["price"] = Tensor::from_vector<float>({-1, 5, 2, 7}, {4});  // rank 1: read as [4, 1]
  auto embedded = embedding_column(categorical_column_with_identity("aaa", 3), 2,
                                   {.initializer = embedding_values()});
  auto price = numeric_column("price");
  Tensor net = input_layer(mixed, {price, embedded, bucketized_column(price, {0, 6})}, context);
  // Sorted: aaa_embedding (2), price (1), price_bucketized (3).
  CHECK(net.shape() == Shape{4, 6});
  CHECK(net.to_vector<float>() == std::vector<float>{7, 11,   -1, 1, 0, 0,  //
                                                     2, 3.5f, 5,  0, 1, 0,  //
                                                     0, 0,    2,  0, 1, 0,  //
                                                     3, 5,    7,  0, 0, 1});
  CHECK(store.contains("input_layer/aaa_embedding/embedding_weights"));
  Tensor again = dense_features(mixed, {embedded}, context);
  CHECK(store.contains("dense_features/aaa_embedding/embedding_weights"));
  CHECK(again.shape() == Shape{4, 2});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   input_layer(mixed, {price, price}, context);
                 }),
                 "duplicate"));
}

TEST_CASE("columns read batches parsed from Examples with their parse spec") {
  auto wire = categorical_column_with_hash_bucket("wire", 10);
  auto price = numeric_column("price", {.default_value = std::vector<double>{-1}});
  auto wire_x_language = crossed_column({"wire", "language"}, 7);
  std::vector<DenseColumnPtr> columns{price, indicator_column(wire),
                                      indicator_column(wire_x_language)};
  FeatureSpecs specs = make_parse_example_spec({price, wire, wire_x_language});
  CHECK(specs.size() == 3);
  std::vector<std::string> records;
  std::vector<float> five{5};
  records.push_back(data::ExampleBuilder()
                        .add_bytes("wire", {"omar"})
                        .add_bytes("language", {"en", "fr"})
                        .add_floats("price", five)
                        .serialize());
  records.push_back(data::ExampleBuilder().add_bytes("wire", {"stringer", "marlo"}).serialize());
  Features parsed = data::parse_example(records, specs);
  nn::VariableStore store;
  nn::ModelContext context(store);
  Tensor net = input_layer(parsed, columns, context);
  // Sorted: language_X_wire_indicator (7), price (1), wire_indicator (10).
  CHECK(wire_x_language->name() == "language_X_wire");
  REQUIRE(net.shape() == Shape{2, 18});
  std::vector<float> values = net.to_vector<float>();
  CHECK(values[7] == 5);
  CHECK(values[18 + 7] == -1);
  // omar -> 6; stringer -> 4, marlo -> 1 (TF's expected hash buckets).
  CHECK(values[8 + 6] == 1);
  CHECK(values[18 + 8 + 4] == 1);
  CHECK(values[18 + 8 + 1] == 1);
  float crosses0 = 0, crosses1 = 0;
  for (int j = 0; j < 7; ++j) {
    crosses0 += values[static_cast<size_t>(j)];
    crosses1 += values[static_cast<size_t>(18 + j)];
  }
  CHECK(crosses0 == 2);  // omar x {en, fr}
  CHECK(crosses1 == 0);  // no language: no crosses
}

TEST_CASE("shared_embedding_columns look up one variable named as TF names it") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto shared = shared_embedding_columns(
      {categorical_column_with_identity("bbb", 3), categorical_column_with_identity("aaa", 3)}, 2,
      {.initializer = embedding_values()});
  REQUIRE(shared.size() == 2);
  CHECK(shared[0]->name() == "bbb_shared_embedding");
  Features features{{"aaa", sparse_numbers<int64_t>({0, 0, 1, 0}, {2, 0}, {2, 1})},
                    {"bbb", sparse_numbers<int64_t>({0, 0, 1, 0}, {1, 1}, {2, 1})}};
  Tensor net = input_layer(features, {shared[0], shared[1]}, context);
  // Sorted: aaa_shared_embedding, bbb_shared_embedding; both from the one table.
  CHECK(net.to_vector<float>() == std::vector<float>{7, 11, 3, 5, 1, 2, 3, 5});
  CHECK(store.names() ==
        std::vector<std::string>{"input_layer/aaa_bbb_shared_embedding/embedding_weights"});
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   shared_embedding_columns({categorical_column_with_identity("a", 3),
                                             categorical_column_with_identity("b", 4)},
                                            2);
                 }),
                 "same number of buckets"));
}

TEST_CASE("embedding_column max_norm clips each looked-up row as tf.clip_by_norm") {
  // Rows (1, 2), (3, 5), (7, 11) with max_norm 3: row 0 (norm sqrt(5)) stays, rows 1 and 2 are
  // scaled to norm 3 (t * 3 / ||t||), before the mean over each example's ids.
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto column = embedding_column(categorical_column_with_identity("aaa", 3), 2,
                                 {.initializer = embedding_values(), .max_norm = 3.0});
  Tensor out = column->dense_tensor(embedding_features(), &context);
  const double r1 = std::sqrt(34.0), r2 = std::sqrt(170.0);
  const std::vector<double> expected{7 * 3 / r2,           11 * 3 / r2, (1 + 3 * 3 / r1) / 2,
                                     (2 + 5 * 3 / r1) / 2, 0,           0,
                                     3 * 3 / r1,           5 * 3 / r1};
  std::vector<float> got = out.to_vector<float>();
  for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]));
  // d sum / d row 2 (read once, weight 1): 3/r - 3 t (t0 + t1) / r^3, through the norm.
  Tensor weights = store.get("embedding_weights").value;
  std::vector<float> grad = ops::gradients(ops::sum(out), {weights})[0].to_vector<float>();
  CHECK(grad[4] == doctest::Approx(3 / r2 - 3 * 7 * 18 / (r2 * r2 * r2)));
  CHECK(grad[5] == doctest::Approx(3 / r2 - 3 * 11 * 18 / (r2 * r2 * r2)));
  // Row 0 is inside the norm: the plain mean's gradient, 1/2 from example 1.
  CHECK(grad[0] == doctest::Approx(0.5));
  CHECK(grad[1] == doctest::Approx(0.5));

  // A zero row stays zero and its gradient finite (TF's safe norm).
  Tensor zero_row = Tensor::from_vector<float>({0, 0, 6, 8}, {2, 2});
  zero_row.set_requires_grad(true);
  Tensor clipped = clip_rows_by_norm(zero_row, 5.0);
  CHECK(clipped.to_vector<float>() == std::vector<float>{0, 0, 3, 4});
  std::vector<float> zero_grad =
      ops::gradients(ops::sum(clipped), {zero_row})[0].to_vector<float>();
  CHECK(zero_grad[0] == 1.0f);
  CHECK(zero_grad[1] == 1.0f);
  CHECK(contains(error_message<InvalidArgumentError>([] {
                   embedding_column(categorical_column_with_identity("aaa", 3), 2,
                                    {.max_norm = -1.0});
                 }),
                 "max_norm"));
}
