// Sharding the dataset for this worker (data::auto_shard) and splitting its batches into
// per-replica batches: each slice is copied into its own tensor (ops::slice) so replicas never
// share input storage; string batches are copied row by row and sparse ones split by their
// entries' first index (rows renumbered from 0, dense shape [per replica, ...]).
#include "distribute/distributed_dataset.h"

#include <algorithm>
#include <string>

#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/error.h"

namespace est::distribute {

namespace {

int64_t batch_size_of(const data::Element& element) {
  int64_t size = -1;
  data::for_each_component(element, [&](std::string_view name, const Tensor& tensor) {
    if (tensor.rank() == 0)
      throw InvalidArgumentError("distribute_dataset: component '" + std::string(name) +
                                 "' is a scalar, not a batch; batch the dataset (with the "
                                 "global batch size) before distributing it");
    if (size >= 0 && tensor.dim(0) != size)
      throw InvalidArgumentError("distribute_dataset: component '" + std::string(name) +
                                 "' has batch size " + std::to_string(tensor.dim(0)) +
                                 " but an earlier component has " + std::to_string(size) +
                                 "; all tensors of a batch must share their first dimension");
    size = tensor.dim(0);
  });
  if (size < 0)
    throw InvalidArgumentError("distribute_dataset: an element with no tensors cannot be split");
  return size;
}

// Rows [begin, begin + count) of a sparse batch: its entries there, rows renumbered from 0.
Tensor sparse_rows(const Tensor& tensor, int64_t begin, int64_t count) {
  const Tensor indices = tensor.indices().to(ops::Device::cpu());
  const Tensor values = tensor.values().to(ops::Device::cpu());
  const int64_t rank = indices.dim(1);
  const int64_t* index = indices.data<int64_t>();
  std::vector<int64_t> kept, kept_indices;
  for (int64_t e = 0; e < indices.dim(0); ++e)
    if (index[e * rank] >= begin && index[e * rank] < begin + count) {
      kept.push_back(e);
      for (int64_t a = 0; a < rank; ++a)
        kept_indices.push_back(index[e * rank + a] - (a == 0 ? begin : 0));
    }
  const int64_t n = static_cast<int64_t>(kept.size());
  Tensor part = Tensor::empty({n}, values.dtype());
  char* dst = data::element_pointer(part);
  const char* src = data::element_pointer(values);
  const size_t size = ops::dtype_size(values.dtype());
  for (int64_t i = 0; i < n; ++i)
    data::copy_elements(dst + static_cast<size_t>(i) * size,
                        src + static_cast<size_t>(kept[static_cast<size_t>(i)]) * size, size,
                        values.dtype());
  Shape shape = tensor.shape();
  shape[0] = count;
  return Tensor::sparse(Tensor::from_vector(kept_indices, {n, rank}), part, shape);
}

// Rows of a string batch (host memory; no kernel copies strings).
Tensor string_rows(const Tensor& tensor, int64_t begin, int64_t count) {
  Shape shape = tensor.shape();
  shape[0] = count;
  Tensor out = Tensor::empty(shape, DType::kString);
  const size_t row_bytes = out.nbytes() / static_cast<size_t>(std::max<int64_t>(count, 1));
  data::copy_elements(data::element_pointer(out),
                      data::element_pointer(tensor) + static_cast<size_t>(begin) * row_bytes,
                      out.nbytes(), DType::kString);
  return out;
}

Tensor rows(const Tensor& tensor, int64_t begin, int64_t count) {
  if (!tensor.defined()) return tensor;
  if (tensor.is_sparse()) return sparse_rows(tensor, begin, count);
  if (tensor.dtype() == DType::kString) return string_rows(tensor, begin, count);
  std::vector<int64_t> start(static_cast<size_t>(tensor.rank()), 0);
  std::vector<int64_t> size(tensor.shape().begin(), tensor.shape().end());
  start[0] = begin;
  size[0] = count;
  return ops::slice(tensor, start, size);
}

// Consecutive batches of `sizes` rows (non-negative, summing to the batch's rows).
std::vector<data::Element> split_rows(const data::Element& global_batch,
                                      const std::vector<int64_t>& sizes) {
  ops::NoGradGuard no_grad;
  std::vector<data::Element> out(sizes.size());
  int64_t begin = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    data::Element& part = out[r];
    for (const auto& [name, tensor] : global_batch.features)
      part.features[name] = rows(tensor, begin, sizes[r]);
    part.labels = rows(global_batch.labels, begin, sizes[r]);
    part.value = rows(global_batch.value, begin, sizes[r]);
    begin += sizes[r];
  }
  return out;
}

}  // namespace

