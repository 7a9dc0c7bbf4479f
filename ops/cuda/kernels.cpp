// The CUDA backend's kernels in the registry's signatures (ops/kernel_ops.h): each makes its
// tensors' GPU current, turns shapes into the launch arguments of launch.h (broadcast strides,
// [outer, r, inner] passes) and queues the kernel on the device's compute stream. Nothing here
// waits for the GPU; results are read through copies (copy.cpp), which order themselves after
// the compute stream.
#include "ops/cuda/kernels.h"

#include <fmt/format.h>

#include <algorithm>

#include <cuda_runtime.h>

#include "ops/axis_layout.h"
#include "ops/cuda/check.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/reduce_plan.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

int device_of(const Tensor& t) { return t.device().index; }

// out's shape and each operand's strides along it (0 where broadcast).
Broadcast make_broadcast(const Shape& out, std::initializer_list<const Shape*> operands) {
  if (out.size() > static_cast<size_t>(kMaxRank))
    throw UnimplementedError(fmt::format(
        "the CUDA elementwise kernels handle up to {} dimensions, got shape {}; reshape first",
        kMaxRank, shape_str(out)));
  Broadcast b;
  b.rank = static_cast<int>(out.size());
  for (size_t d = 0; d < out.size(); ++d) b.sizes[d] = out[d];
  int index = 0;
  for (const Shape* shape : operands) {
    b.contiguous[index] = num_elements(*shape) == num_elements(out);
    const size_t lead = out.size() - shape->size();
    int64_t stride = 1;
    for (size_t d = out.size(); d-- > lead;) {
      const int64_t size = (*shape)[d - lead];
      b.strides[index][d] = size == 1 ? 0 : stride;
      stride *= size;
    }
    ++index;
  }
  return b;
}

}  // namespace

void copy_on_device(const Tensor& source, Tensor& target) {
  if (source.nbytes() == 0 || source.raw_data() == target.raw_data()) return;
  DeviceGuard guard(device_of(target));
  EST_CUDA_CHECK(cudaMemcpyAsync(target.raw_data(), source.raw_data(), source.nbytes(),
                                 cudaMemcpyDeviceToDevice,
                                 static_cast<cudaStream_t>(compute_stream(device_of(target)))));
}

void fill(Tensor& out, double value) {
  DeviceGuard guard(device_of(out));
  cuda::fill(out.dtype(), out.raw_data(), out.numel(), value, compute_stream(device_of(out)));
}

void cast(const Tensor& x, Tensor& out) {
  DeviceGuard guard(device_of(x));
  cuda::cast(x.dtype(), out.dtype(), x.raw_data(), out.raw_data(), x.numel(),
             compute_stream(device_of(x)));
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceGuard guard(device_of(out));
  cuda::binary(op, a.dtype(), a.raw_data(), b.raw_data(), out.raw_data(), out.numel(),
               make_broadcast(out.shape(), {&a.shape(), &b.shape()}),
               compute_stream(device_of(out)));
}

void binary_gradient(BinaryOp op, int input, const Tensor& grad, const Tensor& a, const Tensor& b,
                     Tensor& out) {
  DeviceGuard guard(device_of(out));
  cuda::binary_gradient(op, input, grad.dtype(), grad.raw_data(), a.raw_data(), b.raw_data(),
                        out.raw_data(), out.numel(),
                        make_broadcast(grad.shape(), {&grad.shape(), &a.shape(), &b.shape()}),
                        compute_stream(device_of(out)));
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceGuard guard(device_of(out));
  cuda::compare(op, a.dtype(), a.raw_data(), b.raw_data(), static_cast<bool*>(out.raw_data()),
                out.numel(), make_broadcast(out.shape(), {&a.shape(), &b.shape()}),
                compute_stream(device_of(out)));
}

void unary(UnaryOp op, const UnaryParams& params, const Tensor& x, Tensor& y) {
  DeviceGuard guard(device_of(x));
  cuda::unary(op, params, x.dtype(), x.raw_data(), y.raw_data(), x.numel(),
              compute_stream(device_of(x)));
}

void unary_gradient(UnaryOp op, const UnaryParams& params, const Tensor& grad, const Tensor& saved,
                    Tensor& dx) {
  DeviceGuard guard(device_of(saved));
  cuda::unary_gradient(op, params, saved.dtype(), grad.raw_data(), saved.raw_data(), dx.raw_data(),
                       saved.numel(), compute_stream(device_of(saved)));
}

