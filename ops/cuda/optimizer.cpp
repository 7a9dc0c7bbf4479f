// The fused optimizer updates on a GPU (OpId::kApplySgd ... kApplyRmsprop on gpu/cuda): the lists
// of a step become a table of device pointers, sizes and chunk offsets (optimizer_launch.h)
// passed by value to one launch on the compute stream (one per kFusedMaxTensors variables). No
// host -> device copy, so a step captured into a CUDA graph (ops/cuda/graph.h) keeps its update;
// nothing here waits for the GPU.
#include <algorithm>
#include <array>

#include "ops/cuda/kernels.h"
#include "ops/cuda/optimizer_launch.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

using Lists = std::array<const std::vector<Tensor>*, kFusedMaxLists>;

void run(FusedRule rule, const Lists& lists, const FusedScalars& scalars) {
  const std::vector<Tensor>& variables = *lists[0];
  if (variables.empty()) return;
  const int device = variables.front().device().index;
  const DType dtype = variables.front().dtype();
  DeviceGuard guard(device);
  for (size_t first = 0; first < variables.size(); first += kFusedMaxTensors) {
    const size_t count = std::min(variables.size() - first, static_cast<size_t>(kFusedMaxTensors));
    FusedTable table;
    table.count = static_cast<int64_t>(count);
    for (size_t i = 0; i < count; ++i) {
      for (size_t list = 0; list < lists.size(); ++list)
        if (lists[list] != nullptr)
          table.pointers[list][i] = const_cast<void*>((*lists[list])[first + i].raw_data());
      table.sizes[i] = variables[first + i].numel();
      table.chunk_begin[i + 1] =
          table.chunk_begin[i] + (table.sizes[i] + kFusedChunk - 1) / kFusedChunk;
    }
    fused_update(rule, dtype, table, scalars, compute_stream(device));
  }
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
