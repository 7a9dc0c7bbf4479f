// Input checks shared by the layers, so every layer reports bad input the same way: the
// layer's name, what it expected, what it got, and what to do.
#pragma once

#include <string_view>

#include "ops/tensor.h"

namespace est::nn {

// Throws InvalidArgumentError unless x is defined, floating and of rank >= min_rank (or
// exactly `exact_rank` when that is positive). `expected` describes the layout ("[N, H, W, C]").
void check_layer_input(std::string_view layer, const Tensor& x, int min_rank,
                       std::string_view expected, int exact_rank = 0);

}  // namespace est::nn
