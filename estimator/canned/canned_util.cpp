// The canned estimators' shared model_fn, classifier head choice and label vocabulary
// (tensorflow/estimator canned/*.py, head/base_head.py's vocabulary lookup).
#include "estimator/canned/canned_util.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "feature_column/lookup.h"

namespace est::canned {

std::shared_ptr<const Head> classifier_head(int64_t n_classes, HeadOptions options,
                                            const char* estimator) {
  if (n_classes == 2) return binary_class_head(std::move(options));
  if (n_classes > 2) return multi_class_head(n_classes, std::move(options));
  throw InvalidArgumentError(fmt::format(
      "{}: n_classes must be > 1, got {}; a regression is a *Regressor", estimator, n_classes));
}

void check_label_vocabulary(const std::vector<std::string>& vocabulary, int64_t n_classes,
                            const char* estimator) {
  if (vocabulary.empty()) return;
  if (static_cast<int64_t>(vocabulary.size()) != n_classes)
    throw InvalidArgumentError(fmt::format(
        "{}: label_vocabulary has {} entries but n_classes is {}; give one string per class",
        estimator, vocabulary.size(), n_classes));
  std::set<std::string> seen;
  for (const std::string& entry : vocabulary)
    if (!seen.insert(entry).second)
      throw InvalidArgumentError(fmt::format(
          "{}: label_vocabulary holds '{}' twice; its entries must be distinct", estimator, entry));
}

Tensor label_ids(const Tensor& labels, const std::vector<std::string>& vocabulary) {
  if (labels.dtype() != DType::kString || labels.is_sparse())
    throw InvalidArgumentError(fmt::format(
        "label_vocabulary is given, so labels must be dense strings, got {} {}; pass string "
        "labels or drop label_vocabulary to use integer class ids",
        labels.is_sparse() ? "sparse" : "dense", dtype_name(labels.dtype())));
  const int64_t batch = labels.rank() == 0 ? 1 : labels.dim(0);
  if (labels.numel() != batch)
    throw InvalidArgumentError(
        fmt::format("label_vocabulary: labels must be [batch] or [batch, 1] strings, got shape {}",
                    ops::shape_str(labels.shape())));
  std::map<std::string, int64_t, std::less<>> ids;
  for (size_t i = 0; i < vocabulary.size(); ++i) ids.emplace(vocabulary[i], int64_t(i));
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(batch));
  const std::string* values = labels.data<std::string>();
  for (int64_t i = 0; i < batch; ++i) {
    auto found = ids.find(values[i]);
    if (found == ids.end()) {
      std::string known;
      for (const std::string& entry : vocabulary)
        known += (known.empty() ? "'" : ", '") + entry + "'";
      throw InvalidArgumentError(
          fmt::format("label '{}' (example {} of the batch) is not in label_vocabulary [{}]",
                      values[i], i, known));
    }
    out.push_back(found->second);
  }
  return Tensor::from_vector<int64_t>(out, {batch, 1});
}

void add_vocabulary_classes(Predictions& predictions, const std::vector<std::string>& vocabulary) {
  auto class_ids = predictions.find("class_ids");
  if (class_ids == predictions.end()) return;
  // TF's index_to_string_table_from_tensor; reported as a lookup, which an export writes as a
  // Gather from the vocabulary.
  const feature_column::Lookup lookup(
      {.kind = feature_column::LookupTable::Kind::kIndexToString, .string_keys = vocabulary});
  predictions["classes"] = lookup.strings(class_ids->second);
  feature_column::report_lookup("label_vocabulary", lookup.table(), class_ids->second,
                                predictions["classes"]);
  auto all_class_ids = predictions.find("all_class_ids");
  if (all_class_ids == predictions.end()) return;
  predictions["all_classes"] = lookup.strings(all_class_ids->second);
  feature_column::report_lookup("label_vocabulary", lookup.table(), all_class_ids->second,
                                predictions["all_classes"]);
}

ModelFn canned_model_fn(LogitFn logit_fn, std::shared_ptr<const Head> head,
                        OptimizerFn optimizer_fn, std::vector<std::string> label_vocabulary) {
  return [logit_fn = std::move(logit_fn), head = std::move(head),
          optimizer_fn = std::move(optimizer_fn), vocabulary = std::move(label_vocabulary)](
             const Features& features, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
    Tensor logits = logit_fn(features, mode, ctx, head->logits_dimension());
    Tensor head_labels = labels;
    if (!vocabulary.empty() && labels.defined()) head_labels = label_ids(labels, vocabulary);
    std::optional<optim::Optimizer> optimizer;
    if (mode == ModeKeys::kTrain) optimizer = optimizer_fn();
    EstimatorSpec spec =
        head->create_estimator_spec(features, mode, logits, head_labels, ctx, optimizer);
    if (!vocabulary.empty()) {
      add_vocabulary_classes(spec.predictions, vocabulary);
      // The export outputs' classes become the vocabulary's strings, as TF's heads give them.
      if (mode == ModeKeys::kPredict) spec.export_outputs = head->export_outputs(spec.predictions);
    }
    return spec;
  };
}

}  // namespace est::canned
