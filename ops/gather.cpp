// Indexing and type ops: gather (embedding lookup), one_hot and cast. Checks here, kernels in
// the registry (kGather checks every index before it copies anything, so a bad id is reported
// by value and position); gather's gradient scatter-adds rows back into zeros of the params'
// shape (along axis 0 it is also recorded as IndexedSlices: the rows read and their
// gradients, which is all an embedding table's update needs), cast's passes gradients between
// floating types.
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/registry.h"

namespace est::ops {

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  const Device device = common_device("gather", {&params, &indices});
  cpu::require_index_dtype("gather", "indices", indices);
  if (params.rank() == 0)
    throw InvalidArgumentError("gather: params is a scalar; it needs at least one axis to index");
  const int a = cpu::normalize_axis("gather", axis, params.rank());
  const Shape& shape = params.shape();
  Shape out_shape(shape.begin(), shape.begin() + a);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), shape.begin() + a + 1, shape.end());
  Tensor out = Tensor::empty(out_shape, params.dtype(), device);
  run_kernel<OpId::kGather>("gather", device, params.dtype(), params, indices, a, out);
  if (!needs_recording({&params})) return out;
  out = record(out, "gather", {params, indices},
               [indices = indices.detach(), a, shape](
                   const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                 if (!needs[0]) return {Tensor(), Tensor()};
                 Tensor dparams = Tensor::empty(shape, grad.dtype(), grad.device());
                 run_kernel<OpId::kGatherGradient>("gather", grad.device(), grad.dtype(), grad,
                                                   indices, a, dparams);
                 return {dparams, Tensor()};
               });
  if (a == 0)  // rows of params: the gradient also as slices (row_sparse_gradients)
    out.grad_node()->row_sparse_backward = [indices = indices.detach(),
                                            shape](const Tensor& grad) -> IndexedSlices {
      const int64_t n = indices.numel();
      Shape values_shape = shape;
      values_shape[0] = n;
      return {cast(indices, DType::kI64).reshape({n}), grad.reshape(values_shape), shape};
    };
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  const Device device = common_device("cast", {&x});
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, device);
  run_kernel<OpId::kCast>("cast", device, x.dtype(), x, out);
  if (!is_floating(x.dtype()) || !is_floating(dtype)) return out;
  return record(out, "cast", {x},
                [from = x.dtype()](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {cast(grad, from)};
                });
}

// Ids outside [0, depth) (-1 included) give a row of off_value, as tf.one_hot.
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DType dtype) {
  const Device device = common_device("one_hot", {&indices});
  cpu::require_index_dtype("one_hot", "indices", indices);
  if (depth < 0)
    throw InvalidArgumentError(fmt::format("one_hot: depth must be >= 0, got {}", depth));
  Shape out_shape = indices.shape();
  out_shape.push_back(depth);
  Tensor out = Tensor::empty(out_shape, dtype, device);
  run_kernel<OpId::kOneHot>("one_hot", device, indices.dtype(), indices, on_value, off_value, out);
  return out;
}

}  // namespace est::ops
