// The TensorFloat-32 switch (ops/tensor_float_32.h): one atomic flag, on by default as in
// TensorFlow.
#include "ops/tensor_float_32.h"

#include <atomic>

namespace est::ops {
namespace {
std::atomic<bool> g_tensor_float_32{true};
}  // namespace

void enable_tensor_float_32_execution(bool enabled) { g_tensor_float_32.store(enabled); }
bool tensor_float_32_execution_enabled() { return g_tensor_float_32.load(); }

}  // namespace est::ops
