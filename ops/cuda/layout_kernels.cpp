// The CUDA backend's layout and indexing kernels in the registry's signatures
// (ops/kernel_ops.h): transpose, concat, slice and its gradient, gather and its gradient,
// one_hot. Shapes become the launch arguments of ops/cuda/layout.h (a strided view with its
// dims merged where the strides allow, as ops/cpu/strided_copy.h plans them), and the kernels
// run on the tensors' device's compute stream; none waits for the GPU. gather's ids are checked
// on the device and a bad one is reported at the next synchronisation point, in the words of
// the reference's InvalidArgumentError (ops/cpu/array_kernels.cpp; ops/cuda/id_check.h).
#include <fmt/format.h>

#include "ops/axis_layout.h"
#include "ops/cuda/check.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/id_check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/layout.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

int device_of(const Tensor& t) { return t.device().index; }
int element_size(const Tensor& t) { return static_cast<int>(dtype_size(t.dtype())); }

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// The view of `dims` (output-ordered) with one stride per dim, size-1 dims dropped and
// neighbours merged where one walks on into the other.
StridedView plan_view(std::string_view op, const Shape& dims, const std::vector<int64_t>& strides) {
  std::vector<int64_t> sizes, steps;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!sizes.empty() && steps.back() == strides[d] * dims[d]) {
      sizes.back() *= dims[d];
      steps.back() = strides[d];
    } else {
      sizes.push_back(dims[d]);
      steps.push_back(strides[d]);
    }
  }
  if (sizes.size() > static_cast<size_t>(kMaxRank))
    throw UnimplementedError(fmt::format(
        "{}: the CUDA layout kernels handle views of up to {} dimensions after merging, got "
        "shape {}; reshape first",
        op, kMaxRank, shape_str(dims)));
  StridedView view;
  view.rank = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    view.sizes[d] = sizes[d];
    view.strides[d] = steps[d];
  }
  return view;
}

int64_t window_offset(const Shape& shape, const std::vector<int64_t>& begin) {
  const std::vector<int64_t> strides = contiguous_strides(shape);
  int64_t offset = 0;
  for (size_t d = 0; d < begin.size(); ++d) offset += begin[d] * strides[d];
  return offset;
}

}  // namespace

void transpose(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  DeviceGuard guard(device_of(x));
  const std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  std::vector<int64_t> strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) strides[d] = in_strides[static_cast<size_t>(perm[d])];
  strided_gather(element_size(x), x.raw_data(), out.raw_data(), out.numel(),
                 plan_view("transpose", out.shape(), strides), compute_stream(device_of(x)));
}

void concat(const std::vector<Tensor>& inputs, int axis, Tensor& out) {
  DeviceGuard guard(device_of(out));
  const AxisLayout layout = axis_layout(out.shape(), axis);
  const int64_t out_row = layout.size * layout.inner;
  int64_t column = 0;
  for (const Tensor& t : inputs) {
    const int64_t chunk = t.shape()[static_cast<size_t>(axis)] * layout.inner;
    copy_columns(element_size(out), t.raw_data(), out.raw_data(), layout.outer, chunk, out_row,
                 column, compute_stream(device_of(out)));
    column += chunk;
  }
}

void slice(const Tensor& x, const std::vector<int64_t>& begin, Tensor& out) {
  DeviceGuard guard(device_of(x));
  const auto* base =
      static_cast<const char*>(x.raw_data()) + window_offset(x.shape(), begin) * element_size(x);
  strided_gather(element_size(x), base, out.raw_data(), out.numel(),
                 plan_view("slice", out.shape(), contiguous_strides(x.shape())),
                 compute_stream(device_of(x)));
}

void slice_gradient(const Tensor& grad, const std::vector<int64_t>& begin, Tensor& dx) {
  const int device = device_of(dx);
  DeviceGuard guard(device);
  // Zero bytes are 0 in every dtype (+0.0, false), as the reference's fill(dx, 0).
  EST_CUDA_CHECK(cudaMemsetAsync(dx.raw_data(), 0, dx.nbytes(),
                                 static_cast<cudaStream_t>(compute_stream(device))));
  auto* base =
      static_cast<char*>(dx.raw_data()) + window_offset(dx.shape(), begin) * element_size(dx);
  strided_scatter(element_size(dx), base, grad.raw_data(), grad.numel(),
                  plan_view("slice", grad.shape(), contiguous_strides(dx.shape())),
                  compute_stream(device));
}

void gather(const Tensor& params, const Tensor& indices, int axis, Tensor& out) {
  const int device = device_of(params);
  DeviceGuard guard(device);
  const AxisLayout layout = axis_layout(params.shape(), axis);
  if (indices.numel() == 0) return;
  Tensor flag = Tensor::empty({1}, DType::kI64, params.device());
  cuda::gather(element_size(params), params.raw_data(), indices.dtype(), indices.raw_data(),
               out.raw_data(), layout.outer, layout.size, layout.inner, indices.numel(),
               static_cast<int64_t*>(flag.raw_data()), /*wait=*/false, compute_stream(device));
  // Checked at the next synchronisation point, not here (ops/cuda/id_check.h).
  record_bad_id(device, IdCheckOp::kGather, static_cast<const int64_t*>(flag.raw_data()),
                indices.dtype(), indices.raw_data(), layout.size, axis);
}

void gather_gradient(const Tensor& grad, const Tensor& indices, int axis, Tensor& dparams) {
  const int device = device_of(dparams);
  DeviceGuard guard(device);
  const AxisLayout layout = axis_layout(dparams.shape(), axis);
  cuda::gather_gradient(grad.dtype(), grad.raw_data(), indices.dtype(), indices.raw_data(),
                        dparams.raw_data(), layout.outer, layout.size, layout.inner,
                        indices.numel(), compute_stream(device));
}

void one_hot(const Tensor& indices, double on_value, double off_value, Tensor& out) {
  const int device = device_of(out);
  DeviceGuard guard(device);
  cuda::one_hot(indices.dtype(), indices.raw_data(), out.dtype(), out.raw_data(), indices.numel(),
                out.shape().back(), on_value, off_value, compute_stream(device));
}

}  // namespace est::ops::cuda
