// The ops of the kernel registry and the signature every backend's kernel for each one has:
// the contract between the op files (ops/*.cpp) and the backends (ops/cpu, ops/onednn,
// ops/cuda), generated from the list in ops/op_list.h.
//
// A kernel computes; it does not check arguments, allocate its outputs or record gradients.
// The op file validates the inputs, allocates every output on the inputs' device (so a kernel
// writes into tensors of the right shape, dtype and device), looks the kernel up (registry.h)
// and records the gradient. Kernels return nothing; outputs are the `Tensor&` / `Tensor*`
// arguments (a null pointer: that output is not wanted). What a backward kernel needs from its
// forward beyond the op's inputs and outputs is explicit state the forward kernel sets (pooling's
// `workspace`, conv2d's `kernel_for_backward`), and backward runs on the backend forward ran on.
// Families of elementwise ops share one registry op with an enum (BinaryOp, UnaryOp, ...) so that a
// backend implements the family once. A CPU kernel other than the reference may throw
// UnimplementedError for a case it lacks (a shape oneDNN has no primitive for): the registry then
// runs the reference kernel instead.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/matmul_reference.h"
#include "ops/cpu/pool_reference.h"
#include "ops/cpu/window.h"
#include "ops/linalg.h"
#include "ops/op_enums.h"
#include "ops/op_list.h"
#include "ops/random.h"
#include "ops/tensor.h"

namespace est::ops {

using cpu::MatmulDims;
using cpu::PoolKind;
using cpu::Window2D;

// The registry ops, in ops/op_list.h's order.
enum class OpId : uint8_t {
#define EST_OP_ENUMERATOR(ID, ...) ID,
  EST_REGISTRY_OPS(EST_OP_ENUMERATOR)
#undef EST_OP_ENUMERATOR
};
#define EST_OP_COUNT(...) +1
inline constexpr int kNumOpIds = 0 EST_REGISTRY_OPS(EST_OP_COUNT);
#undef EST_OP_COUNT
static_assert(kNumOpIds <= 256, "OpId is a uint8_t");

// kApplyRmsprop's scalars; mean_gradient is empty unless `centered`.
struct RmspropParams {
  double learning_rate = 0;
  double decay = 0;
  double momentum = 0;
  double epsilon = 0;
  bool centered = false;
};

// The name of a registry op ("binary", "conv2d_backward_data") and the CPU op kind whose
// backend table (backend_table.h) picks its CPU backend; ops without a kind run on the
// reference on the CPU unless a BackendGuard asks for another backend that has a kernel.
struct OpInfo {
  std::string_view name;
  std::optional<OpKind> kind;
};
OpInfo op_info(OpId id);

// The kernel signature of each op, as a function pointer type: KernelFn<OpId::kBinary>.
template <OpId id>
struct OpSignature;
template <OpId id>
using KernelFn = typename OpSignature<id>::Fn;

// The kernel parameters of ops/op_list.h, as a function pointer type.
#define EST_OP_SIGNATURE(ID, NAME, KIND, REFERENCE, ...) \
  template <>                                            \
  struct OpSignature<OpId::ID> {                         \
    using Fn = void (*)(__VA_ARGS__);                    \
  };
EST_REGISTRY_OPS(EST_OP_SIGNATURE)
#undef EST_OP_SIGNATURE

}  // namespace est::ops
