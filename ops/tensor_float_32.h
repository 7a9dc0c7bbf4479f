// Whether float32 matrix products and convolutions may run on TensorFloat-32 tensor cores
// (inputs rounded to a 10-bit mantissa, float32 accumulation), the switch of TensorFlow's
// tf.config.experimental.enable_tensor_float_32_execution (tensorflow/tsl/platform/
// tensor_float_32_utils.h; what it covers followed from TF's stream executor: cuBLAS's math
// mode and cuDNN's convolution math type, float32 only). As in TensorFlow it is on by default
// and process-wide (a setting of the user's, read by the CUDA backend when it picks the math of
// a GEMM or a convolution plan); the CPU backends ignore it. Turn it off for float32 results
// within float32 rounding (the test suites do, as TF's tests do).
#pragma once

namespace est::ops {

void enable_tensor_float_32_execution(bool enabled);
bool tensor_float_32_execution_enabled();

}  // namespace est::ops
