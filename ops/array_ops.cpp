// Layout ops: reshape, flatten, expand_dims, squeeze, transpose, concat, stack, slice.
//
// Results are fresh contiguous tensors from the registry's layout kernels (reshape-like ops
// share storage, as Tensor::reshape does). Gradients are the inverse layout op: transpose by
// the inverse permutation, slices of the upstream gradient for concat, and the upstream
// gradient written into a zero tensor's window for slice. Indexing ops (gather, one_hot, cast)
// are in gather.cpp.
#include "ops/array_ops.h"

#include "ops/autograd.h"
#include "ops/cpu/checks.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

// Copies the window [begin, begin + size) of x into a new tensor.
Tensor copy_window(const Tensor& x, const std::vector<int64_t>& begin, const Shape& size) {
  Tensor out = Tensor::empty(size, x.dtype(), x.device());
  run_kernel<OpId::kSlice>("slice", x.device(), x.dtype(), x, begin, out);
  return out;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) { return x.reshape(shape); }

Tensor flatten(const Tensor& x) {
  if (x.rank() == 0)
    throw InvalidArgumentError(
        "flatten: needs a tensor of rank >= 1 with the batch first, got a scalar");
  int64_t rest = 1;
  for (int d = 1; d < x.rank(); ++d) rest *= x.shape()[static_cast<size_t>(d)];
  return x.reshape({x.shape()[0], rest});
}

Tensor expand_dims(const Tensor& x, int axis) {
  int a = cpu::normalize_axis("expand_dims", axis, x.rank() + 1);
  Shape shape = x.shape();
  shape.insert(shape.begin() + a, 1);
  return x.reshape(shape);
}

Tensor squeeze(const Tensor& x, const std::vector<int>& axes) {
  std::vector<bool> drop(x.shape().size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < drop.size(); ++d) drop[d] = x.shape()[d] == 1;
  } else {
    for (int a : cpu::normalize_axes("squeeze", axes, x.rank())) {
      if (x.shape()[static_cast<size_t>(a)] != 1)
        throw InvalidArgumentError(fmt::format(
            "squeeze: axis {} of shape {} has size {}; only size-1 axes can be squeezed", a,
            shape_str(x.shape()), x.shape()[static_cast<size_t>(a)]));
      drop[static_cast<size_t>(a)] = true;
    }
  }
  Shape shape;
  for (size_t d = 0; d < drop.size(); ++d)
    if (!drop[d]) shape.push_back(x.shape()[d]);
  return x.reshape(shape);
}

Tensor transpose(const Tensor& x, const std::vector<int>& perm) {
  const Device device = common_device("transpose", {&x});
  const int rank = x.rank();
  std::vector<int> order(static_cast<size_t>(rank));
  if (perm.empty()) {
    for (int d = 0; d < rank; ++d) order[static_cast<size_t>(d)] = rank - 1 - d;
  } else {
    if (static_cast<int>(perm.size()) != rank)
      throw InvalidArgumentError(fmt::format(
          "transpose: perm [{}] has {} entries for a tensor of rank {} (shape {}); give one "
          "entry per axis",
          fmt::join(perm, ", "), perm.size(), rank, shape_str(x.shape())));
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (size_t d = 0; d < perm.size(); ++d) {
      int a = cpu::normalize_axis("transpose", perm[d], rank);
      if (seen[static_cast<size_t>(a)])
        throw InvalidArgumentError(fmt::format(
            "transpose: perm [{}] lists axis {} twice; it must be a permutation of 0..{}",
            fmt::join(perm, ", "), perm[d], rank - 1));
      seen[static_cast<size_t>(a)] = true;
      order[d] = a;
    }
  }
  Shape out_shape(static_cast<size_t>(rank));
  for (size_t d = 0; d < order.size(); ++d) out_shape[d] = x.shape()[static_cast<size_t>(order[d])];
  Tensor out = Tensor::empty(out_shape, x.dtype(), device);
  run_kernel<OpId::kTranspose>("transpose", device, x.dtype(), x, order, out);
  if (!needs_recording({&x})) return out;
  std::vector<int> inverse(order.size());
  for (size_t d = 0; d < order.size(); ++d)
    inverse[static_cast<size_t>(order[d])] = static_cast<int>(d);
  return record(out, "transpose", {x},
                [inverse](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {transpose(grad, inverse)};
                });
}

