// SyncReplicasOptions: what a program asks of synchronous training on parameter servers
// (ParameterServerOptions::sync_replicas), apart from the state the ps tasks keep for it
// (sync_replicas.h, whose .cpp defines the members declared here), so that setting them includes
// neither the ps wire format nor the data plane.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

namespace est::distribute {

struct NamedTensor;  // distribute/ps/ps_wire.h

// ParameterServerOptions::sync_replicas: TF's SyncReplicasOptimizer(opt, replicas_to_aggregate,
// total_num_replicas) and make_session_run_hook(is_chief, num_tokens), plus est's bound on a
// worker's wait for its token.
struct SyncReplicasOptions {
  int replicas_to_aggregate = 1;  // gradients averaged into each update
  // Training tasks of the job (TF: backup replicas + replicas_to_aggregate); 0: as
  // replicas_to_aggregate, TensorFlow's default.
  int total_num_replicas = 0;
  // Tokens in the queue before the first update; -1: replicas_to_aggregate (TensorFlow's
  // default). At least replicas_to_aggregate - total_num_replicas.
  int num_tokens = -1;
  // How long a worker waits for its token at the end of a step before failing with a
  // DeadlineExceededError that names the step, the replicas that had arrived and the training
  // tasks that stopped answering (TensorFlow waits forever: a restarted worker may rejoin within
  // this time).
  std::chrono::milliseconds token_timeout{std::chrono::minutes(10)};

  int resolved_total_num_replicas() const {
    return total_num_replicas > 0 ? total_num_replicas : replicas_to_aggregate;
  }
  int resolved_num_tokens() const { return num_tokens >= 0 ? num_tokens : replicas_to_aggregate; }
  int tokens_per_step() const {
    return std::max(resolved_total_num_replicas(), replicas_to_aggregate);
  }
  // InvalidArgumentError naming the field: replicas_to_aggregate < 1, total_num_replicas < 0,
  // too few tokens for the first step (TensorFlow's "Too few tokens to finish the first step"),
  // a token_timeout that is not positive.
  void validate() const;

  // The settings as the chief sends them to the ps tasks (kSyncConfigure) and back.
  NamedTensor to_tensor() const;
  static SyncReplicasOptions from_tensor(const NamedTensor& tensor, const std::string& from);
};

}  // namespace est::distribute
