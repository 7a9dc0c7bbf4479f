// The canned (premade) estimators, as tf.estimator's: Linear*, DNN*, DNNLinearCombined* and
// Baseline* classifiers, regressors and estimators (the last take any head), each an Estimator
// built from feature columns and a head (head.h). est:: holds TF2's classes, est::compat::v1:: TF1's (they differ in the
// default loss_reduction: SUM_OVER_BATCH_SIZE and SUM).
#pragma once

#include "estimator/canned/baseline.h"
#include "estimator/canned/dnn.h"
#include "estimator/canned/dnn_linear_combined.h"
#include "estimator/canned/head.h"
#include "estimator/canned/linear.h"
#include "estimator/canned/optimizers.h"
