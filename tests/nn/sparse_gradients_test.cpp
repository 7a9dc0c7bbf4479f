// Row-sparse gradients (TF's IndexedSlices, tensorflow/python/framework/indexed_slices.py) and
// the optimizers' sparse updates (tensorflow/python/training/optimizer.py _apply_sparse and
// _apply_sparse_duplicate_indices; adagrad.py, ftrl.py, gradient_descent.py, momentum.py,
// adam.py, and LazyAdamOptimizer): gather's gradient as slices, densified on demand; an
// embedding model trained with sparse updates equals the same model trained dense where the
// optimizer makes them equal (SGD, Adagrad, Ftrl from zero weights, Adam), bit for bit; rows
// not read keep their values, and lazy Adam and Momentum leave their slots alone.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "nn/layers_dense.h"
#include "nn/layers_embedding.h"
#include "nn/nn.h"
#include "nn/row_update.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/indexed_slices.h"
#include "ops/math.h"

using namespace est;
using namespace est::nn;

namespace {

Tensor ids(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector<int64_t>(values, shape);
}

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// The rows of `t` ([rows, width]) as vectors.
std::vector<float> row(const Tensor& t, int64_t r) {
  std::vector<float> all = floats(t);
  const int64_t width = t.numel() / t.dim(0);
  return {all.begin() + r * width, all.begin() + (r + 1) * width};
}

}  // namespace

TEST_CASE("gather's gradient is row-sparse, and densifies to the dense gradient bit for bit") {
  VariableStore store;
  Tensor table = store.create(
      "table", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2}), true);
  Tensor weights = Tensor::from_vector<float>({0.5f, -1.f, 2.f, 0.25f, 3.f, 1.5f}, {3, 2});
  Tensor loss = ops::sum(ops::mul(ops::gather(table, ids({3, 1, 3}, {3})), weights));
  std::vector<ops::SourceGradient> sparse = ops::row_sparse_gradients(loss, {table});
  REQUIRE(sparse[0].row_sparse());
  CHECK_FALSE(sparse[0].dense.defined());
  CHECK(sparse[0].rows.indices.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 3});
  CHECK(floats(sparse[0].rows.values) == floats(weights));
  CHECK(sparse[0].rows.dense_shape == Shape{5, 2});
  CHECK(sparse[0].rows.nbytes() == 3 * 8 + 6 * 4);
  Tensor dense = ops::gradients(loss, {table})[0];
  CHECK(floats(sparse[0].to_dense()) == floats(dense));
  CHECK(floats(dense) == std::vector<float>{0, 0, 2, 0.25f, 0, 0, 3.5f, 0.5f, 0, 0});

  // Duplicates summed in their order, each row once in the order of its first appearance.
  ops::IndexedSlices summed = ops::sum_duplicates(sparse[0].rows);
  CHECK(summed.indices.to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  CHECK(floats(summed.values) == std::vector<float>{3.5f, 0.5f, 2, 0.25f});
  CHECK(floats(ops::to_dense(summed)) == floats(dense));
}

TEST_CASE("a variable read by rows and also densely gets the dense sum; int32 ids and 3-D reads") {
  VariableStore store;
  Tensor table =
      store.create("table", Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}), true);
  Tensor read = ops::gather(table, Tensor::from_vector<int32_t>({2, 0, 2, 2}, {2, 2}));  // [2,2,2]
  Tensor loss = ops::add(ops::sum(ops::mul(read, read)), ops::sum(ops::mul(table, table)));
  std::vector<ops::SourceGradient> mixed = ops::row_sparse_gradients(loss, {table});
  CHECK_FALSE(mixed[0].row_sparse());
  CHECK(mixed[0].dense.to_vector<double>() == ops::gradients(loss, {table})[0].to_vector<double>());

  Tensor only_rows = ops::sum(ops::mul(read, read));
  std::vector<ops::SourceGradient> rows = ops::row_sparse_gradients(only_rows, {table});
  REQUIRE(rows[0].row_sparse());
  CHECK(rows[0].rows.indices.to_vector<int64_t>() == std::vector<int64_t>{2, 0, 2, 2});
  CHECK(rows[0].rows.values.shape() == Shape{4, 2});
  CHECK(rows[0].to_dense().to_vector<double>() ==
        ops::gradients(only_rows, {table})[0].to_vector<double>());
  // A source the loss does not read: zeros, dense.
  Tensor other = store.create("other", Tensor::zeros({2}, DType::kF64), true);
  CHECK(ops::row_sparse_gradients(only_rows, {other})[0].dense.to_vector<double>() ==
        std::vector<double>{0, 0});
}

