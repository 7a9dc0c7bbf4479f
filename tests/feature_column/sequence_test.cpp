// Sequence feature columns and sequence_features, against the expected values of
// tensorflow/python/feature_column/sequence_feature_column_test.py and Keras'
// sequence_feature_column_test.py (lookups per step, sequence lengths with empty rows,
// multi-dimensional numeric steps, column order and variable names, the errors for
// non-sequence columns), and the input built from parsed Examples and SequenceExamples.
#include <doctest/doctest.h>

#include "data/example.h"
#include "data/sequence_example.h"
#include "feature_column/feature_column.h"
#include "ops/autograd.h"
#include "ops/math.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;
using est::testing::sparse_numbers;

namespace {

// example 0 ids [2], example 1 [0, 1], example 2 [], example 3 [1].
Tensor four_examples() {
  return sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1, 3, 0}, {2, 0, 1, 1}, {4, 2});
}

nn::Initializer values(std::vector<float> v) {
  return [v](const Shape& shape, DType, ops::Generator&) { return Tensor::from_vector(v, shape); };
}

}  // namespace

TEST_CASE("sequence embedding_column: one embedding per step, lengths [1, 2, 0, 1]") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto column = embedding_column(sequence_categorical_column_with_identity("aaa", 3), 2,
                                 {.initializer = values({1, 2, 3, 5, 7, 11})});
  SequenceDenseTensor out = column->sequence_dense_tensor({{"aaa", four_examples()}}, &context);
  CHECK(out.dense.shape() == Shape{4, 2, 2});
  CHECK(out.dense.to_vector<float>() ==
        std::vector<float>{7, 11, 0, 0, 1, 2, 3, 5, 0, 0, 0, 0, 3, 5, 0, 0});
  CHECK(out.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0, 1});
  // Gradients reach the rows of the ids looked up, one per step.
  Tensor weights = store.get("embedding_weights").value;
  Tensor grad = ops::gradients(ops::sum(out.dense), {weights})[0];
  CHECK(grad.to_vector<float>() == std::vector<float>{1, 1, 2, 2, 1, 1});
}

TEST_CASE("sequence indicator_column: one multi-hot row per step") {
  auto column = indicator_column(sequence_categorical_column_with_identity("aaa", 3));
  SequenceDenseTensor out = column->sequence_dense_tensor({{"aaa", four_examples()}}, nullptr);
  CHECK(out.dense.shape() == Shape{4, 2, 3});
  CHECK(out.dense.to_vector<float>() ==
        std::vector<float>{0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0});
  CHECK(out.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0, 1});
  // Hash buckets and vocabularies as their non-sequence columns give them.
  auto words = indicator_column(sequence_categorical_column_with_vocabulary_list(
      "w", std::vector<std::string>{"a", "b"}, {.num_oov_buckets = 1}));
  Features strings{{"w", est::testing::sparse_strings({0, 0, 0, 1}, {"b", "zzz"}, {1, 2})}};
  CHECK(words->sequence_dense_tensor(strings, nullptr).dense.to_vector<float>() ==
        std::vector<float>{0, 1, 0, 0, 0, 1});
  auto hashed = sequence_categorical_column_with_hash_bucket("w", 10);
  auto plain = categorical_column_with_hash_bucket("w", 10);
  CHECK(hashed->sparse_tensors(strings).ids.values().to_vector<int64_t>() ==
        plain->sparse_tensors(strings).ids.values().to_vector<int64_t>());
  CHECK(hashed->sparse_tensors(strings).ids.shape() == Shape{1, 2, 1});
}

TEST_CASE("sequence_numeric_column: steps of its shape, padded with default_value") {
  // example 0 values [[0, 1, 2], [3, 4, 5]], example 1 [[10, 11, 12]]; shape (3,).
  Tensor input = sparse_numbers<float>({0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 0, 1, 1, 1, 2},
                                       {0, 1, 2, 3, 4, 5, 10, 11, 12}, {2, 6});
  auto column = sequence_numeric_column("aaa", {.shape = {3}});
  CHECK(column->name() == "aaa");
  SequenceDenseTensor out = column->sequence_dense_tensor({{"aaa", input}}, nullptr);
  CHECK(out.dense.shape() == Shape{2, 2, 3});
  CHECK(out.dense.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12, 0, 0, 0});
  CHECK(out.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  // Lengths with empty rows: [], [0, 1], [2], [], [3], [] give [0, 2, 1, 0, 1, 0].
  Tensor sparse_rows = sparse_numbers<float>({1, 0, 1, 1, 2, 0, 4, 0}, {0, 1, 2, 3}, {6, 2});
  auto scalar = sequence_numeric_column("aaa", {.default_value = -1});
  SequenceDenseTensor rows = scalar->sequence_dense_tensor({{"aaa", sparse_rows}}, nullptr);
  CHECK(rows.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 1, 0, 1, 0});
  CHECK(rows.dense.shape() == Shape{6, 2, 1});
  CHECK(rows.dense.to_vector<float>()[0] == -1);
  // A normalizer applies to the values present.
  auto scaled = sequence_numeric_column(
      "aaa", {.shape = {3}, .normalizer_fn = [](const Tensor& x) { return ops::mul(x, 2.0); }});
  CHECK(scaled->sequence_dense_tensor({{"aaa", input}}, nullptr).dense.to_vector<float>()[7] == 22);
  // Values that are not whole steps, and dense input, are errors naming the column.
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   sequence_numeric_column("aaa", {.shape = {4}})
                       ->sequence_dense_tensor({{"aaa", input}}, nullptr);
                 }),
                 "sequence_numeric_column 'aaa': the padded feature has 6 values per example"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   column->sequence_dense_tensor({{"aaa", Tensor::zeros({2, 3})}}, nullptr);
                 }),
                 "the feature is dense"));
}

