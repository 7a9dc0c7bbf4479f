// pipeline_transform and PrecomputedCategoricalColumn (see pipeline_transform.h).
#include "feature_column/pipeline_transform.h"

#include <fmt/format.h>

namespace est::feature_column {

PrecomputedCategoricalColumn::PrecomputedCategoricalColumn(CategoricalColumnPtr categorical)
    : categorical_(std::move(categorical)) {
  if (!categorical_) throw InvalidArgumentError("pipeline_transform: a column is null");
}

IdWeightPair PrecomputedCategoricalColumn::sparse_tensors(const Features& features) const {
  auto ids = features.find(ids_key(name()));
  if (ids == features.end())
    throw InvalidArgumentError(fmt::format(
        "categorical column '{}' reads the ids that pipeline_transform's map_fn computes "
        "('{}'), which the features do not hold; map the batched dataset with map_fn",
        name(), ids_key(name())));
  auto weights = features.find(weights_key(name()));
  return {ids->second, weights == features.end() ? Tensor() : weights->second};
}

PipelineTransform pipeline_transform(const std::vector<CategoricalColumnPtr>& columns) {
  PipelineTransform out;
  for (const CategoricalColumnPtr& column : columns)
    out.columns.push_back(std::make_shared<const PrecomputedCategoricalColumn>(column));
  out.map_fn = [columns](data::Element element) {
    for (const CategoricalColumnPtr& column : columns) {
      IdWeightPair pair = column->sparse_tensors(element.features);
      const std::string name = column->name();
      element.features.insert_or_assign(PrecomputedCategoricalColumn::ids_key(name), pair.ids);
      if (pair.weights.defined())
        element.features.insert_or_assign(PrecomputedCategoricalColumn::weights_key(name),
                                          pair.weights);
    }
    return element;
  };
  return out;
}

}  // namespace est::feature_column
