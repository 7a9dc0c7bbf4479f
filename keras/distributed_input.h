// Keras's input under a strategy (Keras 2.x keras/engine/data_adapter.py, DataHandler over
// strategy.experimental_distribute_dataset; tensorflow/python/distribute/input_lib.py): the
// dataset given to fit yields GLOBAL batches; each step, the replicas of all workers together take
// one global batch, split along the first axis into per-replica batches as tf.data rebatches it
// (distribute::uneven_batch_sizes: equal, or when the rows do not divide, as for a last partial
// batch, the first replicas one row more), and with several workers the dataset is auto-sharded
// (its AutoShardPolicy; AUTO on in-memory data is DATA: every worker reads the whole pipeline and
// keeps its rows of each global batch). Keras's loss on uneven batches (compile_utils.py
// LossesContainer: each replica's mean over its rows, scale_loss_for_distribution divides it by
// the replicas in sync) is then the mean of the replicas' means, not the global batch's mean; its
// logged loss (a Mean weighted by each replica's rows) is the global batch's mean.
//
// The Estimator's input_fn under a strategy yields per-replica batches (one element per replica
// per step, TF1's contract), so fit hands it this dataset: the user's, sharded for this worker by
// data::auto_shard and each of its batches split (distribute::split_batch_unevenly) into this
// worker's local replicas' batches, in replica order. The pipeline is an interleave over the
// sharded one, so its position saves and restores with the checkpoint as any pipeline's.
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace est::keras {

// The per-replica stream of `dataset` (global batches) for worker `worker_index` of
// `num_workers`, each with `local_replicas` replicas. InvalidArgumentError at the first batch
// with fewer rows than the replicas in sync.
data::Dataset per_replica_batches(const data::Dataset& dataset, int64_t local_replicas,
                                  int64_t num_workers, int64_t worker_index);

}  // namespace est::keras
