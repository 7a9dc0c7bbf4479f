// The host side's WindowGeometry (nn_launch.h) from cpu::Window2D, for the plain kernels of
// conv_direct.cu and pool_kernels.cu (nvcc's C++17 reads nn_launch.h, not window.h).
#pragma once

#include "ops/cpu/window.h"
#include "ops/cuda/nn_launch.h"

namespace est::ops::cuda {

inline WindowGeometry window_geometry(const cpu::Window2D& w) {
  return {.batch = w.batch,
          .in_h = w.in_h,
          .in_w = w.in_w,
          .in_c = w.in_c,
          .kernel_h = w.kernel_h,
          .kernel_w = w.kernel_w,
          .out_h = w.out_h,
          .out_w = w.out_w,
          .out_c = w.out_c,
          .stride_h = w.stride_h,
          .stride_w = w.stride_w,
          .dilation_h = w.dilation_h,
          .dilation_w = w.dilation_w,
          .pad_top = w.pad_top,
          .pad_left = w.pad_left};
}

}  // namespace est::ops::cuda
