// Tensor handles, creation, host-side access and printing. fill, clone and copy_from run the
// registry's kFill / kCopy kernels on the tensor's device; string and sparse tensors, which no
// kernel handles, are copied here element by element. element_data() is the fence of
// ops/copy_fence.h: every way to a tensor's bytes passes through it.
#include "ops/tensor.h"

#include <fmt/format.h>

#include "ops/autograd.h"
#include "ops/copy.h"
#include "ops/copy_fence.h"
#include "ops/deferred_fill.h"
#include "ops/registry.h"
#include "ops/storage.h"

namespace est::ops {

struct TensorImpl {
  Shape shape;
  DType dtype = DType::kF32;
  std::shared_ptr<Storage> storage;  // null for a sparse tensor
  Tensor sparse_indices;             // int64 [n, rank]; defined only for a sparse tensor
  Tensor sparse_values;              // [n]
  bool requires_grad = false;
  std::shared_ptr<GradNode> grad_node;
  Tensor grad;
};

Storage::Storage(size_t bytes, Device device)
    : bytes_(bytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(bytes);
}

std::shared_ptr<Storage> Storage::strings(size_t count) {
  auto storage = std::make_shared<Storage>(count * sizeof(std::string), Device::cpu());
  auto* first = static_cast<std::string*>(storage->data_);
  for (size_t i = 0; i < count; ++i) new (first + i) std::string();
  storage->strings_ = count;
  return storage;
}

Storage::~Storage() {
  // A deferred tensor (ops/deferred_fill.h) that dies unread leaves its recipe behind.
  if (fenced_.load(std::memory_order_acquire)) detail::forget_storage(this);
  auto* first = static_cast<std::string*>(data_);
  for (size_t i = 0; i < strings_; ++i) first[i].~basic_string();
  allocator_->deallocate(data_, bytes_);
}

void throw_numeric_op_on_strings() {
  throw InvalidArgumentError(
      "this operation takes numeric tensors but was given a string tensor (tf.string); strings "
      "are read with data<std::string>() or turned into ids first (feature columns, lookups)");
}

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
  if (dtype == DType::kString) {
    if (!device.is_cpu())
      throw InvalidArgumentError(
          "string tensors (tf.string) live on the CPU only; cannot create "
          "one of shape " +
          shape_str(shape) + " on " + device.str() +
          ": keep strings in the input pipeline and send ids to the device");
    impl->storage = Storage::strings(static_cast<size_t>(num_elements(shape)));
  } else {
    impl->storage = std::make_shared<Storage>(
        static_cast<size_t>(num_elements(shape)) * dtype_size(dtype), device);
  }
  return Tensor(std::move(impl));
}

Tensor Tensor::sparse(Tensor indices, Tensor values, Shape dense_shape) {
  check_shape(dense_shape);
  if (!indices.defined() || !values.defined())
    throw InvalidArgumentError("Tensor::sparse: indices and values must be defined tensors");
  if (indices.is_sparse() || values.is_sparse())
    throw InvalidArgumentError("Tensor::sparse: indices and values must be dense tensors");
  const int64_t rank = static_cast<int64_t>(dense_shape.size());
  if (indices.dtype() != DType::kI64 || indices.rank() != 2 || indices.dim(1) != rank)
    throw InvalidArgumentError(fmt::format(
        "Tensor::sparse: indices must be int64 [n, {}] for dense shape {}, got {} {}", rank,
        shape_str(dense_shape), dtype_name(indices.dtype()), shape_str(indices.shape())));
  if (values.rank() != 1 || values.dim(0) != indices.dim(0))
    throw InvalidArgumentError(
        fmt::format("Tensor::sparse: values must be [{}] to match indices {}, got {}",
                    indices.dim(0), shape_str(indices.shape()), shape_str(values.shape())));
  if (indices.device() != values.device())
    throw InvalidArgumentError("Tensor::sparse: indices on " + indices.device().str() +
                               " but values on " + values.device().str());
  const Tensor host = indices.device().is_cpu() ? indices : indices.to(Device::cpu());
  const int64_t* index = host.data<int64_t>();
  for (int64_t i = 0; i < host.dim(0); ++i)
    for (int64_t a = 0; a < rank; ++a) {
      int64_t v = index[i * rank + a];
      if (v < 0 || v >= dense_shape[static_cast<size_t>(a)])
        throw InvalidArgumentError(
            fmt::format("Tensor::sparse: index {} of entry {} is out of range for dense shape {}",
                        v, i, shape_str(dense_shape)));
    }
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(dense_shape);
  impl->dtype = values.dtype();
  impl->sparse_indices = std::move(indices);
  impl->sparse_values = std::move(values);
  return Tensor(std::move(impl));
}

