// PsSyncStep: configure; then each step's push, token and pull in one round trip.
#include "distribute/ps/ps_sync_step.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";

}  // namespace

PsSyncStep::PsSyncStep(PsVariables& variables, SyncReplicasOptions options, std::string task,
                       bool is_chief)
    : variables_(&variables), options_(options), task_(std::move(task)), is_chief_(is_chief) {
  options_.validate();
}

void PsSyncStep::start(nn::VariableStore& store, std::chrono::milliseconds wait_for_chief) {
  if (is_chief_) {
    local_step_ = static_cast<int64_t>(nn::get_or_create_global_step(store).item());
    PsRequest request{.kind = PsRequestKind::kSyncConfigure,
                      .global_step = local_step_,
                      .tensors = {options_.to_tensor()},
                      .message = task_};
    variables_->client().broadcast(request, "configuring synchronous training on the ps tasks");
    return;
  }
  local_step_ = static_cast<int64_t>(variables_->pull_variable(kGlobalStep, wait_for_chief).item());
}

void PsSyncStep::step(nn::VariableStore& store, const std::vector<nn::GradAndVar>& grads,
                      const std::vector<PsMovingAverage>& moving_averages,
                      const std::set<std::string>& not_pulled) {
  PsClient& client = variables_->client();
  size_t num_ps = static_cast<size_t>(client.num_ps());
  // Every ps task takes part (an empty push counts as this replica's arrival there), so that
  // each one's reply comes once it has applied the step.
  std::vector<std::optional<PsRequest>> requests(num_ps);
  for (auto& request : requests)
    request =
        PsRequest{.kind = PsRequestKind::kSyncStep, .global_step = local_step_, .message = task_};
  variables_->add_gradients(grads, requests, PsRequestKind::kSyncStep);
  variables_->add_moving_averages(moving_averages, requests, PsRequestKind::kSyncStep);
  variables_->add_pulls(requests, not_pulled);
  auto replies = client.exchange(
      requests, fmt::format("synchronous step {} (its push, token and pull)", local_step_));
  const int64_t token = replies[0]->token;
  variables_->write_pulled(replies, store, not_pulled);
  // A token past the next step (this replica fell behind: other replicas completed steps
  // meanwhile) comes once every task has applied the steps before it; the other tasks' values
  // in this round trip may be older, so they are read again, as a step after the token does.
  if (token > local_step_ + 1 && num_ps > 1) variables_->push_pull({}, store, 0, {}, not_pulled);
  local_step_ = token;
}

}  // namespace est::distribute
