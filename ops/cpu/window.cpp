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

}  // namespace est::ops::cpu