bool Tensor::is_sparse() const { return impl_ && impl_->sparse_indices.defined(); }

const Tensor& Tensor::indices() const {
  if (!is_sparse())
    throw InvalidArgumentError("indices(): the tensor is dense; only a sparse tensor has indices");
  return impl_->sparse_indices;
}

const Tensor& Tensor::values() const {
  if (!is_sparse())
    throw InvalidArgumentError("values(): the tensor is dense; only a sparse tensor has values");
  return impl_->sparse_values;
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
  if (!impl_->storage) return impl_->sparse_values.device();
  return impl_->storage->device();
}

void* Tensor::element_data() const {
  if (!impl_) throw FailedPreconditionError("use of an undefined Tensor");
  if (!impl_->storage)
    throw InvalidArgumentError(
        "a sparse tensor of dense shape " + shape_str(impl_->shape) +
        " has no dense buffer: read indices() and values(), or convert it with sparse::to_dense");
  Storage& storage = *impl_->storage;
  // A pending fenced copy (ops/copy_fence.h) reading or writing this storage is finished before
  // its bytes are handed out. Nothing pending: one load (acquire: a plain load on x86).
  if (detail::g_pending_copies.load(std::memory_order_acquire) != 0) [[unlikely]]
    detail::fence_storage(storage);
  // A deferred tensor (ops/deferred_fill.h) is computed before its bytes are handed out.
  if (detail::g_pending_fills.load(std::memory_order_acquire) != 0) [[unlikely]]
    detail::fill_storage(storage);
  return storage.data();
}

Tensor detail::tensor_on_storage(std::shared_ptr<Storage> storage, const Shape& shape,
                                 DType dtype) {
  // Tensor's constructor from an impl is private: a fresh empty handle, whose impl nobody else
  // shares, is pointed at the storage.
  Tensor tensor = Tensor::empty({0}, dtype, storage->device());
  auto* impl = const_cast<TensorImpl*>(tensor.impl());
  impl->shape = shape;
  impl->storage = std::move(storage);
  return tensor;
}

std::shared_ptr<Storage> detail::storage_of(const Tensor& tensor) {
  if (!tensor.defined() || !tensor.impl()->storage)
    throw InvalidArgumentError("storage_of: expected a defined dense tensor");
  return tensor.impl()->storage;
}

void* Tensor::raw_data() {
  void* data = element_data();
  if (impl_->dtype == DType::kString)
    throw InvalidArgumentError(
        "the raw bytes of a string tensor (tf.string) are std::string "
        "objects, not data: read its elements with data<std::string>()");
  return data;
}

const void* Tensor::raw_data() const { return const_cast<Tensor*>(this)->raw_data(); }

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
  if (is_sparse()) return sparse(indices().clone(), values().clone(), shape());
  Tensor copy = empty(shape(), dtype(), device());
  copy.copy_from(*this);
  return copy;
}

void Tensor::copy_from(const Tensor& source) {
  if (source.shape() != shape() || source.dtype() != dtype())
    throw InvalidArgumentError(fmt::format("copy_from: source {} {} does not match {} {}",
                                           dtype_name(source.dtype()), shape_str(source.shape()),
                                           dtype_name(dtype()), shape_str(shape())));
  if (is_sparse() || source.is_sparse())
    throw InvalidArgumentError("copy_from: sparse tensors are not copied in place; use clone()");
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
  impl->sparse_indices = impl_->sparse_indices;
  impl->sparse_values = impl_->sparse_values;
  return Tensor(std::move(impl));
}

bool Tensor::shares_storage(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage && impl_->storage == other.impl_->storage;
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  if (is_sparse()) throw InvalidArgumentError("reshape: the tensor is sparse; use sparse::reshape");
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
  if (host.dtype() == DType::kString) {
    const std::string* in = host.data<std::string>();
    for (int64_t i = 0; i < n; ++i) values += fmt::format("{}\"{}\"", i ? ", " : "", in[i]);
    if (host.numel() > n) values += ", ...";
    return values;
  }
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
  if (is_sparse())
    return fmt::format("SparseTensor(indices={}, values={}, dense_shape={})",
                       indices().str(max_elements), values().str(max_elements), shape_str(shape()));
  const std::string values =
      leading_values(device().is_cpu() ? *this : to(Device::cpu()), max_elements);
  return fmt::format("Tensor({}, shape={}, dtype={}, device={})",
                     values.empty() ? "" : "[" + values + "]", shape_str(shape()),
                     dtype_name(dtype()), device().str());
}

}  // namespace est::ops
