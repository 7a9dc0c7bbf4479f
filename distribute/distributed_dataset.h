// DistributedDataset: what strategy.distribute_dataset returns. It iterates the user's
// dataset of global batches and splits each one along its first axis into
// num_replicas_in_sync equal per-replica batches (replica r gets rows [r*B, (r+1)*B)), as
// tf.distribute does for a batched dataset in one process.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/dataset.h"

namespace est::distribute {

// Splits every tensor of a global batch [N, ...] into `replicas` batches [N / replicas, ...].
// InvalidArgumentError naming both numbers when N is not divisible by `replicas`, or when the
// element's tensors disagree on N, or when `replicas` < 1.
std::vector<data::Element> split_batch(const data::Element& global_batch, int replicas);

class DistributedDataset {
 public:
  DistributedDataset(data::Dataset dataset, int num_replicas);

  class Iterator {
   public:
    // The next global batch as per-replica batches; nullopt at the end of the data.
    std::optional<std::vector<data::Element>> next();

   private:
    friend class DistributedDataset;
    Iterator(data::Iterator iterator, int num_replicas)
        : iterator_(std::move(iterator)), num_replicas_(num_replicas) {}
    data::Iterator iterator_;
    int num_replicas_;
  };

  Iterator iterator() const;
  int num_replicas() const { return num_replicas_; }

 private:
  data::Dataset dataset_;
  int num_replicas_;
};

}  // namespace est::distribute
