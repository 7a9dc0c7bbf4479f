// Reading metric inputs on the host, and TF1's squeeze and weight-broadcast rules.
#include "nn/metrics_input.h"

#include <string>

#include "ops/error.h"

namespace est::nn::metrics::detail {
namespace {

void check_readable(const Tensor& tensor, std::string_view metric, std::string_view what) {
  if (!tensor.defined())
    throw InvalidArgumentError(std::string(metric) + ": " + std::string(what) +
                               " is an undefined Tensor; pass the batch's tensor");
  if (!tensor.device().is_cpu())
    throw UnimplementedError(std::string(metric) + ": " + std::string(what) + " lives on " +
                             tensor.device().str() +
                             "; metrics read host tensors, copy it to the CPU first");
}

}  // namespace

std::vector<double> values_of(const Tensor& tensor, std::string_view metric,
                              std::string_view what) {
  check_readable(tensor, metric, what);
  return tensor.to_vector<double>();
}

std::vector<int64_t> class_ids_of(const Tensor& tensor, std::string_view metric,
                                  std::string_view what) {
  check_readable(tensor, metric, what);
  if (ops::is_floating(tensor.dtype()))
    throw InvalidArgumentError(
        std::string(metric) + ": " + std::string(what) + " must hold integer class ids, got a " +
        std::string(ops::dtype_name(tensor.dtype())) + " tensor " + ops::shape_str(tensor.shape()) +
        "; take argmax of scores or cast the ids to int64");
  return tensor.to_vector<int64_t>();
}

Shape matching_shape(const Tensor& labels, const Tensor& predictions, std::string_view metric) {
  check_readable(labels, metric, "labels");
  check_readable(predictions, metric, "predictions");
  Shape label_shape = labels.shape();
  Shape prediction_shape = predictions.shape();
  if (label_shape.size() == prediction_shape.size() + 1 && label_shape.back() == 1) {
    label_shape.pop_back();
  } else if (prediction_shape.size() == label_shape.size() + 1 && prediction_shape.back() == 1) {
    prediction_shape.pop_back();
  }
  if (label_shape != prediction_shape)
    throw InvalidArgumentError(std::string(metric) + ": labels " + ops::shape_str(labels.shape()) +
                               " and predictions " + ops::shape_str(predictions.shape()) +
                               " must have the same shape (a trailing dimension of 1 may differ)");
  return label_shape;
}

std::vector<double> broadcast_weights(const Tensor& weights, const Shape& shape,
                                      std::string_view metric) {
  int64_t count = ops::num_elements(shape);
  if (!weights.defined()) return std::vector<double>(static_cast<size_t>(count), 1.0);
  std::vector<double> values = values_of(weights, metric, "weights");
  if (weights.rank() == 0) return std::vector<double>(static_cast<size_t>(count), values[0]);

  // TF1: squeeze or expand the last dimension when ranks differ by one.
  Shape weight_shape = weights.shape();
  if (weight_shape.size() == shape.size() + 1 && weight_shape.back() == 1) {
    weight_shape.pop_back();
  } else if (shape.size() == weight_shape.size() + 1) {
    weight_shape.push_back(1);
  }
  bool broadcastable = weight_shape.size() == shape.size();
  for (size_t axis = 0; broadcastable && axis < shape.size(); ++axis) {
    broadcastable = weight_shape[axis] == 1 || weight_shape[axis] == shape[axis];
  }
  if (!broadcastable)
    throw InvalidArgumentError(std::string(metric) + ": weights " +
                               ops::shape_str(weights.shape()) + " do not broadcast to " +
                               ops::shape_str(shape) +
                               "; pass a scalar or a tensor of that rank whose dimensions are 1 "
                               "or equal to it");

  // Walk the output in row-major order, mapping each index to the weights' index.
  const size_t rank = shape.size();
  std::vector<int64_t> weight_strides(rank, 0);
  int64_t stride = 1;
  for (size_t axis = rank; axis-- > 0;) {
    weight_strides[axis] = weight_shape[axis] == 1 ? 0 : stride;
    stride *= weight_shape[axis];
  }
  std::vector<double> out(static_cast<size_t>(count));
  std::vector<int64_t> index(rank, 0);
  int64_t weight_offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    out[static_cast<size_t>(i)] = values[static_cast<size_t>(weight_offset)];
    for (size_t axis = rank; axis-- > 0;) {
      ++index[axis];
      weight_offset += weight_strides[axis];
      if (index[axis] < shape[axis]) break;
      weight_offset -= weight_strides[axis] * index[axis];
      index[axis] = 0;
    }
  }
  return out;
}

PairedValues paired_values(const Tensor& labels, const Tensor& predictions, const Tensor& weights,
                           std::string_view metric) {
  Shape shape = matching_shape(labels, predictions, metric);
  PairedValues paired;
  paired.labels = values_of(labels, metric, "labels");
  paired.predictions = values_of(predictions, metric, "predictions");
  paired.weights = broadcast_weights(weights, shape, metric);
  return paired;
}

}  // namespace est::nn::metrics::detail
