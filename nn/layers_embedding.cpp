// embedding through ops::gather (which checks the ids against the vocabulary size). Under a
// mixed global policy the table stays in its dtype and the looked-up rows are cast to the
// compute dtype, as Keras's Embedding does.
#include "nn/layers_embedding.h"

#include <fmt/format.h>

#include "nn/mixed_precision.h"
#include "ops/array_ops.h"

namespace est::nn {

Tensor embedding(ModelContext& ctx, const Tensor& ids, const EmbeddingOptions& options) {
  std::string name = ctx.layer_name("embedding", options.name);
  if (!ids.defined()) throw InvalidArgumentError(name + ": the ids tensor is undefined");
  if (ids.dtype() != DType::kI32 && ids.dtype() != DType::kI64)
    throw InvalidArgumentError(
        fmt::format("{}: ids must be int32 or int64, got {}; cast them (ops::cast)", name,
                    dtype_name(ids.dtype())));
  if (options.input_dim <= 0 || options.output_dim <= 0)
    throw InvalidArgumentError(
        fmt::format("{}: input_dim and output_dim must be positive, got {} and {}; set .input_dim "
                    "(vocabulary size) and .output_dim",
                    name, options.input_dim, options.output_dim));
  // Read only at the ids' rows: under parameter servers, only those are pulled.
  Tensor table =
      ctx.get_variable_rows(name + "/embeddings", {options.input_dim, options.output_dim},
                            options.dtype, options.embeddings_initializer, ids);
  Tensor rows = ops::gather(table, ids, 0);
  const mixed_precision::Policy policy = mixed_precision::global_policy();
  return policy.is_mixed() ? ops::cast(rows, policy.compute_dtype()) : rows;
}

}  // namespace est::nn