TEST_CASE("sequence_features sorts columns, concatenates steps, names variables as TF") {
  // a: example 0 ids [2], example 1 [0, 1]; b: [1], [2, 0].
  Features features{{"aaa", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1}, {2, 0, 1}, {2, 2})},
                    {"bbb", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 1}, {1, 2, 0}, {2, 2})}};
  auto a = embedding_column(sequence_categorical_column_with_identity("aaa", 3), 2,
                            {.initializer = values({1, 2, 3, 4, 5, 6})});
  auto b = embedding_column(sequence_categorical_column_with_identity("bbb", 3), 3,
                            {.initializer = values({11, 12, 13, 14, 15, 16, 17, 18, 19})});
  nn::VariableStore store;
  nn::ModelContext context(store);
  SequenceInput in = sequence_features(features, std::vector<ColumnPtr>{b, a}, context);
  CHECK(in.input.shape() == Shape{2, 2, 5});
  CHECK(in.input.to_vector<float>() == std::vector<float>{5, 6, 14, 15, 16, 0, 0, 0,  0,  0,  //
                                                          1, 2, 17, 18, 19, 3, 4, 11, 12, 13});
  CHECK(in.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(store.contains("sequence_features/aaa_embedding/embedding_weights"));
  CHECK(store.contains("sequence_features/bbb_embedding/embedding_weights"));

  // Numeric columns of shape (2, 2) flatten to 4 per step.
  Features numbers{{"n", sparse_numbers<float>({0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5,
                                                0, 6, 0, 7, 1, 0, 1, 1, 1, 2, 1, 3},
                                               {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13}, {2, 8})}};
  SequenceInput flat = sequence_features(
      numbers, std::vector<ColumnPtr>{sequence_numeric_column("n", {.shape = {2, 2}})}, context);
  CHECK(flat.input.to_vector<float>() ==
        std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 0, 0, 0, 0});
  CHECK(flat.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{2, 1});
}

TEST_CASE("sequence_features and input_layer reject the other kind of column, naming it") {
  nn::VariableStore store;
  nn::ModelContext context(store);
  Features features{{"aaa", four_examples()}, {"price", Tensor::zeros({4, 1})}};
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   sequence_features(features, std::vector<ColumnPtr>{numeric_column("price")},
                                     context);
                 }),
                 "feature column 'price' is not a sequence column"));
  auto plain = embedding_column(categorical_column_with_identity("aaa", 3), 2);
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { sequence_features(features, std::vector<ColumnPtr>{plain}, context); }),
                 "In embedding_column: aaa_embedding. categorical_column must be a sequence"));
  auto sequence = indicator_column(sequence_categorical_column_with_identity("aaa", 3));
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { input_layer(features, {sequence}, context); }),
      "In indicator_column: aaa_indicator. categorical_column must not be a sequence"));
  // Columns whose lengths differ cannot be concatenated.
  Features unequal{{"aaa", four_examples()},
                   {"bbb", sparse_numbers<float>({0, 0, 0, 1, 1, 0, 3, 0}, {1, 2, 3, 4}, {4, 2})}};
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   sequence_features(
                       unequal, std::vector<ColumnPtr>{sequence, sequence_numeric_column("bbb")},
                       context);
                 }),
                 "sequence lengths of column 'bbb'"));
}

TEST_CASE("sequence input from parsed Examples and SequenceExamples, with context") {
  // make_parse_example_spec gives VarLenFeatures; parse_example's [batch, values].
  auto tokens = embedding_column(sequence_categorical_column_with_identity("tokens", 4), 2,
                                 {.initializer = values({0, 0, 1, 1, 2, 2, 3, 3})});
  auto spec = make_parse_example_spec(std::vector<ColumnPtr>{tokens});
  REQUIRE(std::holds_alternative<data::VarLenFeature>(spec.at("tokens")));
  std::vector<int64_t> first{1, 2, 3}, second{3};
  std::vector<std::string> records{data::ExampleBuilder().add_int64s("tokens", first).serialize(),
                                   data::ExampleBuilder().add_int64s("tokens", second).serialize()};
  nn::VariableStore store;
  nn::ModelContext context(store);
  SequenceInput in = sequence_features(data::parse_example(records, spec),
                                       std::vector<ColumnPtr>{tokens}, context);
  CHECK(in.input.to_vector<float>() == std::vector<float>{1, 1, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0});
  CHECK(in.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{3, 1});

  // A SequenceExample's feature list parses to [batch, steps, values]: each step's ids are
  // combined (mean) into that step's embedding.
  std::string sequence =
      data::SequenceExampleBuilder().feature_list_int64s("tokens", {{1, 3}, {2}}).serialize();
  data::ParsedSequenceExamples parsed = data::parse_sequence_example(
      std::vector<std::string>{sequence}, {}, {{"tokens", data::VarLenFeature{DType::kI64}}});
  SequenceInput steps = sequence_features(parsed.sequence, std::vector<ColumnPtr>{tokens}, context);
  CHECK(steps.input.to_vector<float>() == std::vector<float>{2, 2, 2, 2});
  CHECK(steps.sequence_length.to_vector<int64_t>() == std::vector<int64_t>{2});
  // concatenate_context_input repeats the context at every step.
  Tensor with_context =
      concatenate_context_input(Tensor::from_vector<float>({9}, {1, 1}), steps.input);
  CHECK(with_context.shape() == Shape{1, 2, 3});
  CHECK(with_context.to_vector<float>() == std::vector<float>{2, 2, 9, 2, 2, 9});
}
