// The CUDA backend's softmax, cross-entropy and dropout-mask kernels in the registry's
// signatures (ops/kernel_ops.h), over ops/cuda/softmax_loss.h, on the tensors' device's
// compute stream.
//
// The sparse cross-entropy's class ids are checked by its kernel and reported at the next
// synchronisation point with the reference's words (ops/cuda/id_check.h): the step does not
// wait for the check. The dropout mask is the one the reference draws from the same
// Generator: the kernel starts from the generator's state, and the generator is then jumped
// ahead by one draw per element, where the reference's element-by-element draws leave it
// (Generator::set_state, which also drops a pending next_normal spare; dropout's callers never
// hold one, the tensor ops of ops/random.h never leave one). Inside a CUDA graph capture the
// kernel reads the generator's state on the device, written before each replay (graph.h's
// draw()), so each replay draws a fresh mask. The jump table is copied to each device once and
// kept for the process's lifetime, like the streams; on a side stream when its first use is
// inside a capture (waiting for the compute stream then would invalidate the capture).
#include <fmt/format.h>

#include <array>
#include <mutex>
#include <vector>

#include "ops/axis_layout.h"
#include "ops/cuda/check.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/id_check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/softmax_loss.h"
#include "ops/cuda/xoshiro_jump.h"

namespace est::ops::cuda {
namespace {

int device_of(const Tensor& t) { return t.device().index; }

// The jump table in `device`'s memory, copied there on first use.
const XoshiroJumpTable* device_jump_table(int device) {
  static std::mutex mutex;
  static std::vector<XoshiroJumpTable*> tables;
  std::lock_guard lock(mutex);
  if (tables.size() <= static_cast<size_t>(device)) tables.resize(static_cast<size_t>(device) + 1);
  XoshiroJumpTable*& table = tables[static_cast<size_t>(device)];
  if (table == nullptr) {
    void* memory = nullptr;
    EST_CUDA_CHECK(cudaMalloc(&memory, sizeof(XoshiroJumpTable)));
    // On a stream of its own, waited for: a plain cudaMemcpy from pageable memory may return
    // before the copy lands, and the compute stream may be capturing (relaxed capture allows
    // another stream's synchronisation, not its own).
    cudaStream_t stream = nullptr;
    EST_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const cudaError_t copied = cudaMemcpyAsync(
        memory, &xoshiro_jump_table(), sizeof(XoshiroJumpTable), cudaMemcpyHostToDevice, stream);
    const cudaError_t waited = copied == cudaSuccess ? cudaStreamSynchronize(stream) : copied;
    cudaStreamDestroy(stream);
    EST_CUDA_CHECK(waited);
    table = static_cast<XoshiroJumpTable*>(memory);
  }
  return table;
}

}  // namespace

void dropout_mask(double rate, Generator& generator, Tensor& mask) {
  const int device = device_of(mask);
  DeviceGuard guard(device);
  const std::array<uint64_t, 4> start = generator.state();
  const int64_t n = mask.numel();
  if (n == 0) return;
  const XoshiroJumpTable* table = device_jump_table(device);
  if (Graph* graph = capturing_graph(device)) {  // each replay advances the generator
    const CapturedDraws draws = graph->draw(generator, static_cast<uint64_t>(n));
    dropout_mask(mask.dtype(), start.data(), table, rate, mask.raw_data(), n,
                 compute_stream(device), draws.state, draws.offset);
    return;
  }
  dropout_mask(mask.dtype(), start.data(), table, rate, mask.raw_data(), n, compute_stream(device));
  uint64_t next[4] = {start[0], start[1], start[2], start[3]};
  xoshiro_jump(xoshiro_jump_table(), next, static_cast<uint64_t>(n));
  generator.set_state({next[0], next[1], next[2], next[3]});
}

void softmax(const Tensor& x, int axis, bool log, Tensor& y) {
  const int device = device_of(x);
  DeviceGuard guard(device);
  const AxisLayout layout = axis_layout(x.shape(), axis);
  cuda::softmax(x.dtype(), x.raw_data(), y.raw_data(), layout.outer, layout.size, layout.inner, log,
                compute_stream(device));
}

void softmax_gradient(const Tensor& grad, const Tensor& y, int axis, bool log, Tensor& dx) {
  const int device = device_of(y);
  DeviceGuard guard(device);
  const AxisLayout layout = axis_layout(y.shape(), axis);
  cuda::softmax_gradient(y.dtype(), grad.raw_data(), y.raw_data(), dx.raw_data(), layout.outer,
                         layout.size, layout.inner, log, compute_stream(device));
}

void sparse_cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& probs) {
  const int device = device_of(logits);
  DeviceGuard guard(device);
  const int64_t classes = logits.shape().back();
  if (labels.numel() == 0) return;
  Tensor flag = Tensor::empty({1}, DType::kI64, logits.device());
  cuda::sparse_cross_entropy(logits.dtype(), labels.dtype(), labels.raw_data(), logits.raw_data(),
                             loss.raw_data(), probs.raw_data(), labels.numel(), classes,
                             static_cast<int64_t*>(flag.raw_data()), /*wait=*/false,
                             compute_stream(device));
  // Checked at the next synchronisation point, not here (ops/cuda/id_check.h).
  record_bad_id(device, IdCheckOp::kSparseCrossEntropy,
                static_cast<const int64_t*>(flag.raw_data()), labels.dtype(), labels.raw_data(),
                classes, 0);
}

