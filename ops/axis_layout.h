// A tensor viewed as [outer, size, inner] around one axis: what gather, concat, softmax and the
// losses iterate over, on every backend (ops/cpu and ops/cuda kernels share it).
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace est::ops {

struct AxisLayout {
  int64_t outer = 1;  // the product of the dimensions before the axis
  int64_t size = 1;   // the axis's own extent (rows of gather's params, a softmax's classes)
  int64_t inner = 1;  // the product of the dimensions after it
};

inline AxisLayout axis_layout(const Shape& shape, int axis) {
  AxisLayout layout;
  for (int d = 0; d < axis; ++d) layout.outer *= shape[static_cast<size_t>(d)];
  layout.size = shape[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) layout.inner *= shape[d];
  return layout;
}

}  // namespace est::ops
