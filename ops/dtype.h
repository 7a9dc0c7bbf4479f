// Element types a Tensor can hold, and their mapping to C++ types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "ops/dtype_bfloat16.h"

namespace est::ops {

// New dtypes go last so that the values of the others (stored in data iterator states) stay.
// kString is tf.string: each element a std::string of bytes. String tensors live on the CPU
// only and no numeric kernel accepts them (dispatch_dtype refuses them); the data layer and
// feature columns read them through data<std::string>().
enum class DType : uint8_t { kF32, kF64, kI32, kI64, kU8, kBool, kBF16, kString };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "float32", "int64", ... as TensorFlow names them
bool is_floating(DType dtype);             // float32, float64 and bfloat16
bool is_integral(DType dtype);             // the integer types, bool excluded
inline bool is_string(DType dtype) { return dtype == DType::kString; }

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::kF32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::kF64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::kI32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::kI64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::kU8;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::kBool;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return DType::kBF16;
  else if constexpr (std::is_same_v<T, std::string>)
    return DType::kString;
  else
    static_assert(sizeof(T) == 0, "no DType for this C++ type");
}

}  // namespace est::ops

namespace est {
using ops::bfloat16;
using ops::DType;
}  // namespace est
