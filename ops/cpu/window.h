// Sliding-window geometry shared by convolution and pooling, on every backend: TensorFlow's
// output-size and padding rules computed once, so the reference and oneDNN kernels cannot
// disagree about where a window starts.
#pragma once

#include <array>
#include <cstdint>

#include "ops/conv.h"

namespace est::ops::cpu {

// One spatial dimension of a window sweep.
struct WindowDim {
  int64_t output = 0;      // number of window positions
  int64_t pad_before = 0;  // implicit padding at the start (top / left)
  int64_t pad_after = 0;   // at the end (bottom / right); gets the odd element under `same`
};

// TensorFlow's rule: `valid` has no padding and out = (in - dilated_window) / stride + 1;
// `same` has out = ceil(in / stride) and pads the difference, the odd element at the end.
// `op` names the caller in the InvalidArgumentError thrown when the window does not fit or a
// stride/dilation/window is not positive.
WindowDim window_dim(int64_t input, int64_t window, int stride, int dilation, Padding padding,
                     const char* op);

// A 2-D sweep over NHWC data, as both convolution and pooling use it.
struct Window2D {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;  // input [N, H, W, C]
  int64_t kernel_h = 0, kernel_w = 0;               // window [KH, KW]
  int64_t out_h = 0, out_w = 0, out_c = 0;          // output [N, OH, OW, OC]
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// The sweep of a kernel_h x kernel_w window over NHWC `input` (window_dim on both dimensions;
// its InvalidArgumentError naming `op`). out_c is the input's channels: a convolution sets its
// filters.
Window2D make_window(const Shape& input, int64_t kernel_h, int64_t kernel_w,
                     std::array<int, 2> strides, std::array<int, 2> dilations, Padding padding,
                     const char* op);

}  // namespace est::ops::cpu
