// PsSyncStep: configure, push into the accumulators, take a token, pull.
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
                      const std::vector<PsMovingAverage>& moving_averages) {
  PsClient& client = variables_->client();
  size_t num_ps = static_cast<size_t>(client.num_ps());
  // Every ps task takes part (an empty push counts as this replica's arrival there), so that
  // the token below means every task has applied the step.
  std::vector<std::optional<PsRequest>> pushes(num_ps);
  for (auto& push : pushes)
    push =
        PsRequest{.kind = PsRequestKind::kSyncPush, .global_step = local_step_, .message = task_};
  variables_->add_gradients(grads, pushes, PsRequestKind::kSyncPush);
  variables_->add_moving_averages(moving_averages, pushes, PsRequestKind::kSyncPush);
  client.exchange(pushes, fmt::format("pushing the gradients of synchronous step {}", local_step_));

  std::vector<std::optional<PsRequest>> token(num_ps);
  token[0] =
      PsRequest{.kind = PsRequestKind::kTakeToken, .global_step = local_step_, .message = task_};
  auto replies = client.exchange(
      token, fmt::format("waiting for the token that follows synchronous step {}", local_step_));
  local_step_ = replies[0]->global_step;

  variables_->push_pull({}, store, 0);  // the fresh values and global_step
}

}  // namespace est::distribute
