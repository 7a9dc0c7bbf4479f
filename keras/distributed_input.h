// Keras's input under a strategy (Keras 2.x keras/engine/data_adapter.py, DataHandler over
// strategy.experimental_distribute_dataset; tensorflow/python/distribute/input_lib.py): the
// dataset given to fit yields GLOBAL batches; each step, the replicas of all workers together take
// one global batch, split along the first axis into equal per-replica batches, and with several
// workers the dataset is auto-sharded (its AutoShardPolicy; AUTO on in-memory data is DATA: every
// worker reads the whole pipeline and keeps its rows of each global batch).
//
// The Estimator's input_fn under a strategy yields per-replica batches (one element per replica
// per step, TF1's contract), so fit hands it this dataset: the user's, sharded for this worker by
// data::auto_shard and each of its batches split (distribute::split_batch) into this worker's
// local replicas' batches, in replica order. The pipeline is an interleave over the sharded one,
// so its position saves and restores with the checkpoint as any pipeline's.
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace est::keras {

// The per-replica stream of `dataset` (global batches) for worker `worker_index` of
// `num_workers`, each with `local_replicas` replicas. InvalidArgumentError at the first batch
// whose rows are not divisible by the replicas in sync.
data::Dataset per_replica_batches(const data::Dataset& dataset, int64_t local_replicas,
                                  int64_t num_workers, int64_t worker_index);

}  // namespace est::keras
