// InputContext: what a distribution strategy tells input_fn about the input pipelines, as
// tf.distribute.InputContext. With several workers each pipeline reads its own shard:
//   ds = ds.shard(ctx->num_input_pipelines, ctx->input_pipeline_id)
//          .batch(ctx->get_per_replica_batch_size(global_batch));
#pragma once

#include <cstdint>

namespace est::data {

struct InputContext {
  int64_t num_input_pipelines = 1;   // usually the number of workers
  int64_t input_pipeline_id = 0;     // this pipeline, in [0, num_input_pipelines)
  int64_t num_replicas_in_sync = 1;  // replicas that step together, across all workers

  // global_batch_size / num_replicas_in_sync; InvalidArgumentError unless it divides evenly.
  int64_t get_per_replica_batch_size(int64_t global_batch_size) const;
  // InvalidArgumentError unless the three fields are consistent.
  void validate() const;
};

}  // namespace est::data

namespace est {
using data::InputContext;
}  // namespace est
