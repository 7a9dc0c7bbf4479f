// TensorFlow's window arithmetic (see window.h).
#include "ops/cpu/window.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/error.h"

namespace est::ops::cpu {

WindowDim window_dim(int64_t input, int64_t window, int stride, int dilation, Padding padding,
                     const char* op) {
  if (window < 1 || stride < 1 || dilation < 1)
    throw InvalidArgumentError(
        fmt::format("{}: window {}, stride {} and dilation {} must all be at least 1", op, window,
                    stride, dilation));
  const int64_t effective = (window - 1) * dilation + 1;  // the dilated window's extent
  WindowDim dim;
  if (padding == Padding::kValid) {
    if (input < effective)
      throw InvalidArgumentError(fmt::format(
          "{}: a window of {} (size {}, dilation {}) does not fit an input of {} with 'valid' "
          "padding; use 'same' padding or a larger input",
          op, effective, window, dilation, input));
    dim.output = (input - effective) / stride + 1;
    return dim;
  }
  dim.output = (input + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((dim.output - 1) * stride + effective - input, 0);
  dim.pad_before = total / 2;
  dim.pad_after = total - dim.pad_before;
  return dim;
}

Window2D make_window(const Shape& input, int64_t kernel_h, int64_t kernel_w,
                     std::array<int, 2> strides, std::array<int, 2> dilations, Padding padding,
                     const char* op) {
  const cpu::WindowDim h = window_dim(input[1], kernel_h, strides[0], dilations[0], padding, op);
  const cpu::WindowDim w = window_dim(input[2], kernel_w, strides[1], dilations[1], padding, op);
  Window2D window;
  window.batch = input[0];
  window.in_h = input[1];
  window.in_w = input[2];
  window.in_c = input[3];
  window.kernel_h = kernel_h;
  window.kernel_w = kernel_w;
  window.out_h = h.output;
  window.out_w = w.output;
  window.out_c = input[3];
  window.stride_h = strides[0];
  window.stride_w = strides[1];
  window.dilation_h = dilations[0];
  window.dilation_w = dilations[1];
  window.pad_top = h.pad_before;
  window.pad_bottom = h.pad_after;
  window.pad_left = w.pad_before;
  window.pad_right = w.pad_after;
  return window;
}

}  // namespace est::ops::cpu
