// fit's per-step statistics and epoch hook (see fit_loop.h).
#include "keras/fit_loop.h"

#include "distribute/strategy.h"
#include "keras/model.h"

namespace est::keras {

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
                     EpochRange range)
    : callbacks_(callbacks),
      model_(model),
      names_(std::move(names)),
      statistics_(std::move(statistics)),
      strategy_(strategy),
      range_(range),
      epoch_(range.first) {
  reset_epoch();
}

void EpochHook::reset_epoch() {
  begun_ = false;
  batch_ = 0;
  running_.assign(2 * names_.size(), 0.0);
  logs_.clear();
}

SessionRunArgs EpochHook::before_run(SessionRunContext&) {
  if (!begun_) {
    callbacks_.on_epoch_begin(epoch_, {});
    begun_ = true;
  }
  callbacks_.on_train_batch_begin(batch_, {});
  return {};
}

void EpochHook::after_run(SessionRunContext& context, const SessionRunValues&) {
  std::vector<double> step = statistics_->take();
  if (strategy_ && strategy_->num_workers() > 1) {
    std::vector<Tensor> values{Tensor::from_vector(step, {static_cast<int64_t>(step.size())})};
    strategy_->sum_across_workers(values, "fit's loss and metrics");
    step = values[0].to_vector<double>();
  }
  for (size_t i = 0; i < names_.size(); ++i) {
    running_[2 * i] += step[2 * i];
    running_[2 * i + 1] += step[2 * i + 1];
    double count = running_[2 * i + 1];
    logs_[names_[i]] = count > 0 ? running_[2 * i] / count : 0.0;
  }
  callbacks_.on_train_batch_end(batch_++, logs_);
  if (batch_ == range_.steps && epoch_ < range_.last) {
    // An epoch ends inside the session; the session's last one is ended by fit, after it.
    callbacks_.on_epoch_end(epoch_, logs_);
    ++epoch_;
    reset_epoch();
  }
  if (model_.stop_training) context.request_stop();
}

}  // namespace est::keras
