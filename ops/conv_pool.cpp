// conv2d followed by max_pool2d without the convolution's output (conv_pool.h): the eligibility
// checks, the fused op and its gradient record, and the deferred convolution output of the
// layers. The fused kernels are ops/cpu/conv_max_pool.h's; the fallbacks are conv2d and
// max_pool2d themselves, so every error message is theirs.
#include "ops/conv_pool.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>

#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/cpu/conv_max_pool.h"
#include "ops/cpu/window.h"
#include "ops/deferred_fill.h"
#include "ops/environment_switch.h"
#include "ops/registry.h"

namespace est::ops {
namespace {

EnvironmentSwitch& fusion_switch() {
  static EnvironmentSwitch s([] {
    const char* value = std::getenv("EST_CONV_POOL_FUSION");
    return value == nullptr || std::string_view(value) != "0";
  });
  return s;
}

// What a deferred convolution output is computed from: copies of the call's values (`input`,
// `kernel`, `bias`) and the call's own tensors (`*_link`, for the gradient's graph).
struct DeferredConv {
  Tensor input, kernel, bias;
  Tensor input_link, kernel_link, bias_link;
  cpu::Window2D window;
  Activation activation = Activation::kNone;
  Shape output_shape;
  std::weak_ptr<GradNode> node;  // the output's gradient record, when it has one
};

// Tags the recipes of this file's deferred tensors (deferred_fill.h).
const char kDeferredConvKind = 0;

bool plain_cpu_f32(const Tensor& t, int rank) {
  return t.defined() && !t.is_sparse() && t.device().is_cpu() && t.dtype() == DType::kF32 &&
         t.rank() == rank;
}

// The convolution's window when fusion may run on these arguments (as far as the convolution
// goes; the pooling is checked with it in pool_after).
std::optional<cpu::Window2D> fusable_conv(const Tensor& input, const Tensor& kernel,
                                          const Tensor& bias, const Conv2DParams& params) {
  if (!conv_pool_fusion_enabled() || forced_cpu_backend() || kernel_observer() != nullptr)
    return std::nullopt;
  if (!plain_cpu_f32(input, 4) || !plain_cpu_f32(kernel, 4) || kernel.dim(2) != input.dim(3))
    return std::nullopt;
  if (bias.defined() && (!plain_cpu_f32(bias, 1) || bias.dim(0) != kernel.dim(3)))
    return std::nullopt;
  if (params.activation != Activation::kNone && params.activation != Activation::kRelu)
    return std::nullopt;
  if (needs_recording({&input})) return std::nullopt;  // the fused gradient has no input part
  cpu::Window2D w;
  try {
    w = cpu::make_window(input.shape(), kernel.dim(0), kernel.dim(1), params.strides,
                         params.dilations, params.padding, "conv2d");
  } catch (const InvalidArgumentError&) {
    return std::nullopt;  // conv2d reports it
  }
  w.out_c = kernel.dim(3);
  // A pooling of 2x2 after it is the least any fused call needs.
  if (!cpu::conv_max_pool_supported(w, {2, 2, w.out_h / 2, w.out_w / 2}, params.activation))
    return std::nullopt;
  return w;
}

// The pooling after convolution `w`, when the fused kernels handle the pair.
std::optional<cpu::MaxPoolAfterConv> pool_after(const cpu::Window2D& w, Activation activation,
                                                const Pool2DParams& pool) {
  if (pool.padding != Padding::kValid || pool.window != pool.strides || pool.window[0] <= 0 ||
      pool.window[1] <= 0 || w.out_h < pool.window[0] || w.out_w < pool.window[1])
    return std::nullopt;
  const cpu::MaxPoolAfterConv after{pool.window[0], pool.window[1], w.out_h / pool.window[0],
                                    w.out_w / pool.window[1]};
  if (!cpu::conv_max_pool_supported(w, after, activation)) return std::nullopt;
  return after;
}

// The fused op: values from c's copies, gradients (when `training`) against its links.
Tensor fused(const DeferredConv& c, const cpu::MaxPoolAfterConv& pool, bool training) {
  const cpu::Window2D& w = c.window;
  Tensor pooled = Tensor::empty({w.batch, pool.out_h, pool.out_w, w.out_c});
  Tensor argmax;
  if (training) argmax = Tensor::empty(pooled.shape(), DType::kU8);
  cpu::conv_max_pool_forward(c.input, c.kernel, c.bias.defined() ? &c.bias : nullptr, c.activation,
                             w, pool, pooled, training ? &argmax : nullptr);
  if (!training) return pooled;
  return record(
      pooled, "conv2d_max_pool2d", {c.input_link, c.kernel_link, c.bias_link},
      [input = c.input.detach(), values = pooled.detach(), argmax, w, pool,
       activation = c.activation, kernel_shape = c.kernel.shape(), has_bias = c.bias.defined()](
          const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
        Tensor grad_kernel = Tensor::empty(kernel_shape), grad_bias;
        if (needs[2] && has_bias) grad_bias = Tensor::empty({w.out_c});
        cpu::conv_max_pool_kernel_gradient(input, grad, values, argmax, activation, w, pool,
                                           grad_kernel, grad_bias.defined() ? &grad_bias : nullptr);
        return {Tensor(), needs[1] ? grad_kernel : Tensor(), grad_bias};
      });
}

}  // namespace

bool conv_pool_fusion_enabled() { return fusion_switch().on(); }
void set_conv_pool_fusion(bool on) { fusion_switch().set(on); }

Tensor conv2d_max_pool2d(const Tensor& input, const Tensor& kernel, const Tensor& bias,
                         const Conv2DParams& conv, const Pool2DParams& pool) {
  if (const auto w = fusable_conv(input, kernel, bias, conv))
    if (const auto after = pool_after(*w, conv.activation, pool))
      return fused({input, kernel, bias, input, kernel, bias, *w, conv.activation, {}, {}}, *after,
                   needs_recording({&kernel, &bias}));
  return max_pool2d(conv2d(input, kernel, bias, conv), pool);
}

Tensor conv2d_deferred(const Tensor& input, const Tensor& kernel, const Tensor& bias,
                       const Conv2DParams& params) {
  const std::optional<cpu::Window2D> w = fusable_conv(input, kernel, bias, params);
  if (!w) return conv2d(input, kernel, bias, params);
  auto recipe = std::make_shared<DeferredConv>();
  {
    NoGradGuard no_grad;  // copies of the values, not part of the graph
    recipe->input = input.clone();
    recipe->kernel = kernel.clone();
    if (bias.defined()) recipe->bias = bias.clone();
  }
  recipe->input_link = input;
  recipe->kernel_link = kernel;
  recipe->bias_link = bias;
  recipe->window = *w;
  recipe->activation = params.activation;
  recipe->output_shape = {w->batch, w->out_h, w->out_w, w->out_c};
  // The fill holds the values only: the links (and their graph) stay with the recipe, which the
  // registry drops with the fill.
  Tensor output = deferred_tensor(
      recipe->output_shape, DType::kF32,
      [input = recipe->input, kernel = recipe->kernel, bias = recipe->bias, w = *w,
       activation = params.activation](Tensor& out) {
        run_kernel<OpId::kConv2D>("conv2d", Device::cpu(), DType::kF32, input, kernel, bias, w,
                                  activation, out, nullptr);
      },
      recipe, &kDeferredConvKind);
  if (!needs_recording({&kernel, &bias})) return output;
  // conv2d's gradient where the input needs none: the kernel's straight from the output's
  // gradient (the output read, so computed, only now), the bias's with it.
  output =
      record(output, "conv2d", {input, kernel, bias},
             [input = recipe->input, y = output.detach(), w = *w, activation = params.activation,
              kernel_shape = kernel.shape(), has_bias = bias.defined()](
                 const Tensor& grad, const NeedsGrad& needs) -> std::vector<Tensor> {
               Tensor grad_kernel = Tensor::empty(kernel_shape), grad_bias;
               if (needs[2] && has_bias) grad_bias = Tensor::empty({w.out_c});
               run_kernel<OpId::kConv2DWeightsFromOutput>(
                   "conv2d", Device::cpu(), DType::kF32, input, grad, y, w, activation, has_bias,
                   grad_kernel, grad_bias.defined() ? &grad_bias : nullptr);
               return {Tensor(), needs[1] ? grad_kernel : Tensor(), grad_bias};
             });
  recipe->node = output.grad_node();
  return output;
}

Tensor max_pool2d_after(const Tensor& x, const Pool2DParams& pool) {
  const auto recipe =
      std::static_pointer_cast<const DeferredConv>(deferred_recipe(x, &kDeferredConvKind));
  // Only the convolution's output itself (or a handle sharing its record): not a view of
  // another shape, and not a detached copy, whose pooling must not reach the kernel.
  if (recipe && x.shape() == recipe->output_shape && conv_pool_fusion_enabled() &&
      !forced_cpu_backend() && kernel_observer() == nullptr) {
    const std::shared_ptr<GradNode>& node = x.grad_node();
    if (node == nullptr || node == recipe->node.lock())
      if (const auto after = pool_after(recipe->window, recipe->activation, pool))
        return fused(*recipe, *after, node != nullptr && grad_enabled());
  }
  return max_pool2d(x, pool);
}

}  // namespace est::ops
