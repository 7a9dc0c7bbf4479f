// The small enums that name an op within a kernel family (BinaryOp, UnaryOp, ...) and the
// fused activation, in a header with no dependency, so that every backend's kernels (nvcc's
// .cu files too) share them with the ops.
#pragma once

#include <cstdint>

namespace est::ops {

enum class Activation : uint8_t { kNone, kRelu, kSigmoid, kTanh };

enum class BinaryOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  kSquaredDifference
};
enum class CompareOp : uint8_t { kEqual, kGreater, kLess };
enum class UnaryOp : uint8_t {
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kSquare,
  kAbs,
  kRelu,
  kSigmoid,
  kTanh,
  kClip,
  kPow
};
struct UnaryParams {
  double a = 0, b = 0;  // kClip: [a, b]; kPow: exponent a
};
enum class ReduceOp : uint8_t { kSum, kMax };

// Whether the gradient kernel of a unary op reads the forward output (sigmoid' = y (1 - y))
// rather than the input; every backend saves the same tensor, so forward and backward may run
// on different backends.
constexpr bool unary_saves_output(UnaryOp op) {
  return op == UnaryOp::kExp || op == UnaryOp::kSqrt || op == UnaryOp::kSigmoid ||
         op == UnaryOp::kTanh;
}

}  // namespace est::ops
