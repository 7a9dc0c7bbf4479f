// TensorProto <-> Tensor (see tensor_proto.h). Followed: TF's tensorflow/core/framework/
// tensor.cc (FromProto, FromProtoField, AsProtoField) and tensor_shape.cc (IsValid).
#include "export/grpc/tensor_proto.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "ops/dtype_bfloat16.h"

namespace est::serving {
namespace {

constexpr int64_t kMaxExpandedBytes = int64_t{64} << 20;

const std::pair<DType, tensorflow::DataType> kDtypes[] = {
    {DType::kF32, tensorflow::DT_FLOAT},     {DType::kF64, tensorflow::DT_DOUBLE},
    {DType::kI32, tensorflow::DT_INT32},     {DType::kI64, tensorflow::DT_INT64},
    {DType::kU8, tensorflow::DT_UINT8},      {DType::kBool, tensorflow::DT_BOOL},
    {DType::kBF16, tensorflow::DT_BFLOAT16}, {DType::kString, tensorflow::DT_STRING}};

// The `given` values of `values` (as T) into `out`, n elements: TF's FromProtoField.
template <class T, class Values>
void fill(T* out, int64_t n, const Values& values) {
  const int64_t given = values.size();
  for (int64_t i = 0; i < n; ++i)
    out[i] = given == 0 ? T() : static_cast<T>(values[static_cast<int>(std::min(i, given - 1))]);
}

// fn(typed field of `in`, the same field of `out` (null when out is), an element of the dtype's
// C++ type) for the TensorProto field that holds `dtype`'s values.
template <class Fn>
void visit_field(DType dtype, const tensorflow::TensorProto& in, tensorflow::TensorProto* out,
                 Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(in.float_val(), out ? out->mutable_float_val() : nullptr, float{});
    case DType::kF64:
      return fn(in.double_val(), out ? out->mutable_double_val() : nullptr, double{});
    case DType::kI32:
      return fn(in.int_val(), out ? out->mutable_int_val() : nullptr, int32_t{});
    case DType::kU8:
      return fn(in.int_val(), out ? out->mutable_int_val() : nullptr, uint8_t{});
    case DType::kI64:
      return fn(in.int64_val(), out ? out->mutable_int64_val() : nullptr, int64_t{});
    case DType::kBool:
      return fn(in.bool_val(), out ? out->mutable_bool_val() : nullptr, bool{});
    case DType::kBF16:  // the 16 bits
      return fn(in.half_val(), out ? out->mutable_half_val() : nullptr, uint16_t{});
    case DType::kString:
      return fn(in.string_val(), out ? out->mutable_string_val() : nullptr, std::string{});
  }
}

// The elements of a dense CPU tensor as T (bfloat16 as its 16 bits).
template <class T, class TensorRef>
auto* elements(TensorRef& tensor) {
  if constexpr (std::is_same_v<T, std::string>)
    return tensor.template data<std::string>();
  else if constexpr (std::is_const_v<TensorRef>)
    return static_cast<const T*>(tensor.raw_data());
  else
    return static_cast<T*>(tensor.raw_data());
}

}  // namespace

tensorflow::DataType tf_data_type(DType dtype) {
  for (const auto& [d, tf] : kDtypes)
    if (d == dtype) return tf;
  throw InvalidArgumentError(fmt::format("dtype {} has no TensorFlow DataType", dtype_name(dtype)));
}

DType dtype_from_tf(tensorflow::DataType dtype) {
  for (const auto& [d, tf] : kDtypes)
    if (tf == dtype) return d;
  throw InvalidArgumentError(
      fmt::format("DataType {} is not one est-serve runs (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, "
                  "DT_UINT8, DT_BOOL, DT_BFLOAT16, DT_STRING)",
                  tensorflow::DataType_IsValid(dtype) ? tensorflow::DataType_Name(dtype)
                                                      : std::to_string(static_cast<int>(dtype))));
}

Tensor tensor_from_proto(const tensorflow::TensorProto& proto, const std::string& name) {
  auto fail = [&name](const std::string& why) {
    return InvalidArgumentError(fmt::format("tensor parsing error: {}: {}", name, why));
  };
  DType dtype;
  try {
    dtype = dtype_from_tf(proto.dtype());
  } catch (const InvalidArgumentError& error) {
    throw fail(error.what());
  }
  if (proto.tensor_shape().unknown_rank()) throw fail("the shape has an unknown rank");
  Shape shape;
  int64_t n = 1;
  for (const auto& dim : proto.tensor_shape().dim()) {
    if (dim.size() < 0)
      throw fail(fmt::format("dimension {} is {}; a tensor's dimensions must be known (>= 0)",
                             shape.size(), dim.size()));
    if (dim.size() > 0 && n > std::numeric_limits<int64_t>::max() / dim.size())
      throw fail("the shape's element count overflows int64");
    n *= dim.size();
    shape.push_back(dim.size());
  }
  const bool strings = dtype == DType::kString;
  const int64_t element = strings ? 0 : static_cast<int64_t>(dtype_size(dtype));
  const std::string shape_text = fmt::format("[{}]", fmt::join(shape, ", "));
  if (!proto.tensor_content().empty()) {
    if (strings) throw fail("DT_STRING values must be in string_val, not tensor_content");
    const int64_t needed = n > std::numeric_limits<int64_t>::max() / element ? -1 : n * element;
    if (static_cast<int64_t>(proto.tensor_content().size()) != needed)
      throw fail(fmt::format(
          "tensor_content has {} bytes; shape {} of {} needs {} ({} elements of {} bytes)",
          proto.tensor_content().size(), shape_text, tensorflow::DataType_Name(proto.dtype()),
          needed < 0 ? std::string("more than int64") : std::to_string(needed), n, element));
    Tensor tensor = Tensor::empty(shape, dtype);
    if (n > 0) std::memcpy(tensor.raw_data(), proto.tensor_content().data(), needed);
    return tensor;
  }
  int64_t given = 0;
  visit_field(dtype, proto, nullptr, [&](const auto& field, auto*, auto) { given = field.size(); });
  const int64_t bytes_each = strings ? static_cast<int64_t>(sizeof(std::string)) : element;
  if (given < n && n > kMaxExpandedBytes / bytes_each)
    throw fail(fmt::format(
        "shape {} declares {} elements but {} values are given; est-serve expands at most "
        "{} bytes of repeated values (send every value, or tensor_content)",
        shape_text, n, given, kMaxExpandedBytes));
  Tensor tensor = Tensor::empty(shape, dtype);
  visit_field(dtype, proto, nullptr, [&](const auto& field, auto*, auto zero) {
    fill(elements<decltype(zero)>(tensor), n, field);
  });
  return tensor;
}

void tensor_to_proto(const Tensor& source, tensorflow::TensorProto& proto) {
  const Tensor tensor = source.device().is_cpu() ? source : source.to(Device::cpu());
  proto.set_dtype(tf_data_type(tensor.dtype()));
  for (int64_t dim : tensor.shape()) proto.mutable_tensor_shape()->add_dim()->set_size(dim);
  const int64_t n = tensor.numel();
  visit_field(tensor.dtype(), proto, &proto, [&](const auto&, auto* field, auto zero) {
    const auto* in = elements<decltype(zero)>(tensor);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<decltype(zero), std::string>)
        *field->Add() = in[i];
      else
        field->Add(in[i]);
    }
  });
}

}  // namespace est::serving
