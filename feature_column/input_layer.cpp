// input_layer and dense_features (see input_layer.h).
#include "feature_column/input_layer.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "ops/array_ops.h"

namespace est::feature_column {
namespace {

Tensor build(const Features& features, const std::vector<DenseColumnPtr>& columns,
             nn::ModelContext& context, std::string_view base, std::string_view explicit_name) {
  if (columns.empty()) throw InvalidArgumentError(std::string(base) + ": no feature columns");
  std::vector<DenseColumnPtr> sorted = columns;
  for (const DenseColumnPtr& column : sorted)
    if (!column) throw InvalidArgumentError(std::string(base) + ": a feature column is null");
  std::sort(sorted.begin(), sorted.end(),
            [](const DenseColumnPtr& a, const DenseColumnPtr& b) { return a->name() < b->name(); });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name() == sorted[i - 1]->name())
      throw InvalidArgumentError(
          fmt::format("{}: duplicate feature column name '{}'", base, sorted[i]->name()));
  auto layer_scope = context.variable_scope(context.layer_name(base, explicit_name));
  std::vector<Tensor> parts;
  int64_t batch = -1;
  std::string first;
  for (const DenseColumnPtr& column : sorted) {
    auto column_scope = context.variable_scope(column->var_scope_name());
    Tensor tensor = column->dense_tensor(features, &context);
    const int64_t elements = ops::num_elements(column->variable_shape());
    if (batch < 0) {
      batch = tensor.dim(0);
      first = column->name();
    } else if (tensor.dim(0) != batch) {
      throw InvalidArgumentError(fmt::format(
          "{}: batch size (first dimension) of each feature must be the same; column '{}' has "
          "{} but '{}' has {}",
          base, column->name(), tensor.dim(0), first, batch));
    }
    parts.push_back(tensor.reshape({batch, elements}));
  }
  return parts.size() == 1 ? parts[0] : ops::concat(parts, 1);
}

}  // namespace

Tensor input_layer(const Features& features, const std::vector<DenseColumnPtr>& columns,
                   nn::ModelContext& context, const InputLayerOptions& options) {
  return build(features, columns, context, "input_layer", options.name);
}

Tensor dense_features(const Features& features, const std::vector<DenseColumnPtr>& columns,
                      nn::ModelContext& context) {
  return build(features, columns, context, "dense_features", {});
}

}  // namespace est::feature_column
