// Host entry points of the CUDA softmax, cross-entropy and dropout-mask kernels
// (ops/cuda/softmax_loss.cu), over raw device pointers; ops/cuda/softmax_loss_kernels.cpp turns
// the registry's Tensors into these. Float32 and float64 (`dtype`); class ids int32 or int64
// (`index_dtype`). Shared by g++ and nvcc, so plain headers only (as launch.h). Every function
// queues its kernels on `stream` and returns at once, except the class-id check of the sparse
// cross-entropy when asked to wait for its flag (the callers now never do: ops/cuda/id_check.h).
#pragma once

#include <cstdint>

#include "ops/cuda/launch.h"

namespace est::ops::cuda {

struct XoshiroJumpTable;

// out = softmax (or log_softmax) of in [outer, classes, inner] along classes.
void softmax(DType dtype, const void* in, void* out, int64_t outer, int64_t classes, int64_t inner,
             bool log, Stream stream);
// dx from the forward output y: softmax: y * (g - sum(g * y)); log: g - exp(y) * sum(g).
void softmax_gradient(DType dtype, const void* grad, const void* y, void* dx, int64_t outer,
                      int64_t classes, int64_t inner, bool log, Stream stream);

// Rows of logits [rows, classes]: probs = softmax, loss = lse - logits[label]. A label outside
// [0, classes) makes its row's loss and probs NaN; with `wait` the smallest row holding one is
// returned (the call waits for the kernel to know it), else (or when none) -1.
int64_t sparse_cross_entropy(DType dtype, DType index_dtype, const void* labels, const void* logits,
                             void* loss, void* probs, int64_t rows, int64_t classes,
                             int64_t* device_flag, bool wait, Stream stream);
// dlogits = grad[row] * (probs - one_hot(label)).
void sparse_cross_entropy_gradient(DType dtype, DType index_dtype, const void* grad,
                                   const void* labels, const void* probs, void* dlogits,
                                   int64_t rows, int64_t classes, Stream stream);
// probs = softmax, lse = log-sum-exp, loss = sum(labels * (lse - logits)) per row.
void cross_entropy(DType dtype, const void* labels, const void* logits, void* loss, void* probs,
                   void* lse, int64_t rows, int64_t classes, Stream stream);
// dlabels = g * (lse - logits); dlogits = g * (probs * sum(labels) - labels); null: not wanted.
void cross_entropy_gradient(DType dtype, const void* grad, const void* labels, const void* logits,
                            const void* probs, const void* lse, void* dlabels, void* dlogits,
                            int64_t rows, int64_t classes, Stream stream);
// Elementwise max(x, 0) - x * z + log1p(exp(-|x|)) and its gradients -g * x (labels),
// g * (sigmoid(x) - z) (logits).
void sigmoid_cross_entropy(DType dtype, const void* labels, const void* logits, void* loss,
                           int64_t n, Stream stream);
void sigmoid_cross_entropy_gradient(DType dtype, const void* grad, const void* labels,
                                    const void* logits, void* dlabels, void* dlogits, int64_t n,
                                    Stream stream);

// mask [n] from the generator state `start` (four xoshiro256** words) with the jump table in
// device memory: the mask ops/cpu's dropout_mask draws from that state. Inside a CUDA graph
// capture the state is read on the device instead: `device_state` (four words, written before
// each replay, graph.h) advanced by `offset` draws; `start` is then unused.
void dropout_mask(DType dtype, const uint64_t start[4], const XoshiroJumpTable* device_table,
                  double rate, void* mask, int64_t n, Stream stream,
                  const uint64_t* device_state = nullptr, uint64_t offset = 0);
// ops/cuda/id_check.h's record: queues a one-thread kernel that, when *device_flag names a
// position (not ULLONG_MAX) and the record (IdCheckRecord, device-visible) is empty, fills it
// with `op`, the position, the id there (int64 when `wide_ids`, else int32), `limit` and `axis`.
void queue_bad_id_record(const int64_t* device_flag, bool wide_ids, const void* ids,
                         void* device_record, int32_t op, int64_t limit, int32_t axis,
                         Stream stream);
// Writes the four words of a generator state into `device_state` on `stream` (a one-thread
// kernel whose arguments carry the words: nothing on the host must outlive the call).
void write_generator_state(void* device_state, const uint64_t state[4], Stream stream);

}  // namespace est::ops::cuda
