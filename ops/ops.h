// What ops/ offers users and the layers above: tensors, the ops, autograd, backends and threads,
// the memory counters and the TensorFloat-32 switch.
// The kernel contract (registry.h, kernel_ops.h) and the backends' headers (cpu/, onednn/,
// cuda/) are internal: op files and backends include them directly, and they are not installed.
#pragma once

#include "ops/allocator.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/batch_norm.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/error.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "ops/nn_ops.h"
#include "ops/random.h"
#include "ops/sparse.h"
#include "ops/tensor.h"
#include "ops/tensor_float_32.h"
