// TensorFlow's TensorProto (tensorflow/core/framework/tensor.proto) to an est Tensor and back,
// as TF's Tensor::FromProto and Tensor::AsProtoField do (tensorflow/core/framework/tensor.cc):
// the values come from tensor_content (the elements' little-endian bytes, row-major, whose
// length must be the shape's element count times the dtype's size) or from the dtype's typed
// field (float_val, int_val, ...), where fewer values than elements repeat the last one and
// none gives zeros. Unlike TF, a tensor whose typed values would be expanded past 64 MiB is
// refused (a request cannot make the server allocate gigabytes). The dtypes est runs: DT_FLOAT,
// DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL, DT_BFLOAT16 (half_val), DT_STRING.
#pragma once

#include <string>

#include "ops/tensor.h"
#include "tensorflow/core/framework/tensor.pb.h"

namespace est::serving {

// InvalidArgumentError "tensor parsing error: <name>: <why>" for an unknown dtype, a shape with
// an unknown or negative dimension, an element count that overflows, content of the wrong
// length, or more than 64 MiB of expanded values.
Tensor tensor_from_proto(const tensorflow::TensorProto& proto, const std::string& name);

// `tensor` (any device) into `proto`: dtype, shape and the typed field, as TF Serving answers.
void tensor_to_proto(const Tensor& tensor, tensorflow::TensorProto& proto);

// TF's DataType of an est dtype and back (InvalidArgumentError for one est does not run).
tensorflow::DataType tf_data_type(DType dtype);
DType dtype_from_tf(tensorflow::DataType dtype);

}  // namespace est::serving
