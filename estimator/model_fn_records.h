// What a model_fn call records through its ctx besides variables, for the Estimator to collect
// after the call: the summaries (est::summary::scalar/histogram/image/text, TF's SUMMARIES
// collection that Scaffold.summary_op merges) and tensors given a name (est::identity, a
// graph tensor's name in TF) that hooks fetch by name. Define-by-run has no graph to look a
// name up in later, so the call keeps them here and the Estimator moves them into the spec it
// returned (EstimatorSpec::summaries, ::named_tensors).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace est {

// One summary of one model_fn call, evaluated already (define-by-run): written as it is by the
// SummarySaverHook on the steps it saves.
struct SummaryValue {
  enum class Kind { kScalar, kHistogram, kImage, kText };
  Kind kind = Kind::kScalar;
  std::string tag;      // TF's tag: the cleaned name under the current scope, made unique
  Tensor value;         // detached: scalar, any shape, [batch, height, width, channels], string
  int max_outputs = 3;  // kImage: images of the batch written
};

struct ModelFnRecords {
  std::vector<SummaryValue> summaries;
  std::map<std::string, Tensor> named_tensors;  // full name ("block/mean") -> value
  // How often each summary or tensor name was used in this call (uniquified as TF's name
  // scopes: "loss", "loss_1", ...).
  std::map<std::string, int64_t> name_counts;
};

}  // namespace est
