// Element helpers: visiting components, byte and string tensors, element copies, row slices.
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
  if (tensor.dtype() == DType::kString) {
    if (tensor.numel() != 1 || tensor.is_sparse())
      throw InvalidArgumentError(
          "tensor_bytes: expected one string, got a string tensor of shape " +
          ops::shape_str(tensor.shape()));
    return tensor.data<std::string>()[0];
  }
  return std::string(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
}

Tensor string_tensor(std::vector<std::string> values) {
  Tensor out = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kString);
  std::string* data = out.data<std::string>();
  for (size_t i = 0; i < values.size(); ++i) data[i] = std::move(values[i]);
  return out;
}

Tensor string_tensor(const std::vector<std::string>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

char* element_pointer(Tensor& tensor) {
  if (tensor.dtype() == DType::kString) return reinterpret_cast<char*>(tensor.data<std::string>());
  return static_cast<char*>(tensor.raw_data());
}

const char* element_pointer(const Tensor& tensor) {
  if (tensor.dtype() == DType::kString)
    return reinterpret_cast<const char*>(tensor.data<std::string>());
  return static_cast<const char*>(tensor.raw_data());
}

void copy_elements(char* dst, const char* src, size_t bytes, DType dtype) {
  if (bytes == 0) return;
  if (dtype != DType::kString) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* to = reinterpret_cast<std::string*>(dst);
  const auto* from = reinterpret_cast<const std::string*>(src);
  for (size_t i = 0; i < bytes / sizeof(std::string); ++i) to[i] = from[i];
}

Tensor slice_row(const Tensor& tensor, int64_t row) {
  if (tensor.rank() == 0)
    throw InvalidArgumentError("cannot slice a scalar tensor into rows; slices need rank >= 1");
  int64_t rows = tensor.dim(0);
  if (row < 0 || row >= rows)
    throw OutOfRangeError("row " + std::to_string(row) + " is out of range for a tensor of shape " +
                          ops::shape_str(tensor.shape()));
  if (tensor.is_sparse())
    throw InvalidArgumentError("cannot slice the sparse tensor of dense shape " +
                               ops::shape_str(tensor.shape()) +
                               " into rows; slice its dense form (sparse::to_dense)");
  Shape shape(tensor.shape().begin() + 1, tensor.shape().end());
  Tensor out = Tensor::empty(shape, tensor.dtype());
  size_t row_bytes = out.nbytes();
  copy_elements(element_pointer(out),
                element_pointer(tensor) + static_cast<size_t>(row) * row_bytes, row_bytes,
                tensor.dtype());
  return out;
}

std::string structure_str(const Element& element) {
  auto describe = [](const Tensor& t) {
    return std::string(t.is_sparse() ? "sparse " : "") + std::string(ops::dtype_name(t.dtype())) +
           " " + ops::shape_str(t.shape());
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
