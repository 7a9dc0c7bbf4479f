// max_pool2d and avg_pool2d on the GPU: the registry's kPool2D / kPool2DGradient over the plain
// kernels of pool_kernels.cu (why not cuDNN: see there). Max pooling in training leaves the
// position of each window's first maximum in `workspace` (int64, the output's shape), which its
// gradient reads; average pooling needs no workspace.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/nn_launch.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/window_geometry.h"

namespace est::ops::cuda {

void pool2d(const Tensor& input, const Window2D& window, PoolKind kind, bool training,
            Tensor& output, Tensor& workspace) {
  const int device = input.device().index;
  DeviceGuard guard(device);
  const WindowGeometry g = window_geometry(window);
  if (kind == PoolKind::kAverage) {
    avg_pool_forward(input.dtype(), input.raw_data(), output.raw_data(), g, compute_stream(device));
    return;
  }
  int64_t* argmax = nullptr;
  if (training) {
    workspace = Tensor::empty(output.shape(), DType::kI64, output.device());
    argmax = workspace.numel() == 0 ? nullptr : workspace.data<int64_t>();
  }
  max_pool_forward(input.dtype(), input.raw_data(), output.raw_data(), argmax, g,
                   compute_stream(device));
}

void pool2d_gradient(const Tensor& grad, const Tensor& workspace, const Window2D& window,
                     PoolKind kind, Tensor& grad_input) {
  const int device = grad_input.device().index;
  DeviceGuard guard(device);
  const WindowGeometry g = window_geometry(window);
  if (kind == PoolKind::kAverage) {
    avg_pool_backward(grad.dtype(), grad.raw_data(), grad_input.raw_data(), g,
                      compute_stream(device));
    return;
  }
  if (g.out_h * g.out_w == 0) {  // no window: no argmax, every gradient is zero
    cuda::fill(grad_input.dtype(), grad_input.raw_data(), grad_input.numel(), 0.0,
               compute_stream(device));
    return;
  }
  max_pool_backward(grad.dtype(), grad.raw_data(), workspace.data<int64_t>(), grad_input.raw_data(),
                    g, compute_stream(device));
}

}  // namespace est::ops::cuda
