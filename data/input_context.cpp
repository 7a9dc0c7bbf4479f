// InputContext checks.
#include "data/input_context.h"

#include <string>

#include "ops/error.h"

namespace est::data {

void InputContext::validate() const {
  if (num_input_pipelines <= 0 || num_replicas_in_sync <= 0)
    throw InvalidArgumentError("InputContext: num_input_pipelines (" +
                               std::to_string(num_input_pipelines) +
                               ") and num_replicas_in_sync (" +
                               std::to_string(num_replicas_in_sync) + ") must be positive");
  if (input_pipeline_id < 0 || input_pipeline_id >= num_input_pipelines)
    throw InvalidArgumentError("InputContext: input_pipeline_id " +
                               std::to_string(input_pipeline_id) + " is outside [0, " +
                               std::to_string(num_input_pipelines) + ")");
}

int64_t InputContext::get_per_replica_batch_size(int64_t global_batch_size) const {
  validate();
  if (global_batch_size <= 0)
    throw InvalidArgumentError(
        "InputContext::get_per_replica_batch_size: the global batch size "
        "must be positive, got " +
        std::to_string(global_batch_size));
  if (global_batch_size % num_replicas_in_sync != 0)
    throw InvalidArgumentError("InputContext::get_per_replica_batch_size: the global batch size " +
                               std::to_string(global_batch_size) +
                               " is not divisible by num_replicas_in_sync " +
                               std::to_string(num_replicas_in_sync) + "; pick a multiple of " +
                               std::to_string(num_replicas_in_sync));
  return global_batch_size / num_replicas_in_sync;
}

}  // namespace est::data
