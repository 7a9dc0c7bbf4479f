// What the canned estimators share (tensorflow/estimator canned/*.py and head/base_head.py):
// the classifier head for n_classes, label_vocabulary (string labels in, string classes out),
// and the model_fn that joins a network's logits to a head and an optimizer.
//
// label_vocabulary follows TF's heads: labels are strings looked up in the vocabulary (their
// position is the class id; one not in it is an InvalidArgumentError naming it), and the
// predictions `classes` [batch, 1] and `all_classes` [batch, n_classes] hold the vocabulary's
// strings. Without a vocabulary labels are integer class ids and `classes` / `all_classes` the
// ids' decimal strings (head.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "estimator/canned/head.h"
#include "estimator/canned/optimizers.h"
#include "estimator/params.h"
#include "estimator/specs.h"

namespace est::canned {

// n_classes == 2: binary_class_head; n_classes > 2: multi_class_head; else an
// InvalidArgumentError naming `estimator`.
std::shared_ptr<const Head> classifier_head(int64_t n_classes, HeadOptions options,
                                            const char* estimator);

// Checks label_vocabulary against n_classes: either empty or n_classes distinct strings.
void check_label_vocabulary(const std::vector<std::string>& vocabulary, int64_t n_classes,
                            const char* estimator);

// The head of a canned *Classifier from its options: label_vocabulary checked against
// n_classes, then classifier_head with the options' weight_column and loss_reduction (the
// class's `reduction` when unset).
template <class Options>
std::shared_ptr<const Head> classifier_head_of(const Options& options, nn::Reduction reduction,
                                               const char* estimator) {
  check_label_vocabulary(options.label_vocabulary, options.n_classes, estimator);
  return classifier_head(options.n_classes,
                         {.weight_column = options.weight_column,
                          .loss_reduction = options.loss_reduction.value_or(reduction)},
                         estimator);
}

// The head of a canned *Regressor from its options, as classifier_head_of.
template <class Options>
std::shared_ptr<const Head> regression_head_of(const Options& options, nn::Reduction reduction) {
  return regression_head(options.label_dimension,
                         {.weight_column = options.weight_column,
                          .loss_reduction = options.loss_reduction.value_or(reduction)});
}

// String labels [batch] or [batch, 1] -> int64 class ids [batch, 1] by their position in
// `vocabulary`. Non-string labels are an InvalidArgumentError saying that label_vocabulary
// expects strings.
Tensor label_ids(const Tensor& labels, const std::vector<std::string>& vocabulary);

// Replaces `classes` with the vocabulary's strings for `class_ids` and adds `all_classes`.
void add_vocabulary_classes(Predictions& predictions, const std::vector<std::string>& vocabulary);

// The network part of a canned model_fn: logits [batch, logits_dimension] for these features.
using LogitFn = std::function<Tensor(const Features& features, ModeKeys mode, ModelContext& ctx,
                                     int64_t logits_dimension)>;
// The optimizer of a training call (built per call: default learning rates may depend on the
// columns, optimizers are cheap values).
using OptimizerFn = std::function<optim::Optimizer()>;

// model_fn = logit_fn, then head.create_estimator_spec with optimizer_fn() in TRAIN; with a
// label_vocabulary, string labels are turned into ids first and the classes back into strings.
ModelFn canned_model_fn(LogitFn logit_fn, std::shared_ptr<const Head> head,
                        OptimizerFn optimizer_fn, std::vector<std::string> label_vocabulary = {});

// TF's default loss reduction of the v2 classes (SUM_OVER_BATCH_SIZE) unless one was given.
inline nn::Reduction reduction_or_default(std::optional<nn::Reduction> reduction) {
  return reduction.value_or(nn::Reduction::kSumOverBatchSize);
}

}  // namespace est::canned
