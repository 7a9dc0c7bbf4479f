// What a Dataset yields: one element, a structure of tensors.
//
// An element is either a Features map (name -> tensor) plus labels, which is what an Estimator's
// model_fn receives, or a single tensor (`value`), which is what range() or a TFRecord reader
// yields before parsing. Tensors in an element are treated as immutable: stages share them
// (cache, shuffle buffers) rather than copy them, so a map function must return new tensors
// instead of writing into its input's storage.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::data {

using ops::DType;
using ops::Shape;
using ops::Tensor;

using Features = std::map<std::string, Tensor>;  // e.g. {"image": uint8 [28, 28, 1]}

struct Element {
  Features features;
  Tensor labels;  // may be undefined (unlabelled data, predict mode)
  Tensor value;   // a single-tensor element: features empty and labels undefined

  Element() = default;
  explicit Element(Tensor single) : value(std::move(single)) {}
  Element(Features features_in, Tensor labels_in = {})
      : features(std::move(features_in)), labels(std::move(labels_in)) {}

  bool is_single() const { return value.defined(); }
};

// The names under which an element's tensors appear in error messages, padded_batch's
// `padded_shapes` and `padding_values`: a feature's own name, then these two.
inline constexpr std::string_view kLabelsName = "labels";
inline constexpr std::string_view kValueName = "value";

// Calls fn(name, tensor) for every defined tensor of the element: features in name order, then
// labels, then value. Two elements of the same structure visit their tensors in the same order.
void for_each_component(const Element& element,
                        const std::function<void(std::string_view, const Tensor&)>& fn);

// Byte strings travel as uint8 [length] tensors: this framework's tensors have no string dtype.
Tensor bytes_tensor(std::string_view bytes);
std::string tensor_bytes(const Tensor& tensor);  // the raw bytes of a uint8 (or any) tensor

// Copies row `row` of a tensor of shape [n, ...] into a new tensor of shape [...].
Tensor slice_row(const Tensor& tensor, int64_t row);

// "features {image: uint8 [28, 28, 1]}, labels int64 []" for error messages.
std::string structure_str(const Element& element);

}  // namespace est::data

namespace est {
using data::Features;
}  // namespace est
