// The tutorial CNN (cnn_model.h) as an Estimator model on Fashion-MNIST, shared by the examples
// that train it with train_and_evaluate (mnist_estimator, multi_worker, ps_job) so that each
// of them shows only what it is about: its flags, strategy and cluster. Kept apart from
// cnn_model.h, which the hand-written loops and the benchmarks include without the Estimator.
#pragma once

#include <est/est.h>

#include "examples/cnn_model.h"

namespace examples {

// The tutorial's model_fn: features["image"] [batch, 28, 28, 1], labels [batch] (int64 classes);
// predicts "logits" and "classes"; the mean cross-entropy loss, "accuracy" in evaluation, and
// SGD at params "learning_rate".
inline est::EstimatorSpec cnn_model_fn(const est::Features& features, const est::Tensor& labels,
                                       est::ModeKeys mode, est::ModelContext& ctx) {
  using namespace est::nn;
  est::Tensor logits = tutorial_cnn(ctx, features.at("image"));  // [batch, 10]
  est::Tensor classes = argmax(logits, 1);                       // [batch]
  if (mode == est::ModeKeys::kPredict)
    return est::EstimatorSpec::predict({{"logits", logits}, {"classes", classes}});
  est::Tensor loss = sparse_softmax_cross_entropy(labels, logits);
  if (mode == est::ModeKeys::kEval)
    return est::EstimatorSpec::eval(loss, {{"accuracy", est::metrics::accuracy(labels, classes)}});
  double learning_rate = est::params(ctx).get_double("learning_rate");
  return est::EstimatorSpec::train(loss, est::optim::sgd(learning_rate).minimize(loss, ctx));
}

// The tutorial's input_fn for a global batch of `batch_size`: the training set shuffled and
// repeated, or the test set in batches of 100, scaled to [0, 1]; under a strategy (`ctx` set),
// this input pipeline's shard, batched per replica.
inline est::data::Dataset fashion_mnist_input_fn(est::ModeKeys mode, const est::InputContext* ctx,
                                                 int64_t batch_size) {
  // 100, not 1000: a batch of 1000 held 120 MiB of activations (the first layer's output alone
  // is 87 MiB), more than half the cached data, and evaluated no faster (bench/README.md,
  // "Memory of the tutorial program").
  constexpr int64_t kEvalBatchSize = 100;
  constexpr uint64_t kShuffleSeed = 42;
  bool training = mode == est::ModeKeys::kTrain;
  auto ds = est::data::fashion_mnist(training ? "train" : "test");
  int64_t batch = training ? batch_size : kEvalBatchSize;
  if (ctx) {
    ds = ds.shard(ctx->num_input_pipelines, ctx->input_pipeline_id);
    batch = ctx->get_per_replica_batch_size(batch);
  }
  ds = ds.map(est::data::scale).cache();
  if (training) ds = ds.shuffle(10000, kShuffleSeed).repeat();
  return ds.batch(batch).prefetch(2);
}

}  // namespace examples
