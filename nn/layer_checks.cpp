// Shared input checks for the layers.
#include "nn/layer_checks.h"

#include <fmt/format.h>

namespace est::nn {

using ops::shape_str;

void check_layer_input(std::string_view layer, const Tensor& x, int min_rank,
                       std::string_view expected, int exact_rank) {
  if (!x.defined())
    throw InvalidArgumentError(fmt::format("{}: the input tensor is undefined", layer));
  if (!is_floating(x.dtype()))
    throw InvalidArgumentError(
        fmt::format("{}: expected a float32 or float64 input, got {}; cast it first (ops::cast)",
                    layer, dtype_name(x.dtype())));
  bool rank_ok = exact_rank > 0 ? x.rank() == exact_rank : x.rank() >= min_rank;
  if (!rank_ok)
    throw InvalidArgumentError(
        fmt::format("{}: expected input {}, got shape {}", layer, expected, shape_str(x.shape())));
}

}  // namespace est::nn
