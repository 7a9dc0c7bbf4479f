// PermutedTensor: a value of an ONNX graph as est's interpreter (onnx_model.cpp) holds it, a
// tensor whose axes are permuted lazily.
//
// The exporter writes ONNX's NCHW around est's NHWC ops, so a traced conv2d or pooling comes
// out as Transpose(NHWC->NCHW), Conv, Transpose(NCHW->NHWC), and est's kernels, which take
// NHWC, transpose back inside each Conv and pool. Copying every one of those transposes was
// most of a small CNN's run at batch 1. Held lazily, a Transpose only composes permutations,
// and a consumer that wants a given layout gets the stored tensor itself when the composed
// permutation is the identity (a transpose is a pure copy, so the values are the same bit for
// bit either way); header-only, as it is onnx_model.cpp's alone.
#pragma once

#include <utility>
#include <vector>

#include "ops/ops.h"

namespace est::serving {

struct PermutedTensor {
  Tensor stored;
  // The value is transpose(stored, perm); empty: `stored` itself.
  std::vector<int> perm;

  PermutedTensor() = default;
  PermutedTensor(Tensor tensor, std::vector<int> axes = {})  // NOLINT: a tensor is a value
      : stored(std::move(tensor)), perm(std::move(axes)) {
    if (is_identity(perm)) perm.clear();
  }

  bool defined() const { return stored.defined(); }
  int rank() const { return stored.rank(); }

  // The value's shape (the stored shape, permuted).
  Shape shape() const {
    if (perm.empty()) return stored.shape();
    Shape shape(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) shape[d] = stored.dim(perm[d]);
    return shape;
  }

  // The value laid out as transpose(value, axes): the stored tensor when that is how it is
  // stored, else one copy. `axes` that are not a permutation of the value's rank get
  // ops::transpose's error.
  Tensor transposed(const std::vector<int>& axes) const {
    if (!is_permutation(axes, rank())) return ops::transpose(dense(), axes);
    const std::vector<int> composed = compose(axes);
    return is_identity(composed) ? stored : ops::transpose(stored, composed);
  }

  // The value as a contiguous tensor in its own layout.
  Tensor dense() const { return perm.empty() ? stored : ops::transpose(stored, perm); }

  // transpose(value, axes) held lazily (ONNX Transpose; empty axes reverse them, as ONNX's
  // default does).
  PermutedTensor lazily_transposed(std::vector<int> axes) const {
    if (axes.empty())
      for (int d = rank() - 1; d >= 0; --d) axes.push_back(d);
    if (!is_permutation(axes, rank())) return ops::transpose(dense(), axes);
    return PermutedTensor(stored, compose(axes));
  }

  static bool is_identity(const std::vector<int>& axes) {
    for (size_t d = 0; d < axes.size(); ++d)
      if (axes[d] != static_cast<int>(d)) return false;
    return true;
  }

 private:
  // Axes of `stored` for transpose(value, axes): value axis d is stored axis perm[d].
  std::vector<int> compose(const std::vector<int>& axes) const {
    if (perm.empty()) return axes;
    std::vector<int> composed(axes.size());
    for (size_t d = 0; d < axes.size(); ++d) composed[d] = perm[static_cast<size_t>(axes[d])];
    return composed;
  }

  static bool is_permutation(const std::vector<int>& axes, int rank) {
    if (static_cast<int>(axes.size()) != rank) return false;
    std::vector<bool> seen(axes.size(), false);
    for (int axis : axes) {
      if (axis < 0 || axis >= rank || seen[static_cast<size_t>(axis)]) return false;
      seen[static_cast<size_t>(axis)] = true;
    }
    return true;
  }
};

}  // namespace est::serving