void add_scaled(Tensor& target, const Tensor& x, double alpha) {
  DeviceGuard guard(device_of(target));
  cuda::add_scaled(target.dtype(), target.raw_data(), x.raw_data(), alpha, target.numel(),
                   compute_stream(device_of(target)));
}

void broadcast_to(const Tensor& x, Tensor& out) {
  DeviceGuard guard(device_of(out));
  cuda::broadcast_copy(x.dtype(), x.raw_data(), out.raw_data(), out.numel(),
                       make_broadcast(out.shape(), {&x.shape()}), compute_stream(device_of(out)));
}

// One reduce_axis per pass of reduction_passes (axis_layout.h); the last pass writes into `out`.
void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, Tensor& out) {
  const int device = device_of(x);
  DeviceGuard guard(device);
  const std::vector<AxisLayout> passes = reduction_passes(x.shape(), axes);
  Tensor current = x;
  for (size_t pass = 0; pass < passes.size(); ++pass) {
    const AxisLayout& p = passes[pass];
    Tensor next =
        pass + 1 == passes.size() ? out : Tensor::empty({p.outer * p.inner}, x.dtype(), x.device());
    reduce_axis(op, current, next, p.outer, p.size, p.inner);
    current = next;
  }
}

void argmax(const Tensor& x, int axis, Tensor& out) {
  DeviceGuard guard(device_of(x));
  const AxisLayout layout = axis_layout(x.shape(), axis);
  cuda::argmax(x.dtype(), x.raw_data(), static_cast<int64_t*>(out.raw_data()), layout.outer,
               layout.size, layout.inner, compute_stream(device_of(x)));
}

void bias_add(const Tensor& x, const Tensor& bias, Tensor& out) {
  copy_on_device(x, out);
  DeviceGuard guard(device_of(out));
  const int64_t channels = bias.numel();
  cuda::bias_activation(out.dtype(), out.raw_data(), bias.raw_data(), Activation::kNone,
                        channels == 0 ? 0 : out.numel() / channels, channels,
                        compute_stream(device_of(out)));
}

void activation(const Tensor& x, Activation activation, Tensor& y) {
  copy_on_device(x, y);
  DeviceGuard guard(device_of(y));
  cuda::bias_activation(y.dtype(), y.raw_data(), nullptr, activation, y.numel(), 1,
                        compute_stream(device_of(y)));
}

void activation_gradient(const Tensor& grad, const Tensor& y, Activation activation, Tensor& dx) {
  DeviceGuard guard(device_of(y));
  cuda::activation_gradient(y.dtype(), grad.raw_data(), y.raw_data(), dx.raw_data(), activation,
                            y.numel(), compute_stream(device_of(y)));
}

void bias_gradient(const Tensor& grad, Tensor& out) {
  DeviceGuard guard(device_of(grad));
  const int64_t channels = out.numel();
  reduce_axis(ReduceOp::kSum, grad, out, 1, channels == 0 ? 0 : grad.numel() / channels, channels);
}

void reduce_axis(ReduceOp op, const Tensor& in, Tensor& out, int64_t outer, int64_t r,
                 int64_t inner) {
  if (outer * inner == 0) return;
  const int device = device_of(in);
  DeviceGuard guard(device);
  int multiprocessors = 0;
  EST_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const Stream stream = compute_stream(device);
  if (reduce_by_rows(outer, inner, multiprocessors)) {
    reduce_pass(op, in.dtype(), in.raw_data(), out.raw_data(), outer, r, inner, nullptr, nullptr,
                stream);
    return;
  }
  const ColumnReducePlan plan = plan_column_reduce(outer, r, inner, multiprocessors);
  Tensor partials;  // 8 bytes: the widest accumulator (double, int64)
  if (plan.row_chunks > 1)
    partials = Tensor::empty({plan.row_chunks * plan.columns * 8}, DType::kU8, in.device());
  reduce_pass(op, in.dtype(), in.raw_data(), out.raw_data(), outer, r, inner, &plan,
              partials.defined() ? partials.raw_data() : nullptr, stream);
}

}  // namespace est::ops::cuda
