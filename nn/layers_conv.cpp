// conv2d through ops::conv2d (bias and activation fused), pooling through ops pooling; a
// conv2d's output feeding a max_pooling2d is pooled without being written (ops/conv_pool.h).
#include "nn/layers_conv.h"

#include <fmt/format.h>

#include "nn/layer_checks.h"
#include "nn/mixed_precision.h"
#include "ops/conv_pool.h"

namespace est::nn {
namespace {

void check_positive(std::string_view layer, std::string_view field, Size2 size) {
  if (size.h <= 0 || size.w <= 0)
    throw InvalidArgumentError(fmt::format("{}: {} must be positive, got {{{}, {}}}; set .{}",
                                           layer, field, size.h, size.w, field));
}

ops::Pool2DParams pool_params(std::string_view layer, Size2 pool_size, Size2 strides,
                              Padding padding) {
  if (!strides.is_set()) strides = pool_size;
  check_positive(layer, "pool_size", pool_size);
  check_positive(layer, "strides", strides);
  return {
      .window = {pool_size.h, pool_size.w}, .strides = {strides.h, strides.w}, .padding = padding};
}

}  // namespace

Tensor conv2d(ModelContext& ctx, const Tensor& input, const Conv2DOptions& options) {
  std::string name = ctx.layer_name("conv2d", options.name);
  check_layer_input(name, input, 4, "[batch, height, width, channels]", 4);
  if (options.filters <= 0)
    throw InvalidArgumentError(
        fmt::format("{}: filters must be positive, got {}; set .filters", name, options.filters));
  check_positive(name, "kernel", options.kernel);
  check_positive(name, "strides", options.strides);
  check_positive(name, "dilation_rate", options.dilation_rate);
  if ((options.strides.h > 1 || options.strides.w > 1) &&
      (options.dilation_rate.h > 1 || options.dilation_rate.w > 1))
    throw InvalidArgumentError(fmt::format(
        "{}: strides > 1 together with dilation_rate > 1 is not supported (as in TensorFlow); "
        "use one or the other",
        name));
  const mixed_precision::LayerDtypes dtypes = mixed_precision::layer_dtypes(options.dtype, input);
  const Tensor x = mixed_precision::cast_input(dtypes, input);
  int64_t channels = x.dim(3);
  Tensor kernel = mixed_precision::read_variable(
      dtypes, ctx.get_variable(name + "/kernel",
                               {options.kernel.h, options.kernel.w, channels, options.filters},
                               dtypes.variable, options.kernel_initializer));
  Tensor bias;
  if (options.use_bias)
    bias = mixed_precision::read_variable(
        dtypes, ctx.get_variable(name + "/bias", {options.filters}, dtypes.variable,
                                 options.bias_initializer));
  ops::Conv2DParams params{.strides = {options.strides.h, options.strides.w},
                           .padding = options.padding,
                           .dilations = {options.dilation_rate.h, options.dilation_rate.w},
                           .activation = options.activation.fused()};
  // Deferred: a max_pooling2d straight after pools it without computing it (ops/conv_pool.h).
  return options.activation.apply_unfused(ops::conv2d_deferred(x, kernel, bias, params));
}

Tensor max_pooling2d(const Tensor& x, Size2 pool_size, Size2 strides, Padding padding) {
  check_layer_input("max_pooling2d", x, 4, "[batch, height, width, channels]", 4);
  // After a conv2d, from the convolution's arguments where the fused kernel applies.
  return ops::max_pool2d_after(x, pool_params("max_pooling2d", pool_size, strides, padding));
}

Tensor average_pooling2d(const Tensor& x, Size2 pool_size, Size2 strides, Padding padding) {
  check_layer_input("average_pooling2d", x, 4, "[batch, height, width, channels]", 4);
  return ops::avg_pool2d(x, pool_params("average_pooling2d", pool_size, strides, padding));
}

}  // namespace est::nn
