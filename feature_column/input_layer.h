// input_layer (tf.compat.v1.feature_column.input_layer) and dense_features (the Keras
// DenseFeatures layer): the dense columns' tensors, columns sorted by name, each flattened to
// [batch, elements] and concatenated along axis 1, as _internal_input_layer in
// tensorflow/python/feature_column/feature_column_v2.py / feature_column.py does.
//
// Variables are created under the scope "<layer>/<column's var_scope_name, its name unless it
// shares variables>" (layer "input_layer", or
// "input_layer_1" for a second call in the same model_fn call, as TF's default_name scopes
// number them), so an embedding column's weights are
// "input_layer/<categorical>_embedding/embedding_weights" and a TF checkpoint's values can be
// warm-started by name.
#pragma once

#include <string>
#include <vector>

#include "feature_column/column.h"

namespace est::feature_column {

struct InputLayerOptions {
  std::string name;  // the layer's scope; empty: "input_layer" (numbered per call)
};

Tensor input_layer(const Features& features, const std::vector<DenseColumnPtr>& columns,
                   nn::ModelContext& context, const InputLayerOptions& options = {});
// The same with the scope "dense_features", as the Keras layer names it.
Tensor dense_features(const Features& features, const std::vector<DenseColumnPtr>& columns,
                      nn::ModelContext& context);

}  // namespace est::feature_column
