// dropout: the mode check and rate validation; the mask is ops::dropout's.
#include "nn/layers_dropout.h"

#include <fmt/format.h>

#include "nn/layer_checks.h"
#include "ops/nn_ops.h"

namespace est::nn {

Tensor dropout(ModelContext& ctx, const Tensor& x, double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    throw InvalidArgumentError(fmt::format(
        "dropout: rate must be in [0, 1), got {}; it is the fraction of units dropped", rate));
  check_layer_input("dropout", x, 0, "of any shape");
  if (!ctx.is_training() || rate == 0.0) return x;
  return ops::dropout(x, rate, ctx.generator());
}

}  // namespace est::nn
