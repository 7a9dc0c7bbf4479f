// A tensor viewed as [outer, size, inner] around one axis: what gather, concat, softmax, the
// losses, argmax and each pass of a reduction iterate over, on every backend (ops/cpu and
// ops/cuda kernels share it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

// The passes of a reduction of `shape` over `axes` (normalised), as both backends run it:
// size-1 axes dropped, adjacent axes that are both reduced or both kept merged into one group,
// then one pass per group of reduced axes, the last group first, each reducing `size` of the
// array left by the pass before viewed as [outer, size, inner]. At least one pass: a reduction
// over size-1 axes only is one copy (size 1).
inline std::vector<AxisLayout> reduction_passes(const Shape& shape, const std::vector<int>& axes) {
  std::vector<bool> reduced(shape.size(), false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  struct Group {
    int64_t size;
    bool reduced;
  };
  std::vector<Group> groups;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t size = shape[d];
    if (size == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d])
      groups.back().size *= size;
    else
      groups.push_back({size, reduced[d]});
  }
  const auto is_reduced = [](const Group& g) { return g.reduced; };
  const int64_t count =
      std::max<int64_t>(1, std::count_if(groups.begin(), groups.end(), is_reduced));
  std::vector<AxisLayout> passes;
  for (int64_t pass = 0; pass < count; ++pass) {
    auto last = std::find_if(groups.rbegin(), groups.rend(), is_reduced);
    const size_t split =
        last == groups.rend() ? groups.size() : static_cast<size_t>(groups.rend() - last) - 1;
    AxisLayout layout;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i < split)
        layout.outer *= groups[i].size;
      else if (i == split)
        layout.size = groups[i].size;
      else
        layout.inner *= groups[i].size;
    }
    passes.push_back(layout);
    if (split < groups.size()) groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(split));
  }
  return passes;
}

}  // namespace est::ops
