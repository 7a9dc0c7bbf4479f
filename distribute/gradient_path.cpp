// The all-reduce GradientPath (MirroredStrategy, CentralStorageStrategy,
// MultiWorkerMirroredStrategy, OneDeviceStrategy): a training step's whole trip from the
// gradients to the update, in this file.
//
// Where is the gradient reduced? In AllReducePath::apply: the backward pass
// (train_op.compute_gradients), then ReplicaContext::sync_step, one collective that sums the
// gradients over every replica of every worker together with the batch-norm statistics (their
// mean) and the loss (its sum, for the log); or, with one replica per worker and a core to
// spare, apply_overlapped, which starts each 1 MiB bucket's sum across workers as soon as the
// backward pass completes it. Then update(): where the placement applies updates (every
// mirrored copy; replica 0 on central storage's shared copy) the statistics' mean and one call
// of the pure Optimizer::update (clipping by global norm included) at the store's global step,
// which this replica then advances; central storage's other replicas wait for it.
//
// What scales it? `gradient_scale`, the explicit factor that ReplicaContext::run_train_op
// passes down, multiplied into every gradient inside the same collective (the sum is
// scale x the sum of the replicas' gradients). The custom loop passes 1 (its loss is already
// divided by the global batch, TF2's way). The Estimator (estimator/replicas.cpp) passes
// loss_reduction_scale(train_op.loss_reduction(), num_replicas_in_sync), TF1's rule, decided
// below: tf.compat.v1's Optimizer._scale_loss (tensorflow/python/training/optimizer.py)
// multiplies the loss by 1/num_replicas_in_sync when distribute_lib's get_loss_reduction()
// says MEAN, which it says for every reduction but SUM (nn::is_mean_reduction; kNone too, since
// TF cannot tell how the user reduced the per-example losses). The reduction is the one
// minimize was given (MinimizeOptions::loss_reduction: the canned heads and Keras pass theirs),
// else the one a loss function recorded on the loss (nn::loss_reduction, as TF1's
// compute_weighted_loss records `_last_loss_reduction` on the graph,
// tensorflow/python/ops/losses/losses_impl.py). Gradients a step hands over itself
// (apply_gradients, gradient_transform: combine) are summed with scale 1; gradients the step
// summed itself go to apply_gradients with experimental_aggregate_gradients false and are
// not summed again.
#include "distribute/gradient_path.h"

#include <memory>
#include <optional>

#include "distribute/net/step_profile.h"
#include "distribute/strategy.h"
#include "nn/context_control.h"
#include "nn/train_op.h"
#include "ops/autograd.h"
#include "ops/copy.h"

namespace est::distribute {
namespace {

// A bucket of gradients starts its reduction across workers once it holds this many bytes.
constexpr size_t kOverlapBucketBytes = size_t{1} << 20;

class AllReducePath final : public GradientPath {
 public:
  std::string_view name() const override { return "all-reduce"; }

  void apply(ReplicaContext& replica, const nn::TrainOp& train_op, double gradient_scale,
             nn::ModelContext& ctx, Tensor* loss_sum) override {
    const Strategy& strategy = replica.strategy();
    if (strategy.num_local_replicas() == 1 && strategy.num_workers() > 1 &&
        strategy.overlaps_gradient_reduction()) {
      apply_overlapped(replica, train_op, gradient_scale, ctx, loss_sum);
      return;
    }
    note_replica_thread();
    std::vector<nn::GradAndVar> grads;
    {
      step_profile::Scope scope(step_profile::kBackward);
      grads = train_op.compute_gradients();
    }
    std::vector<nn::MovingAverageUpdate> updates =
        nn::ContextControl(ctx).take_moving_average_updates();
    if (loss_sum) {
      ops::NoGradGuard no_grad;
      *loss_sum = train_op.loss().detach().clone();
    }
    {
      step_profile::Scope scope(step_profile::kReduce);
      replica.sync_step(grads, gradient_scale, updates, loss_sum);
    }
    update(replica, train_op, std::move(grads), updates);
  }

  void combine(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads_and_vars) override {
    replica.all_reduce_gradients(grads_and_vars);
  }

  bool applies_updates(const ReplicaContext& replica) const override {
    return replica.replica_set().placement().applies_updates(replica.replica_id());
  }

  void after_update(ReplicaContext& replica) override {
    if (replica.replica_set().placement().shared()) replica.wait_for_local_replicas();
  }

 private:
  static void note_replica_thread() {
    if (!step_profile::enabled()) return;
    thread_local bool noted = false;
    if (!noted) step_profile::note_thread("replica");
    noted = true;
  }