Tensor concat(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw InvalidArgumentError("concat: got no tensors; pass at least one");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined())
      throw InvalidArgumentError(fmt::format("concat: tensor {} is undefined", i));
  const Tensor& first = tensors[0];
  const Device device = common_device("concat", {&first});
  const int a = cpu::normalize_axis("concat", axis, first.rank());
  Shape out_shape = first.shape();
  out_shape[static_cast<size_t>(a)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    common_device("concat", {&first, &t});
    if (t.dtype() != first.dtype())
      throw InvalidArgumentError(
          fmt::format("concat: tensor {} has dtype {} but tensor 0 has {}; cast them to one dtype",
                      i, dtype_name(t.dtype()), dtype_name(first.dtype())));
    bool same = t.rank() == first.rank();
    for (int d = 0; same && d < t.rank(); ++d)
      same = d == a || t.shape()[static_cast<size_t>(d)] == first.shape()[static_cast<size_t>(d)];
    if (!same)
      throw InvalidArgumentError(fmt::format(
          "concat: tensor {} has shape {} and tensor 0 has {}; all dimensions but axis {} must "
          "match",
          i, shape_str(t.shape()), shape_str(first.shape()), axis));
    out_shape[static_cast<size_t>(a)] += t.shape()[static_cast<size_t>(a)];
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), device);
  run_kernel<OpId::kConcat>("concat", device, first.dtype(), tensors, a, out);
  std::vector<int64_t> sizes;
  for (const Tensor& t : tensors) sizes.push_back(t.shape()[static_cast<size_t>(a)]);
  return record(out, "concat", tensors,
                [sizes, a](const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
                  std::vector<Tensor> grads(sizes.size());
                  std::vector<int64_t> begin(grad.shape().size(), 0);
                  for (size_t i = 0; i < sizes.size(); ++i) {
                    if (needs[i]) {
                      Shape size = grad.shape();
                      size[static_cast<size_t>(a)] = sizes[i];
                      grads[i] = copy_window(grad, begin, size);
                    }
                    begin[static_cast<size_t>(a)] += sizes[i];
                  }
                  return grads;
                });
}

Tensor stack(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw InvalidArgumentError("stack: got no tensors; pass at least one");
  const int a = cpu::normalize_axis("stack", axis, tensors[0].rank() + 1);
  std::vector<Tensor> expanded;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined())
      throw InvalidArgumentError(fmt::format("stack: tensor {} is undefined", i));
    if (tensors[i].shape() != tensors[0].shape())
      throw InvalidArgumentError(fmt::format(
          "stack: tensor {} has shape {} but tensor 0 has {}; stacked tensors must have one shape",
          i, shape_str(tensors[i].shape()), shape_str(tensors[0].shape())));
    expanded.push_back(expand_dims(tensors[i], a));
  }
  return concat(expanded, a);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size) {
  common_device("slice", {&x});
  const Shape& shape = x.shape();
  if (begin.size() != shape.size() || size.size() != shape.size())
    throw InvalidArgumentError(fmt::format(
        "slice: begin has {} and size {} entries for a tensor of rank {} (shape {}); give one "
        "per axis",
        begin.size(), size.size(), shape.size(), shape_str(shape)));
  Shape out_shape(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t extent = size[d] == -1 ? shape[d] - begin[d] : size[d];
    if (begin[d] < 0 || begin[d] > shape[d] || extent < 0 || begin[d] + extent > shape[d])
      throw InvalidArgumentError(fmt::format(
          "slice: axis {} has size {}; begin {} with size {} does not fit (begin [{}], size [{}])",
          d, shape[d], begin[d], size[d], fmt::join(begin, ", "), fmt::join(size, ", ")));
    out_shape[d] = extent;
  }
  Tensor out = copy_window(x, begin, out_shape);
  if (!needs_recording({&x})) return out;
  return record(out, "slice", {x},
                [begin, from = shape](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  Tensor dx = Tensor::empty(from, grad.dtype(), grad.device());
                  run_kernel<OpId::kSliceGradient>("slice", grad.device(), grad.dtype(), grad,
                                                   begin, dx);
                  return {dx};
                });
}

}  // namespace est::ops
