// What a Dataset yields: one element, a structure of tensors.
//
// An element is either a Features map (name -> tensor) plus labels, which is what an Estimator's
// model_fn receives, or a single tensor (`value`), which is what range() or a TFRecord reader
// yields before parsing. Tensors in an element are treated as immutable: stages share them
// (cache, shuffle buffers) rather than copy them, so a map function must return new tensors
// instead of writing into its input's storage.
//
// A component may be a string tensor (DType::kString, tf.string) or a sparse tensor
// (Tensor::sparse, tf.SparseTensor), as TensorFlow's input pipelines carry them: the stages copy
// strings element by element (copy_elements) and never byte by byte, and sparse components are
// batched as tf.data batches SparseTensors.
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

// One byte string as a uint8 [length] tensor (what TFRecord readers yield before parsing;
// image bytes); a string-typed element is a DType::kString tensor instead (string_tensor).
Tensor bytes_tensor(std::string_view bytes);
// The raw bytes of a uint8 (or any numeric) tensor, or the single string of a string tensor.
std::string tensor_bytes(const Tensor& tensor);
// A string tensor (tf.constant of strings): `values` laid out row-major in `shape` (default: a
// vector of them).
Tensor string_tensor(std::vector<std::string> values);
Tensor string_tensor(const std::vector<std::string>& values, const Shape& shape);

// The elements of a dense tensor as bytes (std::string objects for a string tensor), for
// stages that move whole rows; copy_elements copies `bytes` of them from `src` to `dst`, by
// assignment for strings and by memcpy otherwise. Raw memcpy of a string tensor's elements
// would share and later free the same heap buffers twice.
char* element_pointer(Tensor& tensor);
const char* element_pointer(const Tensor& tensor);
void copy_elements(char* dst, const char* src, size_t bytes, DType dtype);

// Copies row `row` of a dense tensor of shape [n, ...] into a new tensor of shape [...].
Tensor slice_row(const Tensor& tensor, int64_t row);

// "features {image: uint8 [28, 28, 1]}, labels int64 []" for error messages.
std::string structure_str(const Element& element);

}  // namespace est::data

namespace est {
using data::Features;
}  // namespace est
