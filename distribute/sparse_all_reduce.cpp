// gather_row_sparse_gradients: a count exchange, then one all-reduce of zero-padded rows.
#include "distribute/sparse_all_reduce.h"

#include <cstring>

#include "distribute/strategy.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/math.h"

namespace est::distribute {

bool gather_moves_fewer_bytes(int64_t total_rows, int64_t row_elements, int64_t dense_elements,
                              size_t element_bytes) {
  const auto gathered = static_cast<double>(total_rows) *
                        (sizeof(int64_t) + static_cast<double>(row_elements * element_bytes));
  return gathered < static_cast<double>(dense_elements) * static_cast<double>(element_bytes);
}

namespace {

// `part`'s bytes at row `offset` of `buffer` (CPU tensors, rows of the same width).
void place_rows(Tensor& buffer, int64_t offset, const Tensor& part) {
  if (part.numel() == 0) return;
  const size_t row_bytes = part.nbytes() / static_cast<size_t>(part.dim(0));
  std::memcpy(static_cast<char*>(buffer.raw_data()) + static_cast<size_t>(offset) * row_bytes,
              part.raw_data(), part.nbytes());
}

}  // namespace

void gather_row_sparse_gradients(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads,
                                 double scale) {
  std::vector<size_t> sparse;
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].sparse_gradient.defined()) sparse.push_back(i);
  if (sparse.empty()) return;
  ops::NoGradGuard no_grad;
  const int replicas = replica.num_replicas_in_sync();
  if (replicas == 1) {
    for (size_t i : sparse)
      if (scale != 1.0)
        grads[i].sparse_gradient = ops::scale_slices(grads[i].sparse_gradient, scale);
    return;
  }
  const int me = replica.replica_id_in_sync_group();
  // counts[k * replicas + r]: replica r's rows of sparse gradient k (float64 is exact here).
  Tensor counts = Tensor::zeros({static_cast<int64_t>(sparse.size()) * replicas}, DType::kF64);
  for (size_t k = 0; k < sparse.size(); ++k)
    counts.data<double>()[k * replicas + me] =
        static_cast<double>(grads[sparse[k]].sparse_gradient.num_rows());
  std::vector<Tensor> exchanged{counts};
  replica.all_reduce(ReduceOp::kSum, exchanged);
  const std::vector<double> all = exchanged[0].to_vector<double>();

  std::vector<Tensor> buffers;  // indices (float64), values, per gathered gradient
  std::vector<size_t> gathered;
  for (size_t k = 0; k < sparse.size(); ++k) {
    nn::GradAndVar& entry = grads[sparse[k]];
    const ops::IndexedSlices& mine = entry.sparse_gradient;
    int64_t total = 0, offset = 0;
    for (int r = 0; r < replicas; ++r) {
      const auto rows = static_cast<int64_t>(all[k * replicas + r]);
      if (r < me) offset += rows;
      total += rows;
    }
    const bool on_host = mine.values.device().is_cpu();
    if (!on_host ||
        !gather_moves_fewer_bytes(total, mine.row_elements(), ops::num_elements(mine.dense_shape),
                                  dtype_size(mine.values.dtype()))) {
      entry.densify();
      continue;
    }
    Tensor indices = Tensor::zeros({total}, DType::kF64);
    place_rows(indices, offset, ops::cast(mine.indices, DType::kF64).reshape({mine.num_rows(), 1}));
    Shape values_shape = mine.dense_shape;
    values_shape[0] = total;
    Tensor values = Tensor::zeros(values_shape, mine.values.dtype());
    place_rows(values, offset, scale == 1.0 ? mine.values : ops::mul(mine.values, scale));
    buffers.push_back(indices);
    buffers.push_back(values);
    gathered.push_back(sparse[k]);
  }
  if (gathered.empty()) return;
  replica.all_reduce(ReduceOp::kSum, buffers);
  for (size_t g = 0; g < gathered.size(); ++g) {
    nn::GradAndVar& entry = grads[gathered[g]];
    entry.sparse_gradient = {ops::cast(buffers[2 * g], DType::kI64), buffers[2 * g + 1],
                             entry.sparse_gradient.dense_shape};
  }
}

}  // namespace est::distribute
