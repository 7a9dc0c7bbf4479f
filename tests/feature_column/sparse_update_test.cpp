// The feature columns' weights get row-sparse gradients (TF's IndexedSlices from
// safe_embedding_lookup_sparse's gather, tensorflow/python/ops/embedding_ops.py): the linear
// model's per-column weights and an embedding column's table. A wide-and-deep style step
// trained with sparse updates equals the same step trained with every gradient densified
// (Ftrl on the linear part, as TF's canned linear estimators use it, Adagrad on the
// embeddings), bit for bit, and buckets no example hashed to keep their weights and slots.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "feature_column/feature_column.h"
#include "feature_column/linear.h"
#include "nn/nn.h"
#include "ops/math.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::sparse_numbers;

namespace {

// Two examples per step, ids in [0, 50) for the embedding and the linear weights.
Features step_features(int step) {
  std::vector<int64_t> ids{(7 * step) % 50, (7 * step + 3) % 50, (11 * step + 1) % 50,
                           (7 * step) % 50};
  return {{"ids", sparse_numbers<int64_t>({0, 0, 0, 1, 1, 0, 1, 1}, ids, {2, 2})}};
}

// Runs `steps` steps of linear_model + embedding_column -> dense; returns nothing, leaves the
// variables in `store`. `densify`: every gradient made dense before the update.
void train(nn::VariableStore& store, bool densify, int steps, bool* saw_sparse = nullptr) {
  auto ids = categorical_column_with_identity("ids", 50);
  auto embedded = embedding_column(ids, 3, {.combiner = Combiner::kSqrtn});
  for (int step = 0; step < steps; ++step) {
    nn::ModelContext ctx(store, nn::Mode::kTrain, 3);
    Features features = step_features(step);
    Tensor wide = linear_model(features, {ids}, ctx);
    Tensor deep = nn::dense(ctx, input_layer(features, {embedded}, ctx), {.units = 1});
    Tensor labels = Tensor::from_vector<float>({1.f, 0.f}, {2, 1});
    Tensor loss = nn::sigmoid_cross_entropy(labels, ops::add(wide, deep));
    std::vector<nn::GradAndVar> grads = nn::optim::sgd(0.0).minimize(loss, ctx).compute_gradients();
    std::vector<nn::GradAndVar> linear, rest;
    for (nn::GradAndVar& entry : grads) {
      if (saw_sparse && entry.sparse_gradient.defined()) *saw_sparse = true;
      if (densify) entry.densify();
      (entry.name.rfind("linear_model/", 0) == 0 ? linear : rest).push_back(std::move(entry));
    }
    nn::optim::ftrl(0.5, {.l1_regularization_strength = 0.001}).apply_gradients(store, linear);
    nn::optim::adagrad(0.3).apply_gradients(store, rest);
  }
}

}  // namespace

TEST_CASE("feature columns: linear and embedding weights get row-sparse gradients") {
  nn::VariableStore store;
  nn::ModelContext ctx(store, nn::Mode::kTrain, 3);
  auto ids = categorical_column_with_identity("ids", 50);
  Features features = step_features(1);  // ids 7, 10, 12, 7
  Tensor wide = linear_model(features, {ids}, ctx);
  Tensor deep = input_layer(features, {embedding_column(ids, 3)}, ctx);
  Tensor loss = ops::add(ops::sum(wide), ops::sum(deep));
  std::vector<nn::GradAndVar> grads = nn::optim::sgd(0.1).minimize(loss, ctx).compute_gradients();
  int sparse = 0;
  for (const nn::GradAndVar& entry : grads) {
    CAPTURE(entry.name);
    if (entry.name == "linear_model/ids/weights" ||
        entry.name == "input_layer/ids_embedding/embedding_weights") {
      REQUIRE(entry.sparse_gradient.defined());
      CHECK_FALSE(entry.gradient.defined());
      std::vector<int64_t> rows = entry.sparse_gradient.indices.to_vector<int64_t>();
      std::sort(rows.begin(), rows.end());
      CHECK(rows == std::vector<int64_t>{7, 7, 10, 12});
      CHECK(entry.sparse_gradient.dense_shape == entry.variable.shape());
      // Densified on demand: the dense gradient of the sum has 2 at row 7 (the linear weights).
      if (entry.name == "linear_model/ids/weights") CHECK(entry.dense_gradient().at({7, 0}) == 2.0);
      ++sparse;
    } else {
      CHECK(entry.gradient.defined());  // the bias
    }
  }
  CHECK(sparse == 2);
}

TEST_CASE("feature columns: Ftrl and Adagrad sparse updates equal dense ones, bit for bit") {
  nn::VariableStore sparse_store, dense_store;
  bool saw_sparse = false;
  train(sparse_store, false, 8, &saw_sparse);
  train(dense_store, true, 8);
  CHECK(saw_sparse);
  REQUIRE(sparse_store.names() == dense_store.names());
  for (const std::string& name : sparse_store.names()) {
    CAPTURE(name);
    CHECK(sparse_store.get(name).value.to_vector<double>() ==
          dense_store.get(name).value.to_vector<double>());
  }
  // Bucket 48 was never hit (ids are 7s, 7s + 3 and 11s + 1 mod 50 for s < 8): its linear
  // weight stays 0, its Ftrl accumulator at 0.1, its embedding row where it started.
  Tensor weights = sparse_store.get("linear_model/ids/weights").value;
  CHECK(weights.at({48, 0}) == 0.0);
  CHECK(weights.at({7, 0}) != 0.0);
  CHECK(sparse_store.get("linear_model/ids/weights/Ftrl").value.at({48, 0}) ==
        doctest::Approx(0.1));
  nn::VariableStore fresh;  // the variables as the first step created them
  nn::ModelContext ctx(fresh, nn::Mode::kTrain, 3);
  auto ids = categorical_column_with_identity("ids", 50);
  linear_model(step_features(0), {ids}, ctx);
  input_layer(step_features(0), {embedding_column(ids, 3, {.combiner = Combiner::kSqrtn})}, ctx);
  Tensor start = fresh.get("input_layer/ids_embedding/embedding_weights").value;
  Tensor end = sparse_store.get("input_layer/ids_embedding/embedding_weights").value;
  for (int64_t c = 0; c < 3; ++c) CHECK(end.at({48, c}) == start.at({48, c}));
}
