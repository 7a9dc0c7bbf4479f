// TensorFlow's feature columns (tf.feature_column), following
// tensorflow/python/feature_column/feature_column_v2.py: numeric and bucketized columns,
// categorical columns (identity, vocabulary list and file, hash bucket, crossed), indicator
// and embedding columns, weighted_categorical_column, input_layer / dense_features and
// linear_model, sequence columns and sequence_features (sequence_column.h), with TF's hashing
// bit for bit; pipeline_transform moves categorical lookups into the input pipeline.
#pragma once

#include "feature_column/categorical.h"
#include "feature_column/column.h"
#include "feature_column/crossed.h"
#include "feature_column/dense_columns.h"
#include "feature_column/hashing.h"
#include "feature_column/input_layer.h"
#include "feature_column/linear.h"
#include "feature_column/numeric.h"
#include "feature_column/pipeline_transform.h"
#include "feature_column/sequence_column.h"
