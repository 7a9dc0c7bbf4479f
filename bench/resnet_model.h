// The ResNet-style conv net of bench/gpu_bench (its PyTorch twin is ResNetish in
// bench/torch_gpu.py, same shapes): a stem conv 3x3 -> batch norm -> relu to `width` channels,
// `blocks` residual blocks (conv 3x3 -> BN -> relu -> conv 3x3 -> BN, plus the input, relu),
// global average pooling and a dense layer to 10 logits. NHWC, convs without bias (BN follows),
// padding same, so every block keeps the image size.
#pragma once

#include <est/nn/nn.h>
#include <est/ops/ops.h>

namespace bench {

// images: float32 [N, H, W, 3] -> logits [N, 10].
inline est::Tensor resnet_style(est::ModelContext& ctx, const est::Tensor& images, int64_t width,
                                int blocks) {
  using namespace est::nn;
  auto conv_bn = [&](const est::Tensor& x) {
    est::Tensor y =
        conv2d(ctx, x, {.filters = width, .kernel = 3, .padding = same, .use_bias = false});
    return batch_normalization(ctx, y);
  };
  est::Tensor x = est::ops::relu(conv_bn(images));
  for (int b = 0; b < blocks; ++b) {
    est::Tensor y = est::ops::relu(conv_bn(x));
    x = est::ops::relu(est::ops::add(x, conv_bn(y)));
  }
  x = est::ops::mean(x, {1, 2});
  return dense(ctx, x, {.units = 10});
}

}  // namespace bench
