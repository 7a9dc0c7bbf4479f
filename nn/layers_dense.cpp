// dense through ops::linear, which fuses bias and the recognised activations.
#include "nn/layers_dense.h"

#include <fmt/format.h>

#include "nn/layer_checks.h"
#include "nn/mixed_precision.h"
#include "ops/linalg.h"

namespace est::nn {

Tensor dense(ModelContext& ctx, const Tensor& input, const DenseOptions& options) {
  std::string name = ctx.layer_name("dense", options.name);
  check_layer_input(name, input, 2, "[batch, features]");
  if (options.units <= 0)
    throw InvalidArgumentError(
        fmt::format("{}: units must be positive, got {}; set .units", name, options.units));
  const mixed_precision::LayerDtypes dtypes = mixed_precision::layer_dtypes(options.dtype, input);
  const Tensor x = mixed_precision::cast_input(dtypes, input);
  const Shape& shape = x.shape();
  int64_t in = shape.back();
  Tensor kernel = mixed_precision::read_variable(
      dtypes, ctx.get_variable(name + "/kernel", {in, options.units}, dtypes.variable,
                               options.kernel_initializer));
  Tensor bias;
  if (options.use_bias)
    bias = mixed_precision::read_variable(
        dtypes, ctx.get_variable(name + "/bias", {options.units}, dtypes.variable,
                                 options.bias_initializer));
  Tensor flat = shape.size() == 2 ? x : x.reshape({-1, in});
  Tensor y = ops::linear(flat, kernel, bias, options.activation.fused());
  if (shape.size() != 2) {
    Shape out_shape = shape;
    out_shape.back() = options.units;
    y = y.reshape(out_shape);
  }
  return options.activation.apply_unfused(y);
}

}  // namespace est::nn
