// Host-side reading of metric inputs: values as doubles or class ids, TF1's squeezing of a
// trailing size-1 dimension, and TF1's broadcasting of weights. Internal to nn/metrics*.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::nn::metrics::detail {

// The values of a defined CPU tensor, converted. `metric` and `what` ("labels") name it in errors.
std::vector<double> values_of(const Tensor& tensor, std::string_view metric, std::string_view what);
// Integer class ids: the tensor must have an integer or bool dtype.
std::vector<int64_t> class_ids_of(const Tensor& tensor, std::string_view metric,
                                  std::string_view what);

// Shapes of labels and predictions after TF1's remove_squeezable_dimensions (a trailing
// dimension of size 1 dropped from the one whose rank is larger by one); throws
// InvalidArgumentError naming the metric when they then differ.
Shape matching_shape(const Tensor& labels, const Tensor& predictions, std::string_view metric);

// `weights` broadcast to `shape` as TF1 does, one value per element; all ones when weights is
// undefined. InvalidArgumentError naming the metric and both shapes when it does not broadcast.
std::vector<double> broadcast_weights(const Tensor& weights, const Shape& shape,
                                      std::string_view metric);

// Labels, predictions and weights of an elementwise metric, one value per element each:
// matching_shape, values_of and broadcast_weights together.
struct PairedValues {
  std::vector<double> labels;
  std::vector<double> predictions;
  std::vector<double> weights;
};
PairedValues paired_values(const Tensor& labels, const Tensor& predictions, const Tensor& weights,
                           std::string_view metric);

}  // namespace est::nn::metrics::detail
