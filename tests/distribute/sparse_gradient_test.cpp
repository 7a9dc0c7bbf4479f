// Row-sparse gradients under MirroredStrategy (2 CPU replicas): the all-reduce gathers every
// replica's rows, or densifies, whichever moves fewer bytes (distribute/sparse_all_reduce.h;
// TF gathers IndexedSlices in cross_device_ops.py), and training through either path equals
// training with every gradient densified first and the unreplicated run on the global batch.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "distribute/distribute.h"
#include "distribute/sparse_all_reduce.h"
#include "nn/nn.h"
#include "tests/distribute/training_util.h"

using namespace est;
using namespace est::nn;
using namespace est::distribute;
using namespace est::testing;

namespace {

// Ids [batch, 2] into a table of `vocabulary` rows x 4, a dense layer to 3 classes.
Tensor embedding_model(ModelContext& ctx, const Tensor& ids, int64_t vocabulary) {
  Tensor x = embedding(ctx, ids,
                       {.input_dim = vocabulary,
                        .output_dim = 4,
                        .embeddings_initializer = random_uniform(-0.5, 0.5)});
  return dense(ctx, ops::reshape(x, {ids.dim(0), 8}), {.units = 3});
}

data::Element id_batch(int64_t vocabulary, int step) {
  std::vector<int64_t> ids, labels;
  for (int64_t i = 0; i < 8; ++i) {
    ids.push_back((i * 7 + step * 3) % 5);  // repeats within and across replicas
    ids.push_back((i * 13 + step * 11) % vocabulary);
    labels.push_back((i + step) % 3);
  }
  return data::Element({{"x", Tensor::from_vector<int64_t>(ids, {8, 2})}},
                       Tensor::from_vector<int64_t>(labels));
}

enum class Path { kSparse, kDensified };

// Trains `steps` steps under a 2-replica mirrored strategy; `seen_rows` gets, per step, the
// table gradient's row count after the all-reduce (0 when it was densified).
VariableStore& train(MirroredStrategy& strategy, int64_t vocabulary, Path path, int steps,
                     std::vector<int64_t>& seen_rows) {
  for (int step = 0; step < steps; ++step) {
    std::vector<int64_t> rows(2, -1);
    strategy.run(
        [&](ReplicaContext& replica) {
          ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor logits = embedding_model(ctx, replica.input().features.at("x"), vocabulary);
          Tensor loss = sparse_softmax_cross_entropy(replica.input().labels, logits);
          TrainOp train_op = optim::adagrad(0.5).minimize(loss, ctx);
          std::vector<GradAndVar> grads = train_op.compute_gradients();
          for (GradAndVar& entry : grads)
            if (path == Path::kDensified) entry.densify();
          replica.all_reduce_gradients(grads);
          for (const GradAndVar& entry : grads)
            if (entry.name == "embedding/embeddings")
              rows[static_cast<size_t>(replica.replica_id())] = entry.sparse_gradient.num_rows();
          // The loss is each replica's mean: scale the sum to the global batch's mean.
          for (GradAndVar& entry : grads) {
            if (entry.sparse_gradient.defined())
              entry.sparse_gradient = ops::scale_slices(entry.sparse_gradient, 0.5);
            else
              entry.gradient = ops::mul(entry.gradient, 0.5);
          }
          optim::adagrad(0.5).apply_gradients(ctx, grads,
                                              {.experimental_aggregate_gradients = false});
          return loss;
        },
        split_batch(id_batch(vocabulary, step), 2));
    CHECK(rows[0] == rows[1]);
    seen_rows.push_back(rows[0]);
  }
  return strategy.store(0);
}

void check_close(VariableStore& a, VariableStore& b) {
  REQUIRE(a.names() == b.names());
  for (const std::string& name : a.names()) {
    CAPTURE(name);
    CHECK(max_scaled_difference(a.get(name).value, b.get(name).value) <= 1e-6);
  }
}

}  // namespace

TEST_CASE("distribute: gathering a row-sparse gradient is chosen when it moves fewer bytes") {
  // 16 rows of 4 floats gathered: 16 * (8 + 16) = 384 bytes against a 1000 x 4 table's 16000.
  CHECK(gather_moves_fewer_bytes(16, 4, 4000, 4));
  // Against a 5 x 4 table (80 bytes) the dense all-reduce is cheaper.
  CHECK_FALSE(gather_moves_fewer_bytes(16, 4, 20, 4));
  CHECK_FALSE(gather_moves_fewer_bytes(4, 1, 4, 8));  // equal costs: dense
}

TEST_CASE("distribute: mirrored training with row-sparse gradients equals the densified path") {
  for (int64_t vocabulary : {int64_t{1000}, int64_t{5}}) {
    CAPTURE(vocabulary);
    std::vector<int64_t> sparse_rows, dense_rows;
    MirroredStrategy sparse({"/cpu:0", "/cpu:1"}, std::make_shared<ReductionToOneDevice>(), kSeed);
    MirroredStrategy dense({"/cpu:0", "/cpu:1"}, std::make_shared<ReductionToOneDevice>(), kSeed);
    VariableStore& a = train(sparse, vocabulary, Path::kSparse, 4, sparse_rows);
    VariableStore& b = train(dense, vocabulary, Path::kDensified, 4, dense_rows);
    check_close(a, b);
    // Each replica's 8 ids were gathered into 16 rows for the large table; the small one was
    // reduced dense.
    for (int64_t rows : sparse_rows) CHECK(rows == (vocabulary == 1000 ? 16 : 0));
    for (int64_t rows : dense_rows) CHECK(rows == 0);
    // Mirrored copies stay identical.
    for (const std::string& name : sparse.store(0).names())
      CHECK(sparse.store(0).get(name).value.to_vector<double>() ==
            sparse.store(1).get(name).value.to_vector<double>());
  }
}

TEST_CASE("distribute: run_train_op with a row-sparse gradient matches one replica on the batch") {
  MirroredStrategy strategy({"/cpu:0", "/cpu:1"}, std::make_shared<ReductionToOneDevice>(), kSeed);
  VariableStore reference_store;
  ModelContext reference(reference_store, Mode::kTrain, kSeed);
  for (int step = 0; step < 4; ++step) {
    data::Element batch = id_batch(1000, step);
    reference.begin_call();
    Tensor logits = embedding_model(reference, batch.features.at("x"), 1000);
    optim::ftrl(0.3).minimize(sparse_softmax_cross_entropy(batch.labels, logits), reference).run();
    strategy.run(
        [&](ReplicaContext& replica) {
          ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor replica_logits = embedding_model(ctx, replica.input().features.at("x"), 1000);
          Tensor loss = sparse_softmax_cross_entropy(replica.input().labels, replica_logits);
          replica.run_train_op(optim::ftrl(0.3).minimize(loss, ctx), 0.5);
          return loss;
        },
        split_batch(batch, 2));
  }
  check_close(strategy.store(0), reference_store);
  CHECK(read_global_step(strategy.store(0)) == 4);
}
