// The reference backend's entries in the kernel registry: one kernel per registry op, every
// dtype (each kernel rejects the dtypes its op does not define, with the op's name), generated
// from ops/op_list.h: an op there without its cpu:: kernel fails to link. Kernels that only move
// or compare elements (and fill, cast, argmax, one_hot) handle bfloat16 themselves (kNative);
// the others compute bfloat16 in float32 through via_float (kViaFloat, ops/cpu/via_float.h);
// the fused updates take float32 and float64 (kFloat).
#include "ops/cpu/kernels.h"
#include "ops/cpu/via_float.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

constexpr KernelTarget kReference{DeviceType::kCPU, Backend::kReference};

// The REFERENCE column of ops/op_list.h.
enum class ReferenceDTypes { kNative, kViaFloat, kFloat };

template <OpId id, ReferenceDTypes dtypes, KernelFn<id> kernel>
void add_reference(KernelRegistry& registry) {
  if constexpr (dtypes == ReferenceDTypes::kViaFloat)
    registry.add<id>(kReference, cpu::via_float<kernel>);
  else if constexpr (dtypes == ReferenceDTypes::kFloat)
    registry.add<id>(kReference, kernel, {DType::kF32, DType::kF64});
  else
    registry.add<id>(kReference, kernel);
}

}  // namespace

void register_reference_kernels(KernelRegistry& registry) {
#define EST_ADD_REFERENCE(ID, NAME, KIND, REFERENCE, ...) \
  add_reference<OpId::ID, ReferenceDTypes::REFERENCE, cpu::NAME>(registry);
  EST_REGISTRY_OPS(EST_ADD_REFERENCE)
#undef EST_ADD_REFERENCE
}

}  // namespace est::ops
