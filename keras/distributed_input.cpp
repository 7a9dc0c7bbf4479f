// Keras's global batches as the Estimator's per-replica stream (see distributed_input.h).
#include "keras/distributed_input.h"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <vector>

#include "data/auto_shard.h"
#include "distribute/distributed_dataset.h"
#include "ops/error.h"

namespace est::keras {
namespace {

// A dataset of the given elements, in order.
data::Dataset dataset_of(std::shared_ptr<const std::vector<data::Element>> elements) {
  return data::Dataset::from_generator([elements] {
    auto next = std::make_shared<size_t>(0);
    return [elements, next]() -> std::optional<data::Element> {
      if (*next >= elements->size()) return std::nullopt;
      return (*elements)[(*next)++];
    };
  });
}

// The rows of a batch (its first component's first dimension).
int64_t rows_of(const data::Element& batch) {
  int64_t rows = -1;
  data::for_each_component(batch, [&](std::string_view, const Tensor& tensor) {
    if (rows < 0 && tensor.rank() > 0) rows = tensor.dim(0);
  });
  return rows;
}

}  // namespace

data::Dataset per_replica_batches(const data::Dataset& dataset, int64_t local_replicas,
                                  int64_t num_workers, int64_t worker_index) {
  data::AutoShardResult sharded = data::auto_shard(dataset, num_workers, worker_index);
  // Per-worker batches are split over this worker's replicas; under DATA each global batch is
  // split over every replica of the job and this worker keeps its replicas' parts.
  int64_t parts = sharded.per_worker_batches ? local_replicas : local_replicas * num_workers;
  int64_t first = sharded.per_worker_batches ? 0 : worker_index * local_replicas;
  if (parts == 1) return sharded.dataset;
  return sharded.dataset.interleave(
      [parts, first, local_replicas](const data::Element& batch) {
        std::vector<data::Element> all =
            distribute::split_batch_unevenly(batch, static_cast<int>(parts));
        if (rows_of(all.back()) == 0)
          throw InvalidArgumentError(fmt::format(
              "fit under a strategy: a global batch of {} rows has fewer rows than the {} "
              "replicas in sync, so a replica would get none; use a global batch of at least {} "
              "rows (or batch with drop_remainder)",
              rows_of(batch), parts, parts));
        auto mine = std::make_shared<std::vector<data::Element>>(
            all.begin() + first, all.begin() + first + local_replicas);
        return dataset_of(std::move(mine));
      },
      /*cycle_length=*/1);
}

}  // namespace est::keras
