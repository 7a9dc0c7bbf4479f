// The fused path of the update rules: every variable of a step updated by one registry op
// (ops/kernel_ops.h's kApplySgd ... kApplyRmsprop: one pass per variable on the CPU, one launch
// for the whole step on a GPU) instead of several elementwise ops per variable.
//
// A step fuses when all its variables, gradients and slots share one device and one dtype for
// which the op has a kernel (float32, float64); otherwise the rule runs its composite ops, which
// compute the same values (the CPU kernels reproduce them bit for bit).
#pragma once

#include <initializer_list>
#include <vector>

#include "nn/optimizer.h"
#include "ops/registry.h"

namespace est::nn::optim {

// `slots`: the step's slot lists (one tensor per variable), which must be placed alike too.
bool can_fuse(ops::OpId id, const std::vector<GradAndVar>& grads,
              std::initializer_list<const std::vector<Tensor>*> slots = {});

std::vector<Tensor> variables_of(const std::vector<GradAndVar>& grads);
std::vector<Tensor> gradients_of(const std::vector<GradAndVar>& grads);

// Runs the fused op over `grads` (can_fuse was true); `args` are the kernel's arguments after
// the variables and gradients.
template <ops::OpId id, class... Args>
void run_fused(const std::vector<GradAndVar>& grads, Args&&... args) {
  std::vector<Tensor> variables = variables_of(grads);
  const std::vector<Tensor> gradients = gradients_of(grads);
  const Tensor& first = grads.front().variable;
  ops::run_kernel<id>(ops::op_info(id).name.data(), first.device(), first.dtype(), variables,
                      gradients, std::forward<Args>(args)...);
}

}  // namespace est::nn::optim
