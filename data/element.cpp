// Element helpers: visiting components, byte strings as uint8 tensors, row slices.
#include "data/element.h"

#include <cstring>

namespace est::data {

void for_each_component(const Element& element,
                        const std::function<void(std::string_view, const Tensor&)>& fn) {
  for (const auto& [name, tensor] : element.features)
    if (tensor.defined()) fn(name, tensor);
  if (element.labels.defined()) fn(kLabelsName, element.labels);
  if (element.value.defined()) fn(kValueName, element.value);
}

Tensor bytes_tensor(std::string_view bytes) {
  Tensor tensor = Tensor::empty({static_cast<int64_t>(bytes.size())}, DType::kU8);
  if (!bytes.empty()) std::memcpy(tensor.raw_data(), bytes.data(), bytes.size());
  return tensor;
}

std::string tensor_bytes(const Tensor& tensor) {
  if (!tensor.defined())
    throw InvalidArgumentError("tensor_bytes: the tensor is undefined; expected uint8 bytes");
  return std::string(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
}

Tensor slice_row(const Tensor& tensor, int64_t row) {
  if (tensor.rank() == 0)
    throw InvalidArgumentError("cannot slice a scalar tensor into rows; slices need rank >= 1");
  int64_t rows = tensor.dim(0);
  if (row < 0 || row >= rows)
    throw OutOfRangeError("row " + std::to_string(row) + " is out of range for a tensor of shape " +
                          ops::shape_str(tensor.shape()));
  Shape shape(tensor.shape().begin() + 1, tensor.shape().end());
  Tensor out = Tensor::empty(shape, tensor.dtype());
  size_t row_bytes = out.nbytes();
  if (row_bytes)
    std::memcpy(out.raw_data(),
                static_cast<const char*>(tensor.raw_data()) + static_cast<size_t>(row) * row_bytes,
                row_bytes);
  return out;
}

std::string structure_str(const Element& element) {
  auto describe = [](const Tensor& t) {
    return std::string(ops::dtype_name(t.dtype())) + " " + ops::shape_str(t.shape());
  };
  std::string out;
  if (!element.features.empty()) {
    out += "features {";
    bool first = true;
    for (const auto& [name, tensor] : element.features) {
      if (!first) out += ", ";
      first = false;
      out += name + ": " + (tensor.defined() ? describe(tensor) : "undefined");
    }
    out += "}";
  }
  if (element.labels.defined())
    out += (out.empty() ? "" : ", ") + std::string("labels ") + describe(element.labels);
  if (element.value.defined())
    out += (out.empty() ? "" : ", ") + std::string("value ") + describe(element.value);
  return out.empty() ? "empty element" : out;
}

}  // namespace est::data
