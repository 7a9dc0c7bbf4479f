// CapturedStep: a training step replayed as one CUDA graph (ops/cuda/graph.h), for steps that
// are launch-bound on a GPU (small models, small batches).
//
// The step function reads static input tensors (on the GPU) and does forward, backward and the
// update in place. The first `warmup_steps` calls run it eagerly (variables, optimizer slots,
// cuBLAS/cuDNN plans and the allocator's caches come into being), the next one captures it and
// replays the graph, and every later call only copies the new batch into the static inputs (on
// the device) and replays. As with torch.cuda.graphs: the captured step must not read device
// values on the host (the capture fails with an error naming the copy), host-side state it
// changes (the global step counter, a learning-rate schedule read on the host) changes once at
// capture, not per replay, and tensors it leaves behind (the loss it stores) are updated in
// place by each replay: read them after run() when needed, outside the graph. Random draws on
// the GPU (dropout's masks) are the exception: each replay draws afresh and advances the
// generator as an eager step would (ops/cuda/graph.h).
//
// On the CPU, or in a build without CUDA, there is nothing to capture: run() copies the batch
// and calls the step eagerly, so the same training code runs everywhere.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ops/tensor.h"

namespace est::nn {

class CapturedStep {
 public:
  // `inputs`: the static input tensors the step reads, all on one device.
  CapturedStep(std::vector<Tensor> inputs, std::function<void()> step, int warmup_steps = 2);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // Copies `batch` (one tensor per input, same shapes and dtypes, any device) into the static
  // inputs, then runs the step (eagerly, captured, or replayed as above).
  void run(const std::vector<Tensor>& batch);
  // The step on the inputs as they are.
  void run();

  const std::vector<Tensor>& inputs() const { return inputs_; }
  bool captured() const;        // a graph replays the step now
  int64_t graph_nodes() const;  // kernels and copies in the graph (0 before capture)

 private:
  struct Graph;
  std::vector<Tensor> inputs_;
  std::function<void()> step_;
  int warmup_left_;
  bool capture_;  // the inputs are on a GPU of a CUDA build
  std::unique_ptr<Graph> graph_;
};

}  // namespace est::nn