TEST_CASE("IndexedSlices reject bad indices and shapes with a clear error") {
  CHECK_THROWS_AS(ops::make_indexed_slices(ids({0, 5}, {2}), Tensor::zeros({2, 3}), {5, 3}),
                  InvalidArgumentError);
  CHECK_THROWS_AS(ops::make_indexed_slices(ids({0, 1}, {2}), Tensor::zeros({2, 2}), {5, 3}),
                  InvalidArgumentError);
  CHECK_THROWS_AS(
      ops::make_indexed_slices(Tensor::from_vector<int32_t>({0}), Tensor::zeros({1, 3}), {5, 3}),
      InvalidArgumentError);
  ops::IndexedSlices ok = ops::make_indexed_slices(ids({4, 0}, {2}), Tensor::ones({2, 3}), {5, 3});
  CHECK(ok.row_elements() == 3);
}

namespace {

// An embedding model: 40 ids x 4, a dense layer to one output, squared error; each step reads
// a few ids (some repeated) of batch (first_batch + step) % 4. `densify`: the same steps with
// every gradient made dense before the update.
void train(VariableStore& store, const std::function<optim::Optimizer()>& make, bool densify,
           int steps, const Initializer& table_init = random_uniform(-0.5, 0.5),
           int first_batch = 0) {
  const std::vector<std::vector<int64_t>> batches{
      {1, 5, 5, 7, 2, 9}, {5, 11, 1, 1, 30, 2}, {7, 7, 7, 3, 3, 12}, {30, 31, 1, 5, 2, 2}};
  for (int step = 0; step < steps; ++step) {
    ModelContext ctx(store, Mode::kTrain, 7);
    const auto& batch = batches[static_cast<size_t>(first_batch + step) % batches.size()];
    Tensor x = embedding(ctx, ids(batch, {3, 2}),
                         {.input_dim = 40, .output_dim = 4, .embeddings_initializer = table_init});
    Tensor y = dense(ctx, ops::reshape(x, {3, 8}), {.units = 1});
    Tensor labels = Tensor::from_vector<float>({1.f, -0.5f, 2.f}, {3, 1});
    Tensor loss = ops::mean(ops::square(ops::sub(y, labels)));
    TrainOp op = make().minimize(loss, ctx);
    std::vector<GradAndVar> grads = op.compute_gradients();
    bool any_sparse = false;
    for (GradAndVar& entry : grads) {
      any_sparse = any_sparse || entry.sparse_gradient.defined();
      if (densify) entry.densify();
    }
    REQUIRE(any_sparse);  // the table's gradient came row-sparse
    op.apply(std::move(grads));
  }
}

void check_same_stores(VariableStore& a, VariableStore& b, bool bitwise = true) {
  std::vector<std::string> names = a.names();
  CHECK(names == b.names());
  for (const std::string& name : names) {
    INFO(name);
    const std::vector<double> va = a.get(name).value.to_vector<double>();
    const std::vector<double> vb = b.get(name).value.to_vector<double>();
    REQUIRE(va.size() == vb.size());
    if (bitwise) {
      CHECK(va == vb);
      continue;
    }
    for (size_t i = 0; i < va.size(); ++i)
      CHECK(va[i] == doctest::Approx(vb[i]).epsilon(1e-6));  // float32 rounding
  }
}

}  // namespace

TEST_CASE("sparse updates equal dense ones where the optimizer makes them equal") {
  struct Case {
    const char* name;
    std::function<optim::Optimizer()> make;
    Initializer table_init;
    bool bitwise = true;
  };
  const std::vector<Case> cases{
      // SGD's kernel (add_scaled) contracts v + g * a into a fused multiply-add in its vector
      // body: the few elements of the rows may take its scalar path, one rounding apart.
      {"sgd", [] { return optim::sgd(0.1); }, random_uniform(-0.5, 0.5), false},
      {"adagrad", [] { return optim::adagrad(0.1); }, random_uniform(-0.5, 0.5)},
      // Ftrl recomputes every weight from its linear term: rows the dense update sees with a
      // zero gradient stay where they were only if they start where linear = 0 puts them.
      {"ftrl",
       [] {
         return optim::ftrl(
             0.1, {.l1_regularization_strength = 0.01, .l2_regularization_strength = 0.01});
       },
       zeros()},
      {"adam (TF1: every row decays)", [] { return optim::adam(0.01); }, random_uniform(-0.5, 0.5)},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name) {
      VariableStore sparse, dense;
      train(sparse, c.make, false, 6, c.table_init);
      train(dense, c.make, true, 6, c.table_init);
      check_same_stores(sparse, dense, c.bitwise);
    }
  }
}

