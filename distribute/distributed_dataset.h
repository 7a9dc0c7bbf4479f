// DistributedDataset: what strategy.distribute_dataset returns, as tf.distribute's
// DistributedDataset (tensorflow/python/distribute/input_lib.py). The user's dataset is batched
// by the global batch size; each step, the replicas of all workers together get one global
// batch's worth of rows, split along the first axis into equal per-replica batches (replica r of
// a worker gets rows [r*B, (r+1)*B) of what that worker takes).
//
// With several workers, the dataset's AutoShardPolicy (Dataset::with_options, default AUTO)
// decides what each worker reads (data/auto_shard.h):
//   FILE (AUTO on a pipeline reading at least one file per worker): each worker reads its share
//     of the files, with the batch stage rewritten to global batch / num_workers; its batches are
//     split over its own replicas.
//   DATA (AUTO otherwise, with TensorFlow's warning): every worker reads the same pipeline and
//     keeps rows [w*B/W, (w+1)*B/W) of each global batch, so all workers together see each
//     global batch once, in the order one process would.
//   OFF: as FILE without sharding the files: every worker reads all the data (a warning says it
//     is duplicated).
//   HINT: shard(kShardHint, ...) placeholders become shard(num_workers, worker_index), batches
//     as FILE.
// The rewriting happens once, here; the iterator's state saves and restores the rewritten
// pipeline's position.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/auto_shard.h"
#include "data/dataset.h"

namespace est::distribute {

// Splits every tensor of a global batch [N, ...] into `replicas` batches [N / replicas, ...].
// InvalidArgumentError naming both numbers when N is not divisible by `replicas`, or when the
// element's tensors disagree on N, or when `replicas` < 1.
std::vector<data::Element> split_batch(const data::Element& global_batch, int replicas);

// The per-replica batch sizes of `rows` rows over `replicas`, as tf.data rebatches a global
// batch for the replicas (tensorflow/python/data/experimental/ops/distribute.py
// batch_sizes_for_worker): rows / replicas each, the first rows % replicas one row more.
std::vector<int64_t> uneven_batch_sizes(int64_t rows, int replicas);

// Splits every tensor of a global batch into `replicas` consecutive batches of
// uneven_batch_sizes rows (some empty when it has fewer rows than replicas). The errors of
// split_batch, but for divisibility.
std::vector<data::Element> split_batch_unevenly(const data::Element& global_batch, int replicas);

class DistributedDataset {
 public:
  // `num_replicas`: this worker's replicas (every worker has as many). Shards `dataset` for
  // worker `worker_index` of `num_workers` by its auto-shard policy; the policy's errors (too
  // few files for FILE, a global batch not divisible by the replicas in sync) are thrown here.
  DistributedDataset(data::Dataset dataset, int num_replicas, int num_workers = 1,
                     int worker_index = 0);

  class Iterator {
   public:
    // This worker's per-replica batches of the next step; nullopt at the end of the data.
    std::optional<std::vector<data::Element>> next();
    // The position in this worker's pipeline, and back (data::Iterator's state).
    std::string save_state() { return iterator_.save_state(); }
    void restore_state(std::string_view state) { iterator_.restore_state(state); }

   private:
    friend class DistributedDataset;
    Iterator(data::Iterator iterator, int num_replicas, int num_workers, int worker_index,
             bool per_worker_batches)
        : iterator_(std::move(iterator)),
          num_replicas_(num_replicas),
          num_workers_(num_workers),
          worker_index_(worker_index),
          per_worker_batches_(per_worker_batches) {}
    data::Iterator iterator_;
    int num_replicas_;
    int num_workers_;
    int worker_index_;
    bool per_worker_batches_;
  };

  Iterator iterator() const;
  int num_replicas() const { return num_replicas_; }
  // The policy applied (AUTO resolved to FILE or DATA; with one worker, the dataset's own).
  data::AutoShardPolicy auto_shard_policy() const { return sharded_.policy; }
  // The pipeline this worker iterates: the user's, rewritten by the policy.
  const data::Dataset& worker_dataset() const { return sharded_.dataset; }

 private:
  data::AutoShardResult sharded_;
  int num_replicas_;
  int num_workers_;
  int worker_index_;
};

}  // namespace est::distribute