std::vector<data::Element> split_batch(const data::Element& global_batch, int replicas) {
  if (replicas < 1)
    throw InvalidArgumentError("split_batch: need at least one replica, got " +
                               std::to_string(replicas) + " replicas");
  int64_t global = batch_size_of(global_batch);
  if (global % replicas != 0)
    throw InvalidArgumentError("distribute_dataset: the global batch size " +
                               std::to_string(global) + " is not divisible by the " +
                               std::to_string(replicas) +
                               " replicas in sync; make the global batch a multiple of the "
                               "replica count (or batch with drop_remainder)");
  return split_rows(global_batch,
                    std::vector<int64_t>(static_cast<size_t>(replicas), global / replicas));
}

std::vector<int64_t> uneven_batch_sizes(int64_t rows, int replicas) {
  if (replicas < 1)
    throw InvalidArgumentError("split_batch: need at least one replica, got " +
                               std::to_string(replicas) + " replicas");
  std::vector<int64_t> sizes(static_cast<size_t>(replicas), rows / replicas);
  for (int64_t r = 0; r < rows % replicas; ++r) ++sizes[static_cast<size_t>(r)];
  return sizes;
}

std::vector<data::Element> split_batch_unevenly(const data::Element& global_batch, int replicas) {
  std::vector<int64_t> sizes = uneven_batch_sizes(batch_size_of(global_batch), replicas);
  return split_rows(global_batch, sizes);
}

namespace {

data::AutoShardResult shard_for_worker(const data::Dataset& dataset, int num_replicas,
                                       int num_workers, int worker_index) {
  if (num_replicas < 1)
    throw InvalidArgumentError("DistributedDataset: need at least one replica, got " +
                               std::to_string(num_replicas));
  if (num_workers < 1 || worker_index < 0 || worker_index >= num_workers)
    throw InvalidArgumentError("DistributedDataset: worker " + std::to_string(worker_index) +
                               " of " + std::to_string(num_workers) + " workers is out of range");
  data::AutoShardResult sharded = data::auto_shard(dataset, num_workers, worker_index);
  int64_t in_sync = int64_t{num_replicas} * num_workers;
  if (sharded.global_batch_size > 0 && sharded.global_batch_size % in_sync != 0)
    throw InvalidArgumentError(
        "distribute_dataset: the global batch size " + std::to_string(sharded.global_batch_size) +
        " is not divisible by the " + std::to_string(in_sync) + " replicas in sync (" +
        std::to_string(num_workers) + " workers x " + std::to_string(num_replicas) +
        " replicas); make the global batch a multiple of " + std::to_string(in_sync));
  return sharded;
}

}  // namespace

DistributedDataset::DistributedDataset(data::Dataset dataset, int num_replicas, int num_workers,
                                       int worker_index)
    : sharded_(shard_for_worker(dataset, num_replicas, num_workers, worker_index)),
      num_replicas_(num_replicas),
      num_workers_(num_workers),
      worker_index_(worker_index) {}

DistributedDataset::Iterator DistributedDataset::iterator() const {
  return Iterator(sharded_.dataset.iterator(), num_replicas_, num_workers_, worker_index_,
                  sharded_.per_worker_batches);
}

std::optional<std::vector<data::Element>> DistributedDataset::Iterator::next() {
  std::optional<data::Element> element = iterator_.next();
  if (!element) return std::nullopt;
  // This worker's own batch (FILE, OFF, HINT, or one worker): its replicas split it.
  if (num_workers_ == 1 || per_worker_batches_) return split_batch(*element, num_replicas_);
  // DATA: rows [w B/W, (w+1) B/W) of each global batch go to worker w, then to its replicas in
  // turn: the replicas of all workers together see the global batch in order.
  std::vector<data::Element> all = split_batch(*element, num_replicas_ * num_workers_);
  auto first = all.begin() + static_cast<std::ptrdiff_t>(worker_index_ * num_replicas_);
  return std::vector<data::Element>(std::make_move_iterator(first),
                                    std::make_move_iterator(first + num_replicas_));
}

}  // namespace est::distribute
