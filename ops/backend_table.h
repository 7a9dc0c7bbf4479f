// The preferred CPU backend of each op kind: a table a later kernel registry can absorb.
//
// Each entry is whichever backend ran that kind faster on the tutorial CNN's shapes
// (examples/cnn_model.h at batch 64) in bench/op_backend_bench, on the portable (default) build;
// the figures are in bench/README.md. Re-measure and edit here when a kernel changes. A kind
// whose preferred backend is not built (oneDNN disabled) runs on the reference. The table is
// the choice for small work and when calibration is off; larger work is timed on the machine
// that runs it (ops/kernel_calibration.h), which keeps this table's backend unless the other is
// clearly faster there.
#pragma once

#include <array>

#include "ops/backend.h"

namespace est::ops {

struct PreferredBackend {
  OpKind kind;
  Backend backend;
};

// oneDNN over reference per-call time, 1 thread (the steadiest figure on a shared machine);
// see bench/README.md for the 2-thread figures and the whole step.
inline constexpr std::array<PreferredBackend, kNumOpKinds> kPreferredCpuBackends{{
    {OpKind::kConvForward, Backend::kOneDnn},          // 0.14
    {OpKind::kConvBackwardData, Backend::kOneDnn},     // 0.31 on a 32 -> 64 layer; 1.04-1.14
                                                       // with 1 input channel, never run there
    {OpKind::kConvBackwardWeights, Backend::kOneDnn},  // 0.20 first layer, 0.7 with input grad
    {OpKind::kMatmul, Backend::kOneDnn},               // 0.17-0.3 on 5408 x 64; 64 x 10 ties
    {OpKind::kPooling, Backend::kReference},           // forward 3.4-3.7, backward 0.9-0.95
    {OpKind::kEltwise, Backend::kReference},           // relu 1.0-1.6 forward, 1.1-1.4 backward
    {OpKind::kSoftmax, Backend::kReference},           // 1.1-1.5 on [64, 10]
    {OpKind::kBatchNorm, Backend::kOneDnn},            // 0.53 forward, 0.67 backward
}};

// The table lists every kind once, in enum order (checked at compile time).
constexpr bool preferred_table_is_complete() {
  for (int i = 0; i < kNumOpKinds; ++i)
    if (static_cast<int>(kPreferredCpuBackends[static_cast<size_t>(i)].kind) != i) return false;
  return true;
}
static_assert(preferred_table_is_complete(), "kPreferredCpuBackends: one row per OpKind, in order");

}  // namespace est::ops
