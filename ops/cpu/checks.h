// Argument checks shared by the elementwise, reduction, array and loss ops.
//
// Every check throws an est::Error whose message starts with the op's name and says what was
// wrong and what to do, so that a failure deep inside a model_fn still points at its cause.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ops/element_bytes.h"
#include "ops/tensor.h"

namespace est::ops::cpu {

inline void require_same_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw InvalidArgumentError(
        fmt::format("{}: operands have different dtypes {} and {}; cast one of them first", op,
                    dtype_name(a.dtype()), dtype_name(b.dtype())));
}

inline void require_floating(std::string_view op, const Tensor& t) {
  if (!is_floating(t.dtype()))
    throw InvalidArgumentError(
        fmt::format("{}: expected a float32, float64 or bfloat16 tensor, got {}; cast it first", op,
                    dtype_name(t.dtype())));
}

// Numeric: floating or integer, not bool.
inline void require_numeric(std::string_view op, const Tensor& t) {
  if (t.dtype() == DType::kBool)
    throw InvalidArgumentError(
        fmt::format("{}: not defined for bool tensors; cast to a numeric dtype first", op));
}

inline void require_index_dtype(std::string_view op, std::string_view what, const Tensor& t) {
  if (t.dtype() != DType::kI32 && t.dtype() != DType::kI64)
    throw InvalidArgumentError(
        fmt::format("{}: {} must be int32 or int64, got {}", op, what, dtype_name(t.dtype())));
}

// Maps a possibly negative axis into [0, rank); `rank` is the rank the axis refers to.
inline int normalize_axis(std::string_view op, int axis, int rank) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw InvalidArgumentError(
        fmt::format("{}: axis {} is out of range for a tensor of rank {} (valid: [{}, {}])", op,
                    axis, rank, -rank, rank - 1));
  return a;
}

// Normalised, sorted, duplicate-free axes; empty `axes` means every axis.
inline std::vector<int> normalize_axes(std::string_view op, const std::vector<int>& axes,
                                       int rank) {
  std::vector<bool> chosen(static_cast<size_t>(rank), axes.empty());
  for (int axis : axes) {
    int a = normalize_axis(op, axis, rank);
    if (chosen[static_cast<size_t>(a)])
      throw InvalidArgumentError(fmt::format(
          "{}: axis {} is listed twice (axes refer to a tensor of rank {})", op, axis, rank));
    chosen[static_cast<size_t>(a)] = true;
  }
  std::vector<int> out;
  for (int a = 0; a < rank; ++a)
    if (chosen[static_cast<size_t>(a)]) out.push_back(a);
  return out;
}

// Like dispatch_dtype for the numeric dtypes (floating and integer); bool is an
// InvalidArgumentError naming `op`.
template <class Fn>
decltype(auto) dispatch_numeric(DType dtype, std::string_view op, Fn&& fn) {
  if (dtype == DType::kBool || dtype == DType::kBF16 || dtype == DType::kString)
    throw InvalidArgumentError(fmt::format(
        "{}: not defined for {} tensors; cast to a numeric dtype first", op, dtype_name(dtype)));
  // dispatch_dtype's list; `fn` is never instantiated for the types excluded above.
  return dispatch_dtype(dtype, [&](auto tag) -> decltype(fn(float{})) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, bfloat16>)
      throw InternalError("dispatch_numeric: unreachable dtype");
    else
      return fn(tag);
  });
}

// Calls fn(U{}) with U an unsigned integer type of the dtype's element size: for ops that only
// move elements (transpose, concat, slice, gather, broadcast_to) and so work for every dtype.
template <class Fn>
void dispatch_bytes(DType dtype, Fn&& fn) {
  if (!dispatch_element_bytes(dtype_size(dtype), fn))
    throw InternalError(fmt::format("no element mover for dtype {}", dtype_name(dtype)));
}

}  // namespace est::ops::cpu
