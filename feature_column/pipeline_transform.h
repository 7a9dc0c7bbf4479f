// Moving the categorical columns' per-value work (vocabulary and hash lookups, crosses) out of
// the training step into the input pipeline's threads, as DESIGN.md asks ("lookups and parsing
// run in the input pipeline's threads"): TF does these lookups inside the graph, on the step's
// critical path; here a dataset map computes each column's ids per batch, and the model reads
// them.
//
//   auto transform = feature_column::pipeline_transform({education, occupation, crossed});
//   ds = tfrecord_dataset(files).map(data::example_parser(spec, "label"), 4).batch(256)
//            .map(transform.map_fn, 4).prefetch(2);
//   ... in model_fn: linear_model(features, {transform.columns..., numeric...}, ctx)
//
// transform.columns are the given columns, same names, buckets and parse specs (so variables
// keep TF's names), reading the ids map_fn stored under "<column name>/ids" (and "/weights"
// for weighted columns) instead of computing them. The ids are the columns' own, bit for bit.
#pragma once

#include <vector>

#include "data/dataset.h"
#include "feature_column/column.h"

namespace est::feature_column {

struct PipelineTransform {
  data::MapFn map_fn;                         // for Dataset::map on batched elements
  std::vector<CategoricalColumnPtr> columns;  // the columns, reading what map_fn stored
};

PipelineTransform pipeline_transform(const std::vector<CategoricalColumnPtr>& columns);

// A categorical column whose ids the input pipeline computed (see above).
class PrecomputedCategoricalColumn final : public CategoricalColumn {
 public:
  explicit PrecomputedCategoricalColumn(CategoricalColumnPtr categorical);
  std::string name() const override { return categorical_->name(); }
  void add_parse_spec(FeatureSpecs& specs) const override { categorical_->add_parse_spec(specs); }
  int64_t num_buckets() const override { return categorical_->num_buckets(); }
  IdWeightPair sparse_tensors(const Features& features) const override;
  // Where map_fn stores the column's ids and weights.
  static std::string ids_key(const std::string& column) { return column + "/ids"; }
  static std::string weights_key(const std::string& column) { return column + "/weights"; }

 private:
  CategoricalColumnPtr categorical_;
};

}  // namespace est::feature_column