TEST_CASE("rows the steps never read keep their values and slots exactly") {
  const std::vector<int64_t> unread{0, 4, 13, 39};
  for (const char* which : {"sgd", "adagrad", "ftrl", "momentum", "lazy_adam"}) {
    SUBCASE(which) {
      const std::string name = which;
      std::function<optim::Optimizer()> make = [&]() {
        if (name == "sgd") return optim::sgd(0.1);
        if (name == "adagrad") return optim::adagrad(0.1);
        if (name == "ftrl") return optim::ftrl(0.1);
        if (name == "momentum") return optim::momentum(0.1, 0.9);
        return optim::lazy_adam(0.01);
      };
      VariableStore store;
      train(store, make, false, 1);
      Tensor table = store.get("embedding/embeddings").value;
      const Tensor before = table.clone();
      std::vector<std::string> slot_names;
      for (const std::string& n : store.names())
        if (n.rfind("embedding/embeddings/", 0) == 0) slot_names.push_back(n);
      REQUIRE(slot_names.empty() == (name == "sgd"));
      std::vector<Tensor> slots_before;
      for (const std::string& n : slot_names) slots_before.push_back(store.get(n).value.clone());
      train(store, make, false, 5);
      for (int64_t r : unread) {
        CHECK(row(table, r) == row(before, r));
        for (size_t s = 0; s < slot_names.size(); ++s)
          CHECK(row(store.get(slot_names[s]).value, r) == row(slots_before[s], r));
      }
      // A row the steps read did move.
      CHECK(row(table, 5) != row(before, 5));
    }
  }
}

TEST_CASE("lazy Adam: the read rows follow Adam's formula; dense Adam decays every row's slots") {
  VariableStore lazy_store, dense_store;
  train(
      lazy_store, [] { return optim::lazy_adam(0.01); }, false, 2);
  train(
      dense_store, [] { return optim::adam(0.01); }, false, 2);
  // Step 2 reads row 11, not row 7: Adam's m for row 7 decayed by beta1 in the dense update
  // only; row 0 was never read and stays zero in both.
  Tensor lazy_m = lazy_store.get("embedding/embeddings/Adam").value;
  Tensor dense_m = dense_store.get("embedding/embeddings/Adam").value;
  CHECK(row(lazy_m, 0) == std::vector<float>(4, 0.f));
  CHECK(row(dense_m, 0) == std::vector<float>(4, 0.f));
  std::vector<float> lazy7 = row(lazy_m, 7), dense7 = row(dense_m, 7);
  for (size_t c = 0; c < 4; ++c) CHECK(dense7[c] == doctest::Approx(lazy7[c] * 0.9).epsilon(1e-6));
  // Rows both steps read (5, 1, 2) have the same m in both.
  for (int64_t r : {1, 2, 5}) CHECK(row(lazy_m, r) == row(dense_m, r));
}

TEST_CASE("momentum's sparse update moves the read rows as the dense formula moves them") {
  // One step from zero slots: accum = g, var -= lr * g on the rows read, as dense.
  VariableStore sparse, dense;
  auto make = [] { return optim::momentum(0.1, 0.9); };
  train(sparse, make, false, 1);
  train(dense, make, true, 1);
  check_same_stores(sparse, dense);
  const Tensor after_first = sparse.get("embedding/embeddings").value.clone();
  // A step that does not read row 7: the dense update spends row 7's velocity, the sparse one
  // (TF's sparse_apply_momentum) leaves the row and its accumulator alone.
  const Initializer init = random_uniform(-0.5, 0.5);
  train(sparse, make, false, 1, init, 1);
  train(dense, make, true, 1, init, 1);
  CHECK(row(sparse.get("embedding/embeddings").value, 7) == row(after_first, 7));
  CHECK(row(dense.get("embedding/embeddings").value, 7) != row(after_first, 7));
  std::vector<float> kept = row(sparse.get("embedding/embeddings/Momentum").value, 7);
  std::vector<float> decayed = row(dense.get("embedding/embeddings/Momentum").value, 7);
  for (size_t c = 0; c < 4; ++c) {
    CHECK(kept[c] != 0.f);
    CHECK(decayed[c] == doctest::Approx(0.9 * kept[c]).epsilon(1e-6));
  }
  // Rows read by both steps moved alike.
  for (int64_t r : {1, 2, 5})
    CHECK(row(sparse.get("embedding/embeddings").value, r) ==
          row(dense.get("embedding/embeddings").value, r));
}

TEST_CASE("a bfloat16 table's row-sparse gradient is densified and applied as the dense one") {
  VariableStore store;
  Tensor table = store.create(
      "table", ops::cast(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), DType::kBF16),
      true);
  Tensor loss = ops::sum(ops::cast(ops::gather(table, ids({2, 2}, {2})), DType::kF32));
  std::vector<ops::SourceGradient> grads = ops::row_sparse_gradients(loss, {table});
  REQUIRE(grads[0].row_sparse());
  GradAndVar entry{"table", Tensor(), table};
  entry.sparse_gradient = grads[0].rows;
  optim::adagrad(0.5).apply_gradients(store, {entry});
  const std::vector<float> after = table.to_vector<float>();
  CHECK(after[0] == 1.f);  // row 0 not read: Adagrad's zero-gradient step leaves it
  CHECK(after[4] < 5.f);   // row 2 read twice
}
