// PREDICT mode's dense forms (dense_lookup.cpp: ids from CategoricalColumn::dense_ids, then
// one_hot, gather and sums, what an export traces) against the sparse forms training uses,
// which the other files test against TF's outputs: indicator, embedding (each combiner, with
// and without max_norm) and linear columns over vocabulary (with OOV buckets and with a
// default), hash-bucket and identity columns give the same values, ignored values ("", -1),
// repeated ids and examples without ids included.
#include <doctest/doctest.h>

#include <cmath>

#include "data/element.h"
#include "feature_column/feature_column.h"

using namespace est;
using namespace est::feature_column;

namespace {

Features features() {
  return {{"color",
           data::string_tensor(
               {"red", "", "blue", "pink", "pink", "", "", "", "", "green", "red", "zzz"}, {4, 3})},
          {"day", Tensor::from_vector<int64_t>({1, -1, 9, 3, -1, -1, 0, 6}, {4, 2})}};
}

// Every variable of `store` set to values that differ per element (weights start at zeros).
void vary(nn::VariableStore& store) {
  for (const nn::Variable& variable : store.variables()) {
    Tensor value = variable.value;
    float* data = value.data<float>();
    for (int64_t i = 0; i < value.numel(); ++i) data[i] = std::sin(0.7f * float(i) + 0.3f);
  }
}

// `fn` in TRAIN mode (the sparse forms) and in PREDICT mode (the dense forms) on one store.
void check_same(const std::function<Tensor(nn::ModelContext&)>& fn) {
  nn::VariableStore store;
  nn::ModelContext train(store, nn::Mode::kTrain, 1);
  train.begin_call();
  fn(train);
  vary(store);
  train.begin_call();
  const std::vector<float> sparse = fn(train).detach().to_vector<float>();
  nn::ModelContext predict(store, nn::Mode::kPredict, 1);
  predict.begin_call();
  const std::vector<float> dense = fn(predict).to_vector<float>();
  REQUIRE(dense.size() == sparse.size());
  for (size_t i = 0; i < dense.size(); ++i)
    CHECK(dense[i] == doctest::Approx(sparse[i]).epsilon(1e-6));
}

}  // namespace

TEST_CASE("PREDICT mode's dense lookups give what the sparse forms give") {
  const Features raw = features();
  const std::vector<CategoricalColumnPtr> categorical{
      categorical_column_with_vocabulary_list(
          "color", std::vector<std::string>{"red", "green", "blue"}, {.num_oov_buckets = 2}),
      categorical_column_with_vocabulary_list(
          "color", std::vector<std::string>{"red", "green", "blue"}, {.default_value = 1}),
      categorical_column_with_vocabulary_list("color",
                                              std::vector<std::string>{"red", "green", "blue"}),
      categorical_column_with_hash_bucket("color", 4),
      categorical_column_with_identity("day", 7, 0)};
  for (const CategoricalColumnPtr& column : categorical) {
    CAPTURE(column->num_buckets());
    REQUIRE(column->dense_ids(raw).has_value());
    check_same(
        [&](nn::ModelContext& ctx) { return input_layer(raw, {indicator_column(column)}, ctx); });
    for (Combiner combiner : {Combiner::kMean, Combiner::kSqrtn, Combiner::kSum})
      for (std::optional<double> max_norm : {std::optional<double>(), std::optional<double>(0.6)})
        check_same([&](nn::ModelContext& ctx) {
          return input_layer(
              raw, {embedding_column(column, 3, {.combiner = combiner, .max_norm = max_norm})},
              ctx);
        });
    for (Combiner combiner : {Combiner::kMean, Combiner::kSqrtn, Combiner::kSum})
      check_same([&](nn::ModelContext& ctx) {
        return linear_model(raw, {column}, ctx, {.units = 2, .sparse_combiner = combiner});
      });
  }
}

TEST_CASE("dense ids: TF's ignore values give -1; a sparse feature has no dense form") {
  const Features raw = features();
  auto color = categorical_column_with_vocabulary_list(
      "color", std::vector<std::string>{"red", "green", "blue"}, {.num_oov_buckets = 2});
  const std::vector<int64_t> ids = color->dense_ids(raw)->to_vector<int64_t>();
  CHECK(ids[0] == 0);
  CHECK(ids[1] == -1);
  CHECK(ids[2] == 2);
  CHECK(ids[3] >= 3);
  CHECK(ids[3] == ids[4]);  // the same OOV bucket for the same value
  auto day = categorical_column_with_identity("day", 7, 0);
  CHECK(day->dense_ids(raw)->to_vector<int64_t>() ==
        std::vector<int64_t>{1, -1, 0, 3, -1, -1, 0, 6});
  const Tensor sparse = Tensor::sparse(Tensor::from_vector<int64_t>({0, 0}, {1, 2}),
                                       data::string_tensor({"red"}), {1, 1});
  CHECK_FALSE(color->dense_ids({{"color", sparse}}).has_value());
}
