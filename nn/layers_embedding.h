// embedding: a lookup table of learned vectors, as keras.layers.Embedding.
#pragma once

#include <string>

#include "nn/initializers.h"
#include "nn/model_context.h"

namespace est::nn {

struct EmbeddingOptions {
  int64_t input_dim = 0;   // vocabulary size: ids are in [0, input_dim)
  int64_t output_dim = 0;  // vector size
  Initializer embeddings_initializer = random_uniform();  // Keras's 'uniform'
  DType dtype = DType::kF32;
  std::string name;  // empty: "embedding", "embedding_1", ...
};

// ids: int32/int64, any shape. Variable `<name>/embeddings` [input_dim, output_dim].
// Returns [*ids.shape, output_dim]; the gradient scatters into the rows that were used.
Tensor embedding(ModelContext& ctx, const Tensor& ids, const EmbeddingOptions& options);

}  // namespace est::nn
