// The fused optimizer updates' CUDA launch (optimizer.cu), over a device table of raw pointers:
// what ops/cuda/optimizer.cpp (which turns the lists of Tensors into that table) calls.
//
// Multi-tensor apply, as apex's and PyTorch's fused/foreach optimizers do it: every variable of
// a step is cut into chunks of kFusedChunk elements and one grid-stride launch over all chunks
// of all variables updates them (a step of more than kFusedMaxTensors variables takes one launch
// per kFusedMaxTensors); each block finds its chunk's variable in the table by binary search
// over the chunks' prefix sums. Plain header (shared by g++ and nvcc).
#pragma once

#include <cstdint>

#include "ops/dtype.h"

namespace est::ops::cuda {

enum class FusedRule : int {
  kSgd,              // lists: var, grad                  scalars: lr
  kMomentum,         // var, grad, accum                  lr, momentum, lr * momentum
  kNesterov,         // var, grad, accum                  lr, momentum, lr * momentum
  kAdam,             // var, grad, m, v                   step_size, b1, 1-b1, b2, 1-b2, eps
  kAdagrad,          // var, grad, accum                  lr
  kRmsprop,          // var, grad, ms, mom                lr, decay, 1-decay, momentum, eps
  kRmspropCentered,  // var, grad, ms, mom, mg            lr, decay, 1-decay, momentum, eps
};
constexpr int kFusedMaxLists = 5;
constexpr int64_t kFusedChunk = 16384;  // elements per chunk (64 per thread of a block)
constexpr int kFusedMaxTensors = 48;    // variables per launch: the table stays under 4 KiB

// The launch's table, passed by value as a kernel argument (so that a captured CUDA graph
// holds it and no host -> device copy is needed): for each of up to kFusedMaxTensors
// variables, its pointer in each list (unused lists: null), its size, and its first global
// chunk; chunk_begin[count] is the total.
struct FusedTable {
  int64_t count = 0;
  void* pointers[kFusedMaxLists][kFusedMaxTensors] = {};
  int64_t sizes[kFusedMaxTensors] = {};
  int64_t chunk_begin[kFusedMaxTensors + 1] = {};
};

struct FusedScalars {
  double values[6] = {};  // in the order FusedRule lists them, rounded to the dtype on the GPU
};

// Queues the update of the table's variables on `stream` (their device's compute stream,
// current).
void fused_update(FusedRule rule, DType dtype, const FusedTable& table, const FusedScalars& scalars,
                  void* stream);

}  // namespace est::ops::cuda
