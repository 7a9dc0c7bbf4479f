// Tensor: the value type every layer of the framework passes around.
//
// A Tensor is a cheap handle (one shared_ptr) to an implementation holding shape, dtype, device,
// shared storage and the autograd links. Copying a Tensor shares everything, as in TensorFlow
// and PyTorch. Data is always contiguous and row-major; views that would need strides (slice,
// transpose) are materialised by their ops instead, which keeps every kernel simple.
//
// Two kinds of tensor carry no plain bytes, and raw_data() refuses them (so no byte-copying
// code can duplicate or leak what they hold): string tensors (DType::kString, tf.string: CPU
// only, elements read with data<std::string>()), and sparse tensors (tf.SparseTensor: int64
// indices [n, rank] and values [n] of a dense shape, read with indices() and values(); the
// sparse:: functions in ops/sparse.h work on them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/error.h"

namespace est::ops {

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[64, 28, 28, 1]"

class Storage;
struct GradNode;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() is false

  // Creation. Memory comes from the device's caching allocator.
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = {});
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = {});
  static Tensor ones(const Shape& shape, DType dtype = DType::kF32, Device device = {});
  static Tensor full(const Shape& shape, double value, DType dtype = DType::kF32,
                     Device device = {});
  static Tensor scalar(double value, DType dtype = DType::kF32);
  // A sparse tensor of dense shape `dense_shape`: `indices` int64 [n, rank], `values` [n] on the
  // same device. Indices are checked to lie inside the shape; their order is kept as given.
  static Tensor sparse(Tensor indices, Tensor values, Shape dense_shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int rank() const { return static_cast<int>(shape().size()); }
  int64_t dim(int axis) const;  // negative axes count from the end
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }

  // Sparse tensors: shape() is the dense shape, dtype() and device() the values'.
  bool is_sparse() const;
  const Tensor& indices() const;  // int64 [n, rank]; an InvalidArgumentError on a dense tensor
  const Tensor& values() const;   // [n]; the same

  // Raw access. data<T>() checks that T matches the dtype. raw_data() is an
  // InvalidArgumentError on string and sparse tensors (see the top of this file).
  void* raw_data();
  const void* raw_data() const;
  template <class T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(element_data());
  }
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(element_data());
  }
  // Element access for tests and small host-side work; converts to double. A tensor on a GPU
  // is copied to the host first (an explicit read, never done inside an op).
  double at(std::initializer_list<int64_t> index) const;
  double item() const;  // the single element of a one-element tensor
  template <class T>
  std::vector<T> to_vector() const;  // converts from any numeric dtype; strings as they are

  // Same storage, new shape (one dimension may be -1). Keeps autograd links.
  Tensor reshape(const Shape& shape) const;
  // Deep copy on the same device, with no autograd history.
  Tensor clone() const;
  // Copies values from `source` (same shape and dtype, any device) into this tensor's storage,
  // in place.
  void copy_from(const Tensor& source);
  // This tensor on `device`: itself when it is already there, else a copy whose gradient is
  // copied back (ops::copy_to). The one way tensors move between devices.
  Tensor to(Device device) const;
  // Fills in place.
  void fill(double value);
  // A new handle on the same storage with no autograd history (and requires_grad false).
  Tensor detach() const;
  // True when both handles share one storage buffer.
  bool shares_storage(const Tensor& other) const;

  // Autograd. Leaves with requires_grad accumulate into grad() on backward().
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad);
  Tensor grad() const;  // undefined until a backward pass reached this leaf
  void set_grad(const Tensor& grad);
  const std::shared_ptr<GradNode>& grad_node() const;
  void set_grad_node(std::shared_ptr<GradNode> node);
  const TensorImpl* impl() const { return impl_.get(); }

  std::string str(int max_elements = 12) const;  // shape, dtype and leading values

 private:
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  void check_type(DType requested) const;
  void* element_data() const;  // the elements of a dense tensor of any dtype
  std::shared_ptr<TensorImpl> impl_;
};

// The error of a numeric kernel handed a string tensor.
[[noreturn]] void throw_numeric_op_on_strings();

// Calls `fn(T{})` with T the C++ type of `dtype`, for the numeric dtypes; `fn` returns the same
// type for every T. A string dtype is an InvalidArgumentError (no numeric op takes strings).
template <class Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kF64:
      return fn(double{});
    case DType::kI32:
      return fn(int32_t{});
    case DType::kI64:
      return fn(int64_t{});
    case DType::kU8:
      return fn(uint8_t{});
    case DType::kBool:
      return fn(bool{});
    case DType::kBF16:
      return fn(bfloat16{});
    case DType::kString:
      throw_numeric_op_on_strings();
  }
  throw InternalError("unknown dtype");
}

// Like dispatch_dtype for floating types only; other dtypes are an InvalidArgumentError
// naming `op`.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kF64:
      return fn(double{});
    default:
      throw InvalidArgumentError(std::string(op) + ": expected a float32 or float64 tensor, got " +
                                 std::string(dtype_name(dtype)));
  }
}

// The ops' argument check for a floating tensor (float32, float64 or bfloat16): an
// InvalidArgumentError naming `op` otherwise.
inline void require_floating_dtype(DType dtype, std::string_view op) {
  if (!is_floating(dtype))
    throw InvalidArgumentError(std::string(op) +
                               ": expected a float32, float64 or bfloat16 tensor, got " +
                               std::string(dtype_name(dtype)));
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != num_elements(shape))
    throw InvalidArgumentError("Tensor::from_vector: " + std::to_string(values.size()) +
                               " values do not fill shape " + shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>());
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  if constexpr (std::is_same_v<T, std::string>) {
    const std::string* in = data<std::string>();
    return std::vector<std::string>(in, in + numel());
  } else {
    if (!device().is_cpu()) return to(Device::cpu()).to_vector<T>();
    std::vector<T> out(static_cast<size_t>(numel()));
    dispatch_dtype(dtype(), [&](auto tag) {
      using S = decltype(tag);
      const S* in = static_cast<const S*>(raw_data());
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(in[i]);
    });
    return out;
  }
}

}  // namespace est::ops

namespace est {
using ops::Shape;
using ops::Tensor;
}  // namespace est

// fmt::print("{}", tensor) prints Tensor::str().
template <>
struct fmt::formatter<est::ops::Tensor> : fmt::formatter<std::string> {
  auto format(const est::ops::Tensor& tensor, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(tensor.str(), ctx);
  }
};
