// CUDA kernels of dropout's mask and of the generator state a captured graph reads
// (ops/cuda/softmax_loss.h declares them), computing what ops/cpu/loss_kernels.cpp's
// dropout_mask does. Each thread takes a run of kDropoutRun elements: it jumps the generator's
// state to its first element (ops/cuda/xoshiro_jump.h) and draws from there, so the mask is the
// CPU's mask. Inside a CUDA graph the kernel reads the state from device memory, written before
// each replay (write_generator_state), so that every replay draws afresh.
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/softmax_loss.h"
#include "ops/cuda/xoshiro_jump.h"

namespace est::ops::cuda {
namespace {

constexpr int64_t kDropoutRun = 128;

template <class T>
__global__ void dropout_mask_kernel(const XoshiroJumpTable* table, uint64_t s0, uint64_t s1,
                                    uint64_t s2, uint64_t s3, const uint64_t* device_state,
                                    uint64_t offset, double rate, T scale, T* mask, int64_t n) {
  uint64_t start[4] = {s0, s1, s2, s3};
  if (device_state != nullptr) {  // captured: the state of this replay, `offset` draws on
    for (int word = 0; word < 4; ++word) start[word] = device_state[word];
    xoshiro_jump(*table, start, offset);
  }
  const int64_t runs = (n + kDropoutRun - 1) / kDropoutRun;
  EST_GRID_STRIDE_LOOP(run, runs) {
    const int64_t first = run * kDropoutRun;
    const int64_t length = n - first < kDropoutRun ? n - first : kDropoutRun;
    dropout_mask_range(*table, start, static_cast<uint64_t>(first), static_cast<uint64_t>(length),
                       rate, scale, mask);
  }
}

}  // namespace

void dropout_mask(DType dtype, const uint64_t start[4], const XoshiroJumpTable* device_table,
                  double rate, void* mask, int64_t n, Stream stream, const uint64_t* device_state,
                  uint64_t offset) {
  if (n == 0) return;
  const int64_t runs = (n + kDropoutRun - 1) / kDropoutRun;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    dropout_mask_kernel<T><<<blocks_for(runs), kThreads, 0, as_stream(stream)>>>(
        device_table, start[0], start[1], start[2], start[3], device_state, offset, rate,
        static_cast<T>(1.0 / (1.0 - rate)), static_cast<T*>(mask), n);
  });
  EST_CUDA_LAUNCHED();
}

__global__ void write_generator_state_kernel(uint64_t* state, uint64_t s0, uint64_t s1, uint64_t s2,
                                             uint64_t s3) {
  state[0] = s0;
  state[1] = s1;
  state[2] = s2;
  state[3] = s3;
}

void write_generator_state(void* device_state, const uint64_t state[4], Stream stream) {
  write_generator_state_kernel<<<1, 1, 0, as_stream(stream)>>>(
      static_cast<uint64_t*>(device_state), state[0], state[1], state[2], state[3]);
  EST_CUDA_LAUNCHED();
}

}  // namespace est::ops::cuda
