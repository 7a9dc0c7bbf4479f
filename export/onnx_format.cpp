// The ONNX model's text form and ONNX's dtype numbers (see onnx_export.h), apart from the
// trace-to-graph conversion in onnx_export.cpp.
#include <string>

#include <google/protobuf/text_format.h>

#include "export/onnx_export.h"
#include "onnx_subset.pb.h"
#include "ops/error.h"

namespace est::serving {

std::string onnx_text(const std::string& serialized_model) {
  onnx::ModelProto model;
  if (!model.ParseFromString(serialized_model))
    throw InvalidArgumentError("onnx_text: the bytes are not an ONNX ModelProto");
  std::string text;
  google::protobuf::TextFormat::PrintToString(model, &text);
  return text;
}

int onnx_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return onnx::TensorProto::FLOAT;
    case DType::kF64:
      return onnx::TensorProto::DOUBLE;
    case DType::kI32:
      return onnx::TensorProto::INT32;
    case DType::kI64:
      return onnx::TensorProto::INT64;
    case DType::kU8:
      return onnx::TensorProto::UINT8;
    case DType::kBool:
      return onnx::TensorProto::BOOL;
    case DType::kBF16:
      return onnx::TensorProto::BFLOAT16;
    case DType::kString:
      return onnx::TensorProto::STRING;
  }
  throw InternalError("onnx_dtype: unknown dtype");
}

}  // namespace est::serving
