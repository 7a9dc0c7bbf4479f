// Global-norm clipping on the ops, accumulated in double on the host.
#include "nn/clipping.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/math.h"

namespace est::nn::optim {

double global_norm(const std::vector<Tensor>& tensors) {
  ops::NoGradGuard no_grad;
  double total = 0.0;
  for (const Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) total += ops::sum(ops::square(t)).item();
  return std::sqrt(total);
}

ClippedTensors clip_by_global_norm(const std::vector<Tensor>& tensors, double clip_norm) {
  if (!(clip_norm > 0) || !std::isfinite(clip_norm))
    throw InvalidArgumentError(fmt::format(
        "clip_by_global_norm: clip_norm must be positive and finite, got {}", clip_norm));
  ClippedTensors out;
  out.global_norm = global_norm(tensors);
  double scale = std::isfinite(out.global_norm) ? clip_norm / std::max(out.global_norm, clip_norm)
                                                : std::numeric_limits<double>::quiet_NaN();
  ops::NoGradGuard no_grad;
  out.tensors.reserve(tensors.size());
  for (const Tensor& t : tensors)
    out.tensors.push_back(!t.defined() || scale == 1.0 ? t : ops::mul(t, scale));
  return out;
}

}  // namespace est::nn::optim