  // The step's sums applied: where the placement applies updates (every mirrored copy, or
  // replica 0 on the shared copy), the moving statistics' mean and the optimizer's update at
  // the store's global step, which this replica then advances; then (central storage) every
  // replica waits until the shared copy is updated.
  void update(ReplicaContext& replica, const nn::TrainOp& train_op,
              std::vector<nn::GradAndVar> sums,
              const std::vector<nn::MovingAverageUpdate>& updates) {
    if (applies_updates(replica)) {
      step_profile::Scope scope(step_profile::kUpdate);
      for (const auto& update : updates) nn::apply_moving_average(update);
      nn::VariableStore& store = train_op.store();
      Tensor global_step = nn::get_or_create_global_step(store);
      const auto step = static_cast<int64_t>(global_step.item());
      train_op.optimizer().update(store, std::move(sums), step);
      global_step.data<int64_t>()[0] = step + 1;
    }
    after_update(replica);
  }

  // apply() for one local replica of several workers, overlapped with the backward pass.
  void apply_overlapped(ReplicaContext& replica, const nn::TrainOp& train_op, double gradient_scale,
                        nn::ModelContext& ctx, Tensor* loss_sum) {
    CrossDeviceOps& ops = replica.cross_device_ops();
    std::string what = replica.describe("all-reduce");
    std::vector<std::unique_ptr<PendingReduction>> pending;
    // A transport over host buffers reduces host copies of a GPU replica's tensors (each copy
    // is made when its bucket starts), and the sums come back to the device.
    const Device device = replica.device();
    const bool staged = !device.is_cpu() && !ops.reduces_device_tensors();
    auto to_transport = [&](Tensor t) { return staged && t.defined() ? t.to(Device::cpu()) : t; };
    auto from_transport = [&](Tensor t) { return staged && t.defined() ? t.to(device) : t; };
    // What the forward pass already knows travels first: the moving statistics (averaged over
    // replicas) and the loss (summed, for the log).
    std::vector<nn::MovingAverageUpdate> updates =
        nn::ContextControl(ctx).take_moving_average_updates();
    std::vector<Tensor> known;
    std::vector<double> known_factors;
    for (const auto& update : updates) {
      known.push_back(to_transport(update.value));
      known_factors.push_back(1.0 / replica.num_replicas_in_sync());
    }
    if (loss_sum) {
      ops::NoGradGuard no_grad;
      known.push_back(to_transport(train_op.loss().detach()));
      known_factors.push_back(1.0);
    }
    if (!known.empty()) pending.push_back(ops.start_reduce(known, known_factors, what));
    // Then the gradients, a bucket at a time, in the order the backward pass completes them
    // (the same on every worker: it depends only on the model).
    std::vector<std::vector<size_t>> buckets;
    std::vector<size_t> bucket;
    std::vector<Tensor> bucket_tensors;
    size_t bucket_bytes = 0;
    auto start_bucket = [&] {
      if (bucket.empty()) return;
      pending.push_back(ops.start_reduce(std::move(bucket_tensors),
                                         std::vector<double>(bucket.size(), gradient_scale), what));
      buckets.push_back(std::move(bucket));
      bucket.clear();
      bucket_tensors.clear();
      bucket_bytes = 0;
    };
    note_replica_thread();
    std::optional<step_profile::Scope> backward(std::in_place, step_profile::kBackward);
    std::vector<nn::GradAndVar> grads =
        train_op.compute_gradients([&](size_t index, const Tensor& gradient) {
          bucket.push_back(index);
          bucket_tensors.push_back(to_transport(gradient));
          bucket_bytes += gradient.nbytes();
          if (bucket_bytes >= kOverlapBucketBytes) start_bucket();
        });
    start_bucket();
    backward.reset();
    std::optional<step_profile::Scope> reduce(std::in_place, step_profile::kReduce);
    size_t next = 0;
    if (!known.empty()) {
      std::vector<Tensor> sums = pending[next++]->wait();
      for (size_t i = 0; i < updates.size(); ++i) updates[i].value = from_transport(sums[i]);
      if (loss_sum) *loss_sum = sums.back();  // read by the host
    }
    for (const std::vector<size_t>& indices : buckets) {
      std::vector<Tensor> sums = pending[next++]->wait();
      for (size_t k = 0; k < indices.size(); ++k)
        grads[indices[k]].gradient = from_transport(sums[k]);
    }
    reduce.reset();
    update(replica, train_op, std::move(grads), updates);
  }
};

}  // namespace

std::shared_ptr<GradientPath> all_reduce_path() { return std::make_shared<AllReducePath>(); }

double loss_reduction_scale(nn::Reduction loss_reduction, int num_replicas_in_sync) {
  if (num_replicas_in_sync <= 1 || !nn::is_mean_reduction(loss_reduction)) return 1.0;
  return 1.0 / num_replicas_in_sync;
}

}  // namespace est::distribute
