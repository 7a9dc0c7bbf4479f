// Everything a model_fn calls: variable store and context, layers, initializers, losses,
// optimizers and schedules. `using namespace est::nn;` makes the layers, losses and the common
// ops (relu, flatten, argmax, ...) available unqualified; optimizers are `est::optim::...`.
#pragma once

#include "nn/activation.h"
#include "nn/captured_step.h"
#include "nn/clipping.h"
#include "nn/functions.h"
#include "nn/initializers.h"
#include "nn/layers_conv.h"
#include "nn/layers_dense.h"
#include "nn/layers_dropout.h"
#include "nn/layers_embedding.h"
#include "nn/layers_norm.h"
#include "nn/losses.h"
#include "nn/metrics.h"
#include "nn/mixed_precision.h"
#include "nn/model_context.h"
#include "nn/optimizer.h"
#include "nn/optimizers.h"
#include "nn/restore_error.h"
#include "nn/schedules.h"
#include "nn/sequential.h"
#include "nn/train_op.h"
#include "nn/variable_store.h"
#include "ops/autograd.h"
