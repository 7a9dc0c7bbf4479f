// Tensor handles, creation, host-side access and printing. fill, clone and copy_from run the
// registry's kFill / kCopy kernels on the tensor's device.
#include "ops/tensor.h"

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/copy.h"
#include "ops/registry.h"
#include "ops/storage.h"

namespace est::ops {

struct TensorImpl {
  Shape shape;
  DType dtype = DType::kF32;
  std::shared_ptr<Storage> storage;
  bool requires_grad = false;
  std::shared_ptr<GradNode> grad_node;
  Tensor grad;
};

Storage::Storage(size_t bytes, Device device)
    : bytes_(bytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(bytes);
}

Storage::~Storage() { allocator_->deallocate(data_, bytes_); }

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

namespace {
void check_shape(const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) throw InvalidArgumentError("negative dimension in shape " + shape_str(shape));
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->storage = std::make_shared<Storage>(
      static_cast<size_t>(num_elements(shape)) * dtype_size(dtype), device);
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

const Shape& Tensor::shape() const {
  if (!impl_) throw FailedPreconditionError("use of an undefined Tensor");
  return impl_->shape;
}

int64_t Tensor::dim(int axis) const {
  int r = rank();
  int a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r)
    throw InvalidArgumentError(
        fmt::format("axis {} is out of range for a tensor of shape {}", axis, shape_str(shape())));
  return impl_->shape[static_cast<size_t>(a)];
}

int64_t Tensor::numel() const { return num_elements(shape()); }

DType Tensor::dtype() const {
  if (!impl_) throw FailedPreconditionError("use of an undefined Tensor");
  return impl_->dtype;
}

Device Tensor::device() const {
  if (!impl_) throw FailedPreconditionError("use of an undefined Tensor");
  return impl_->storage->device();
}

void* Tensor::raw_data() {
  if (!impl_) throw FailedPreconditionError("use of an undefined Tensor");
  return impl_->storage->data();
}

const void* Tensor::raw_data() const {
  if (!impl_) throw FailedPreconditionError("use of an undefined Tensor");
  return impl_->storage->data();
}

void Tensor::check_type(DType requested) const {
  if (dtype() != requested)
    throw InvalidArgumentError(fmt::format("tensor of dtype {} accessed as {}", dtype_name(dtype()),
                                           dtype_name(requested)));
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  if (!device().is_cpu()) return to(Device::cpu()).at(index);
  if (static_cast<int>(index.size()) != rank())
    throw InvalidArgumentError(fmt::format("Tensor::at: {} indices for a tensor of shape {}",
                                           index.size(), shape_str(shape())));
  int64_t flat = 0;
  size_t axis = 0;
  for (int64_t i : index) {
    int64_t d = impl_->shape[axis];
    if (i < 0 || i >= d)
      throw OutOfRangeError(fmt::format("Tensor::at: index {} out of range for axis {} of shape {}",
                                        i, axis, shape_str(shape())));
    flat = flat * d + i;
    ++axis;
  }
  return dispatch_dtype(dtype(), [&](auto tag) {
    return static_cast<double>(static_cast<const decltype(tag)*>(raw_data())[flat]);
  });
}

double Tensor::item() const {
  if (!device().is_cpu()) return to(Device::cpu()).item();
  if (numel() != 1)
    throw InvalidArgumentError("Tensor::item: expected one element, got shape " +
                               shape_str(shape()));
  return dispatch_dtype(dtype(), [&](auto tag) {
    return static_cast<double>(*static_cast<const decltype(tag)*>(raw_data()));
  });
}

Tensor Tensor::clone() const {
  Tensor copy = empty(shape(), dtype(), device());
  copy.copy_from(*this);
  return copy;
}

void Tensor::copy_from(const Tensor& source) {
  if (source.shape() != shape() || source.dtype() != dtype())
    throw InvalidArgumentError(fmt::format("copy_from: source {} {} does not match {} {}",
                                           dtype_name(source.dtype()), shape_str(source.shape()),
                                           dtype_name(dtype()), shape_str(shape())));
  copy_between(source, *this);
}

void Tensor::fill(double value) {
  run_kernel<OpId::kFill>("fill", device(), dtype(), *this, value);
}

Tensor Tensor::detach() const {
  if (!impl_) return {};
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  impl->storage = impl_->storage;
  return Tensor(std::move(impl));
}

bool Tensor::shares_storage(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage == other.impl_->storage;
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  Shape resolved = new_shape;
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      if (inferred >= 0)
        throw InvalidArgumentError("reshape: more than one -1 in " + shape_str(new_shape));
      inferred = static_cast<int>(i);
    } else if (resolved[i] < 0) {
      throw InvalidArgumentError("reshape: negative dimension in " + shape_str(new_shape));
    } else {
      known *= resolved[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel() % known != 0)
      throw InvalidArgumentError(
          fmt::format("reshape: cannot reshape {} elements of shape {} to {}", numel(),
                      shape_str(shape()), shape_str(new_shape)));
    resolved[static_cast<size_t>(inferred)] = numel() / known;
  }
  if (num_elements(resolved) != numel())
    throw InvalidArgumentError(fmt::format("reshape: cannot reshape {} elements of shape {} to {}",
                                           numel(), shape_str(shape()), shape_str(new_shape)));
  Tensor out = detach();
  out.impl_->shape = resolved;
  Shape original = shape();
  return record(out, "reshape", {*this},
                [original](const Tensor& grad, const NeedsGrad&) -> std::vector<Tensor> {
                  return {grad.reshape(original)};
                });
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  if (requires_grad && !is_floating(dtype()))
    throw InvalidArgumentError(
        fmt::format("only floating tensors can require gradients, got {}", dtype_name(dtype())));
  impl_->requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return impl_ ? impl_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) { impl_->grad = grad; }

const std::shared_ptr<GradNode>& Tensor::grad_node() const {
  static const std::shared_ptr<GradNode> none;
  return impl_ ? impl_->grad_node : none;
}

void Tensor::set_grad_node(std::shared_ptr<GradNode> node) {
  impl_->grad_node = std::move(node);
  impl_->requires_grad = impl_->grad_node != nullptr || impl_->requires_grad;
}

namespace {
// "1, 2, 3, ..." from the leading values of a host tensor.
std::string leading_values(const Tensor& host, int max_elements) {
  std::string values;
  const int64_t n = std::min<int64_t>(host.numel(), max_elements);
  dispatch_dtype(host.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(host.raw_data());
    for (int64_t i = 0; i < n; ++i) {
      if (i) values += ", ";
      if constexpr (std::is_floating_point_v<T>)
        values += fmt::format("{:.6g}", in[i]);
      else if constexpr (std::is_same_v<T, bfloat16>)
        values += fmt::format("{:.6g}", static_cast<float>(in[i]));
      else
        values += fmt::format("{}", static_cast<int64_t>(in[i]));
    }
  });
  if (host.numel() > n) values += ", ...";
  return values;
}
}  // namespace

std::string Tensor::str(int max_elements) const {
  if (!impl_) return "Tensor(undefined)";
  const std::string values =
      leading_values(device().is_cpu() ? *this : to(Device::cpu()), max_elements);
  return fmt::format("Tensor({}, shape={}, dtype={}, device={})",
                     values.empty() ? "" : "[" + values + "]", shape_str(shape()),
                     dtype_name(dtype()), device().str());
}

}  // namespace est::ops
