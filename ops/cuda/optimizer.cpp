// The fused optimizer updates on a GPU (OpId::kApplySgd ... kApplyRmsprop on gpu/cuda): the lists
// of a step become one table of device pointers, sizes and chunk offsets (optimizer_launch.h),
// copied to the device like any host tensor (pinned staging, copy stream, the compute stream
// waiting on its event) and read by one launch on the compute stream. The table tensor is freed
// when this returns; the caching allocator reuses its block only after the launch, in stream
// order. Nothing here waits for the GPU.
#include <array>

#include "ops/cuda/kernels.h"
#include "ops/cuda/optimizer_launch.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

using Lists = std::array<const std::vector<Tensor>*, kFusedMaxLists>;

void run(FusedRule rule, const Lists& lists, const FusedScalars& scalars) {
  const std::vector<Tensor>& variables = *lists[0];
  const auto count = static_cast<int64_t>(variables.size());
  if (count == 0) return;
  const int device = variables.front().device().index;
  const DType dtype = variables.front().dtype();
  Tensor host = Tensor::empty({fused_table_words(count)}, DType::kI64);
  int64_t* words = host.data<int64_t>();
  for (int64_t i = 0; i < fused_table_words(count); ++i) words[i] = 0;
  int64_t* sizes = words + kFusedMaxLists * (count + 1);
  int64_t* chunk_begin = sizes + (count + 1);
  for (int list = 0; list < kFusedMaxLists; ++list) {
    if (lists[static_cast<size_t>(list)] == nullptr) continue;
    const std::vector<Tensor>& tensors = *lists[static_cast<size_t>(list)];
    for (int64_t i = 0; i < count; ++i)
      words[list * (count + 1) + i] =
          reinterpret_cast<int64_t>(tensors[static_cast<size_t>(i)].raw_data());
  }
  for (int64_t i = 0; i < count; ++i) {
    sizes[i] = variables[static_cast<size_t>(i)].numel();
    chunk_begin[i + 1] = chunk_begin[i] + (sizes[i] + kFusedChunk - 1) / kFusedChunk;
  }
  const int64_t total_chunks = chunk_begin[count];
  if (total_chunks == 0) return;
  Tensor table = Tensor::empty(host.shape(), DType::kI64, Device::cuda(device));
  copy(host, table);
  DeviceGuard guard(device);
  fused_update(rule, dtype, table.data<int64_t>(), count, total_chunks, scalars,
               compute_stream(device));
}

}  // namespace

void apply_sgd(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
               double learning_rate) {
  run(FusedRule::kSgd, {&variables, &gradients}, {{-learning_rate}});
}

void apply_momentum(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                    std::vector<Tensor>& accumulators, double learning_rate, double momentum,
                    bool nesterov) {
  run(nesterov ? FusedRule::kNesterov : FusedRule::kMomentum,
      {&variables, &gradients, &accumulators},
      {{learning_rate, momentum, learning_rate * momentum}});
}

void apply_adam(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                std::vector<Tensor>& m, std::vector<Tensor>& v, double step_size, double beta1,
                double beta2, double epsilon) {
  run(FusedRule::kAdam, {&variables, &gradients, &m, &v},
      {{step_size, beta1, 1.0 - beta1, beta2, 1.0 - beta2, epsilon}});
}

void apply_adagrad(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                   std::vector<Tensor>& accumulators, double learning_rate) {
  run(FusedRule::kAdagrad, {&variables, &gradients, &accumulators}, {{learning_rate}});
}

void apply_rmsprop(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                   std::vector<Tensor>& mean_square, std::vector<Tensor>& mean_gradient,
                   std::vector<Tensor>& moment, const RmspropParams& params) {
  run(params.centered ? FusedRule::kRmspropCentered : FusedRule::kRmsprop,
      {&variables, &gradients, &mean_square, &moment, params.centered ? &mean_gradient : nullptr},
      {{params.learning_rate, params.decay, 1.0 - params.decay, params.momentum, params.epsilon}});
}

}  // namespace est::ops::cuda