void sparse_cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& probs,
                                   Tensor& dlogits) {
  const int device = device_of(probs);
  DeviceGuard guard(device);
  cuda::sparse_cross_entropy_gradient(probs.dtype(), labels.dtype(), grad.raw_data(),
                                      labels.raw_data(), probs.raw_data(), dlogits.raw_data(),
                                      labels.numel(), probs.shape().back(), compute_stream(device));
}

void cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& probs,
                   Tensor& lse) {
  const int device = device_of(logits);
  DeviceGuard guard(device);
  const int64_t rows = lse.numel();
  cuda::cross_entropy(logits.dtype(), labels.raw_data(), logits.raw_data(), loss.raw_data(),
                      probs.raw_data(), lse.raw_data(), rows, logits.shape().back(),
                      compute_stream(device));
}

void cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& logits,
                            const Tensor& probs, const Tensor& lse, Tensor* dlabels,
                            Tensor* dlogits) {
  const int device = device_of(logits);
  DeviceGuard guard(device);
  cuda::cross_entropy_gradient(logits.dtype(), grad.raw_data(), labels.raw_data(),
                               logits.raw_data(), probs.raw_data(), lse.raw_data(),
                               dlabels != nullptr ? dlabels->raw_data() : nullptr,
                               dlogits != nullptr ? dlogits->raw_data() : nullptr, lse.numel(),
                               logits.shape().back(), compute_stream(device));
}

void sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, Tensor& loss) {
  const int device = device_of(logits);
  DeviceGuard guard(device);
  cuda::sigmoid_cross_entropy(logits.dtype(), labels.raw_data(), logits.raw_data(), loss.raw_data(),
                              logits.numel(), compute_stream(device));
}

void sigmoid_cross_entropy_gradient(const Tensor& grad, const Tensor& labels, const Tensor& logits,
                                    Tensor* dlabels, Tensor* dlogits) {
  const int device = device_of(logits);
  DeviceGuard guard(device);
  cuda::sigmoid_cross_entropy_gradient(
      logits.dtype(), grad.raw_data(), labels.raw_data(), logits.raw_data(),
      dlabels != nullptr ? dlabels->raw_data() : nullptr,
      dlogits != nullptr ? dlogits->raw_data() : nullptr, logits.numel(), compute_stream(device));
}

}  // namespace est::ops::cuda
