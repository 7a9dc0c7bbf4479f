// CapturedStep: eager warm-up, one capture into an ops::cuda::Graph, then copies and replays.
#include "nn/captured_step.h"

#include <fmt/format.h>

#include "ops/error.h"
#include "ops/ops.h"
#if EST_HAVE_CUDA
#include "ops/cuda/graph.h"
#endif

namespace est::nn {

#if EST_HAVE_CUDA
struct CapturedStep::Graph {
  explicit Graph(int device) : graph(device) {}
  ops::cuda::Graph graph;
};
#else
struct CapturedStep::Graph {};
#endif

CapturedStep::CapturedStep(std::vector<Tensor> inputs, std::function<void()> step, int warmup_steps)
    : inputs_(std::move(inputs)), step_(std::move(step)), warmup_left_(warmup_steps) {
  if (inputs_.empty())
    throw InvalidArgumentError("CapturedStep: give the static input tensors the step reads");
  if (warmup_steps < 1)
    throw InvalidArgumentError(fmt::format(
        "CapturedStep: warmup_steps is {}; at least 1 eager step must run before the capture "
        "(variables and caches are created then)",
        warmup_steps));
  const Device device = inputs_.front().device();
  for (const Tensor& input : inputs_)
    if (input.device() != device)
      throw InvalidArgumentError(
          fmt::format("CapturedStep: the static inputs are on {} and {}; put them on one device",
                      device.str(), input.device().str()));
  capture_ = EST_HAVE_CUDA && device.is_cuda();
}

CapturedStep::~CapturedStep() = default;

void CapturedStep::run(const std::vector<Tensor>& batch) {
  if (batch.size() != inputs_.size())
    throw InvalidArgumentError(fmt::format(
        "CapturedStep::run: {} batch tensors for {} static inputs", batch.size(), inputs_.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].shape() != inputs_[i].shape() || batch[i].dtype() != inputs_[i].dtype())
      throw InvalidArgumentError(fmt::format(
          "CapturedStep::run: batch tensor {} is {} {} but the static input is {} {}; a "
          "captured step has fixed shapes (drop the last partial batch)",
          i, dtype_name(batch[i].dtype()), ops::shape_str(batch[i].shape()),
          dtype_name(inputs_[i].dtype()), ops::shape_str(inputs_[i].shape())));
    ops::NoGradGuard no_grad;  // the copy only: the step itself records its tape
    inputs_[i].copy_from(batch[i]);
  }
  run();
}

void CapturedStep::run() {
  if (!capture_ || warmup_left_ > 0) {
    if (warmup_left_ > 0) --warmup_left_;
    step_();
    return;
  }
#if EST_HAVE_CUDA
  if (!graph_) {
    auto graph = std::make_unique<Graph>(inputs_.front().device().index);
    ops::cuda::capture(graph->graph, step_);
    graph_ = std::move(graph);
  }
  graph_->graph.replay();  // the capture only recorded: the first replay runs the step
#endif
}

bool CapturedStep::captured() const { return graph_ != nullptr; }

int64_t CapturedStep::graph_nodes() const {
#if EST_HAVE_CUDA
  return graph_ ? graph_->graph.nodes() : 0;
#else
  return 0;
#endif
}

}  // namespace est::nn
