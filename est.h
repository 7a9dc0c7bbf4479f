// The umbrella header: `#include <est/est.h>` gives a training program everything it uses:
// tensors and ops, the log, model building (layers, losses, optimizers, metrics), input
// pipelines, feature columns, checkpoints, distribution strategies, and the Estimator with its
// specs, hooks and train_and_evaluate.
// Each part also has its own header (ops/ops.h, nn/nn.h, data/data.h,
// feature_column/feature_column.h, checkpoint/checkpoint.h, distribute/distribute.h,
// estimator/estimator.h) for code that needs less.
#pragma once

#include "checkpoint/checkpoint.h"
#include "data/data.h"
#include "distribute/distribute.h"
#include "estimator/canned/canned.h"
#include "estimator/estimator.h"
#include "feature_column/feature_column.h"
#include "keras/keras.h"
#include "nn/metrics.h"
#include "nn/nn.h"
#include "ops/error.h"
#include "ops/logging.h"
#include "ops/ops.h"
