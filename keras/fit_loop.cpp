// fit's per-step statistics and epoch hook (see fit_loop.h).
#include "keras/fit_loop.h"

#include "distribute/strategy.h"
#include "keras/model.h"
#include "nn/optimizer.h"
#include "ops/autograd.h"

namespace est::keras {
namespace {

// Keras's optimizer variable, a non-slot variable of the optimizer (saved with the state).
constexpr const char* kLearningRateVariable = "learning_rate";

}  // namespace

void StepStatistics::record(const void* replica, const std::vector<double>& means, double rows) {
  std::vector<double> sums;
  sums.reserve(2 * means.size());
  for (double mean : means) {
    sums.push_back(mean * rows);
    sums.push_back(rows);
  }
  std::lock_guard lock(mutex_);
  by_replica_[replica] = std::move(sums);
}

std::vector<double> StepStatistics::take() {
  std::vector<double> total(2 * names_, 0.0);
  std::lock_guard lock(mutex_);
  for (const auto& [replica, sums] : by_replica_)
    for (size_t i = 0; i < total.size() && i < sums.size(); ++i) total[i] += sums[i];
  by_replica_.clear();
  return total;
}

EpochHook::EpochHook(CallbackList& callbacks, Model& model, std::vector<std::string> names,
                     std::shared_ptr<StepStatistics> statistics, distribute::Strategy* strategy,
                     int first_epoch, int64_t first_batch, int64_t steps_per_epoch,
                     Validation validation, std::shared_ptr<double> learning_rate)
    : callbacks_(callbacks),
      model_(model),
      names_(std::move(names)),
      statistics_(std::move(statistics)),
      strategy_(strategy),
      steps_(steps_per_epoch),
      validation_(std::move(validation)),
      learning_rate_(std::move(learning_rate)),
      epoch_(first_epoch) {
  reset_epoch();
  batch_ = first_batch;  // Keras numbers a resumed epoch's batches on from its initial step
}

void EpochHook::reset_epoch() {
  begun_ = false;
  batch_ = 0;
  running_.assign(2 * names_.size(), 0.0);
  logs_.clear();
}

void EpochHook::sum_across_workers(std::vector<double>& values, const char* what) {
  if (!strategy_ || strategy_->num_workers() < 2) return;
  std::vector<Tensor> tensors{Tensor::from_vector(values, {static_cast<int64_t>(values.size())})};
  strategy_->sum_across_workers(tensors, what);
  values = tensors[0].to_vector<double>();
}

void EpochHook::write_learning_rate(Session& session) {
  if (!learning_rate_) return;
  ops::NoGradGuard no_grad;
  // Created after the restore when missing (a checkpoint written by get_weights or load_model
  // has none), then overwritten with the current value.
  Tensor rate =
      nn::optim::get_non_slot(session.store(), kLearningRateVariable, DType::kF32, *learning_rate_);
  rate.copy_from(Tensor::scalar(*learning_rate_));
}

void EpochHook::after_create_session(Session& session) {
  model_.set_training_session(&session);
  write_learning_rate(session);
}

bool EpochHook::will_save_after(int64_t) { return callbacks_.saves_after_batch(batch_); }

SessionRunArgs EpochHook::before_run(SessionRunContext& context) {
  write_learning_rate(context.session());
  if (!begun_) {
    callbacks_.on_epoch_begin(epoch_, {});
    begun_ = true;
  }
  callbacks_.on_train_batch_begin(batch_, {});
  return {};
}

void EpochHook::after_run(SessionRunContext& context, const SessionRunValues&) {
  std::vector<double> step = statistics_->take();
  sum_across_workers(step, "fit's loss and metrics");
  for (size_t i = 0; i < names_.size(); ++i) {
    running_[2 * i] += step[2 * i];
    running_[2 * i + 1] += step[2 * i + 1];
    double count = running_[2 * i + 1];
    logs_[names_[i]] = count > 0 ? running_[2 * i] / count : 0.0;
  }
  callbacks_.on_train_batch_end(batch_++, logs_);
  if (batch_ == steps_) {
    if (defer_)
      pending_ = true;
    else
      end_epoch();
  }
  if (model_.stop_training) context.request_stop();
}

bool EpochEndListener::after_save(Session&, int64_t) {
  if (hook_->pending()) hook_->end_epoch();
  return model_.stop_training;
}

void EpochHook::end_epoch() {
  pending_ = false;
  Logs logs = logs_;
  if (validation_.due && validation_.due(epoch_)) {
    bool chief = !strategy_ || strategy_->is_chief();
    std::vector<double> values(names_.size(), 0.0);
    if (chief) {
      std::map<std::string, double> results = validation_.run();
      for (size_t i = 0; i < names_.size(); ++i) values[i] = results.at(names_[i]);
    }
    sum_across_workers(values, "fit's validation results");
    for (size_t i = 0; i < names_.size(); ++i) logs["val_" + names_[i]] = values[i];
  }
  callbacks_.on_epoch_end(epoch_, logs);
  ++epoch_;
  reset_epoch();
}

}  // namespace est::keras
