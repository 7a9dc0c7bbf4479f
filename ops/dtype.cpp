// Sizes and names of the element types.
#include "ops/dtype.h"

namespace est::ops {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
    case DType::kBool:
      return 1;
    case DType::kBF16:
      return 2;
    case DType::kString:
      return sizeof(std::string);
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kF64:
      return "float64";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kU8:
      return "uint8";
    case DType::kBool:
      return "bool";
    case DType::kBF16:
      return "bfloat16";
    case DType::kString:
      return "string";
  }
  return "unknown";
}

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16;
}

bool is_integral(DType dtype) {
  return dtype == DType::kI32 || dtype == DType::kI64 || dtype == DType::kU8;
}

}  // namespace est::ops
