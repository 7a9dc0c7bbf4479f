// The fused optimizer updates' CUDA launch (optimizer.cu), over a device table of raw pointers:
// what ops/cuda/optimizer.cpp (which turns the lists of Tensors into that table) calls.
//
// Multi-tensor apply, as apex's and PyTorch's fused/foreach optimizers do it: every variable of
// a step is cut into chunks of kFusedChunk elements and one grid-stride launch over all chunks
// of all variables updates them; each block finds its chunk's variable in the table by binary
// search over the chunks' prefix sums. Plain header (shared by g++ and nvcc).
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

// The table, kFusedMaxLists + 2 arrays of `count` + 1 64-bit words, in this order:
//   pointers[list][i]  (list < kFusedMaxLists; unused lists hold 0)
//   sizes[i]           elements of variable i
//   chunk_begin[i]     the first global chunk of variable i; chunk_begin[count] = total chunks
inline int64_t fused_table_words(int64_t count) { return (kFusedMaxLists + 2) * (count + 1); }

struct FusedScalars {
  double values[6] = {};  // in the order FusedRule lists them, rounded to the dtype on the GPU
};

// Queues the update on `stream` (the variables' device's compute stream, current).
void fused_update(FusedRule rule, DType dtype, const int64_t* device_table, int64_t count,
                  int64_t total_chunks, const FusedScalars& scalars, void* stream);

}  // namespace est::ops::cuda
